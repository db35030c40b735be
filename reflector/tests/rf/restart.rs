//! RF5 after an API server restart: the reflector is back in sync soon
//! after the server is, not after the backoff its outage grew.
//!
//! The restart is the testserver's: connections cut, the port refusing
//! connections for 3 s, then 503s (Retry-After 1), then watches answering
//! 429 while the watch cache fills, then 410 for versions from before the
//! restart. The backoff has no jitter here, so the waits are certain: the
//! refusals grow it to 6.4 s; the 503 and 429 are waited exactly (1 s, as
//! asked); the relist the 410 calls for comes at once (a spread over the
//! backoff, which without jitter is none), where client-go's rules wait
//! the grown backoff first. The client-go preset, on a server of its own
//! restarted at the same moment, shows that wait.

use kcontrol_reflector::WatchConfig;
use std::sync::Arc;
use std::time::Duration;

use kcontrol_client::Api;
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_reflector::{BackoffConfig, PacingPreset, ReflectorConfig, RestartCause};
use kcontrol_testserver::{Restart, TestServer};

use crate::support::*;

const RESTART: Restart = Restart {
    down: Duration::from_secs(3),
    unavailable: Duration::from_secs(1),
    initializing: Duration::from_secs(2),
};

fn start(server: &TestServer, pacing: PacingPreset, recorder: &Arc<Recorder>) -> Harness {
    let api: Api<ConfigMap> = Api::namespaced(client_for(server.url()), NS);
    let backoff = BackoffConfig {
        jitter: 0.0,
        ..BackoffConfig::default()
    };
    Harness::start(
        Arc::new(api),
        ReflectorConfig::default()
            .watch_config(WatchConfig::default().backoff(backoff).pacing(pacing))
            .metrics(recorder.clone()),
    )
}

/// The wait before the relist that the restart's 410 called for.
fn wait_before_relist_after_410(recorder: &Recorder) -> Option<Duration> {
    recorder
        .restarts()
        .into_iter()
        .find(|(s, _)| *s == Seen::Relisting(RestartCause::Expired))
        .map(|(_, wait)| wait.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf5_after_a_restart_the_cache_is_in_sync_soon_after_the_server_is_back() {
    let (ours, theirs) = (server().await, server().await);
    let (recorder, reference) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
    for s in [&ours, &theirs] {
        seed(s, 20);
    }
    let h = start(&ours, PacingPreset::Kcontrol, &recorder);
    let go = start(&theirs, PacingPreset::ClientGo, &reference);
    for (h, s) in [(&h, &ours), (&go, &theirs)] {
        h.synced().await;
        h.converge(s).await;
        wait_watch_delivered(s, h).await;
    }

    let (faults, reference_faults) = (ours.faults().clone(), theirs.faults().clone());
    tokio::join!(faults.restart(RESTART), reference_faults.restart(RESTART));
    // changes made once the server is back reach the cache too
    for s in [&ours, &theirs] {
        update(s, "cm-0", "after the restart");
        s.objects()
            .create(
                "configmaps",
                NS,
                configmap("cm-new", "created after the restart"),
            )
            .unwrap();
    }
    h.converge(&ours).await;
    // how soon is the benchmarks' business (`kcontrol-bench restart`); the
    // rule that makes it soon is proven by the recorded waits
    assert_eq!(
        wait_before_relist_after_410(&recorder),
        Some(Duration::ZERO),
        "{:?}",
        recorder.restarts()
    );
    go.converge(&theirs).await;
    // client-go's rules: the relist waits the backoff the refusals grew
    let reference_wait = wait_before_relist_after_410(&reference);
    assert!(
        reference_wait >= Some(Duration::from_millis(3200)),
        "{:?}",
        reference.restarts()
    );
    // both listed once for the restart, and no request came sooner than
    // the server had asked
    for s in [&ours, &theirs] {
        assert_eq!(requests(s, kcontrol_testserver::Verb::List).len(), 2);
        assert_eq!(s.counters().retry_after_violations, 0);
    }
    h.stop().await;
    go.stop().await;
}
