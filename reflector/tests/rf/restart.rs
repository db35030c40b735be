//! RF5 after an API server restart: the reflector is back in sync soon
//! after the server is, not after the backoff its outage grew.
//!
//! The restart is the testserver's: connections cut, the port refusing
//! connections, then 503s (Retry-After 1), then watches answering 429
//! while the watch cache fills, then 410 for versions from before the
//! restart. The backoff has no jitter here, so the waits the old rules
//! made are certain: the outage grows the backoff past 3 s, the 429 then
//! waited 6.4 s and the relist after the 410 12.8 s (about 22 s from the
//! server's return to a synced cache); waiting what the server asks for
//! (Retry-After) and starting the backoff over once a watch starts again
//! takes under 5 s.

use std::sync::Arc;
use std::time::Duration;

use kcontrol_client::Api;
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_reflector::{BackoffConfig, ReflectorConfig};
use kcontrol_testserver::Restart;
use tokio::time::Instant;

use crate::support::*;

/// Generous for a loaded machine (the reflector needs under 5 s), and far
/// below the 22 s that waiting out the grown backoff takes.
const BACK_IN_SYNC_WITHIN: Duration = Duration::from_secs(12);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf5_after_a_restart_the_cache_is_in_sync_soon_after_the_server_is_back() {
    let server = server().await;
    seed(&server, 20);
    let api: Api<ConfigMap> = Api::namespaced(client_for(server.url()), NS);
    let backoff = BackoffConfig {
        jitter: 0.0,
        ..BackoffConfig::default()
    };
    let h = Harness::start(Arc::new(api), ReflectorConfig::default().backoff(backoff));
    h.synced().await;
    h.converge(&server).await;
    wait_watch_delivered(&server, &h).await;

    server
        .faults()
        .restart(Restart {
            down: Duration::from_secs(3),
            unavailable: Duration::from_secs(1),
            initializing: Duration::from_secs(2),
        })
        .await;
    let back = Instant::now();
    // changes made once the server is back reach the cache too
    update(&server, "cm-0", "after the restart");
    server
        .objects()
        .create(
            "configmaps",
            NS,
            configmap("cm-new", "created after the restart"),
        )
        .unwrap();
    h.converge(&server).await;
    let took = back.elapsed();
    assert!(
        took < BACK_IN_SYNC_WITHIN,
        "back in sync {took:?} after the server's return; errors: {:?}",
        h.errors()
    );
    h.stop().await;
}
