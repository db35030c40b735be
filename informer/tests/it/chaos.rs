//! The chaos test: random creates, updates and deletes on 2,000 ConfigMaps
//! while the server injects random faults (dropped watches, 410 on lists
//! and watches, compaction, 429, 5xx, corrupt and foreign watch frames,
//! latency, paused delivery, a lagging replica, an initializing watch
//! cache, API server restarts) for a bounded time. Then the faults stop, and
//! within a deadline the store holds exactly the server's objects at the
//! server's resourceVersions, and so does the state rebuilt from each
//! handler's notifications — a handler added before start, and one added
//! in the middle of the chaos (RF8 through the informer, IN2 under faults).

use kcontrol_informer::WatchConfig;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kcontrol_client::Api;
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_informer::SharedIndexInformer;
use kcontrol_reflector::{BackoffConfig, ReflectorConfig};
use kcontrol_testserver::{Failure, Objects, Restart, TestServer};
use tokio_util::sync::CancellationToken;

use crate::support::*;

const OBJECTS: usize = 2_000;
const CHAOS: Duration = Duration::from_secs(12);

/// A small deterministic random number generator (xorshift64*), seeded
/// from the clock and printed, so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) % n
    }
}

fn namespace(i: u64) -> &'static str {
    ["alpha", "beta", "gamma"][usize::try_from(i % 3).unwrap()]
}

/// Random writes until `end`: creates of absent objects, updates and
/// deletes of present ones. Returns how many writes succeeded.
fn write_randomly(objects: &Objects, seed: u64, end: Instant) -> usize {
    let mut rng = Rng(seed);
    let mut writes = 0;
    let mut round = 0u64;
    while Instant::now() < end {
        round += 1;
        let i = rng.below(OBJECTS as u64);
        let (ns, name) = (namespace(i), format!("cm-{i}"));
        let present = objects.get("configmaps", ns, &name).is_some();
        let done = match (present, rng.below(10)) {
            (false, _) => objects
                .create("configmaps", ns, cm(&name, &round.to_string()))
                .is_ok(),
            (true, 0..=6) => objects
                .update("configmaps", ns, cm(&name, &round.to_string()))
                .is_ok(),
            (true, _) => objects.delete("configmaps", ns, &name).is_ok(),
        };
        writes += usize::from(done);
        if round.is_multiple_of(64) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    writes
}

/// Random faults until `end`, a few every 100-400 ms.
async fn inject_faults(server: &TestServer, seed: u64, end: Instant) -> Vec<&'static str> {
    let faults = server.faults();
    let mut rng = Rng(seed);
    let mut injected = Vec::new();
    while Instant::now() < end {
        let fault = match rng.below(15) {
            0 => {
                faults.close_all_watches();
                "close watches"
            }
            1 => {
                faults.expire_next_lists(1 + rng.below(2));
                "410 on lists"
            }
            2 => {
                faults.expire_next_watches(1);
                "410 on a watch"
            }
            3 => {
                faults.compact();
                faults.close_all_watches();
                "compaction"
            }
            4 => {
                faults.fail_next(
                    1 + rng.below(3),
                    Failure::TooManyRequests {
                        retry_after_secs: rng.below(2),
                    },
                );
                "429"
            }
            5 => {
                faults.fail_next(1 + rng.below(3), Failure::InternalError);
                "500"
            }
            6 => {
                faults.fail_next(1 + rng.below(3), Failure::ServiceUnavailable);
                "503"
            }
            7 => {
                faults.corrupt_next_watch_frames(1);
                "corrupt frame"
            }
            8 => {
                faults.send_unexpected_kind_frames(1);
                "foreign frame"
            }
            9 => {
                faults.close_watches_after(Some(1 + rng.below(50)));
                "short watches"
            }
            10 => {
                faults.pause_watches();
                tokio::time::sleep(Duration::from_millis(rng.below(300))).await;
                faults.resume_watches();
                "paused delivery"
            }
            11 => {
                let now = server.objects().resource_version();
                faults.serve_from_lagging_replica(
                    1 + rng.below(3),
                    now.saturating_sub(rng.below(200)),
                );
                "lagging replica"
            }
            12 => {
                faults
                    .initialize_watch_cache("configmaps", Duration::from_millis(rng.below(1_500)));
                "initializing watch cache"
            }
            13 => {
                faults
                    .restart(Restart {
                        down: Duration::from_millis(rng.below(500)),
                        unavailable: Duration::from_millis(rng.below(500)),
                        initializing: Duration::from_millis(rng.below(1_000)),
                    })
                    .await;
                "restart"
            }
            _ => {
                faults.set_latency(Duration::from_millis(rng.below(30)));
                "latency"
            }
        };
        injected.push(fault);
        tokio::time::sleep(Duration::from_millis(100 + rng.below(300))).await;
    }
    faults.reset();
    faults.close_watches_after(None);
    faults.resume_watches();
    faults.set_latency(Duration::ZERO);
    injected
}

/// Keys missing, extra or at another version.
fn differences(got: &BTreeMap<String, String>, want: &BTreeMap<String, String>) -> usize {
    want.iter().filter(|(k, v)| got.get(*k) != Some(*v)).count()
        + got.keys().filter(|k| !want.contains_key(*k)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_store_and_handlers_converge_to_the_server() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1;
    eprintln!("chaos seed {seed}");
    let server = TestServer::builder()
        .history_size(2_000)
        .bookmark_interval(Duration::from_millis(300))
        .start()
        .await
        .unwrap();
    namespaces(&server, &["alpha", "beta", "gamma"]);
    for i in 0..OBJECTS as u64 {
        if i % 4 != 0 {
            server
                .objects()
                .create("configmaps", namespace(i), cm(&format!("cm-{i}"), "0"))
                .unwrap();
        }
    }
    let informer = SharedIndexInformer::builder(Api::<ConfigMap>::all(client(&server)))
        .name("chaos")
        .reflector_config(
            ReflectorConfig::default().watch_config(
                WatchConfig::default()
                    .page_size(150)
                    .min_watch_timeout(Duration::from_secs(2))
                    .backoff(BackoffConfig {
                        initial: Duration::from_millis(20),
                        max: Duration::from_millis(300),
                        reset_after: Duration::from_secs(3),
                        jitter: 0.5,
                    }),
            ),
        )
        .build();
    let early = Recorder::new();
    let early_reg = informer.add_event_handler(Arc::clone(&early)).unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (informer, shutdown) = (Arc::clone(&informer), shutdown.clone());
        async move { informer.run(shutdown).await.unwrap() }
    });

    let end = Instant::now() + CHAOS;
    // writes on a blocking thread, faults on this task, a late handler midway
    let writer = {
        let objects = server.objects();
        tokio::task::spawn_blocking(move || write_randomly(&objects, seed, end))
    };
    let (injected, late) = tokio::join!(inject_faults(&server, seed.rotate_left(17), end), async {
        tokio::time::sleep(CHAOS / 2).await;
        let late = Recorder::new();
        let reg = informer.add_event_handler(Arc::clone(&late)).unwrap();
        (late, reg)
    });
    let writes = bounded(writer).await.unwrap();
    eprintln!("{writes} writes, {} faults: {injected:?}", injected.len());
    assert!(writes > 1_000, "the writer made progress");

    // faults have stopped: everything converges to the server
    let want = server_view(&server, None);
    let converged = try_eventually("every view to converge", async || {
        view_of(&informer.store().list()) == want && early.view() == want && late.0.view() == want
    })
    .await
    .is_ok();
    let store = view_of(&informer.store().list());
    assert!(
        converged,
        "not converged with the server's {} objects: store {} differ, early handler {} differ, late handler {} differ",
        want.len(),
        differences(&store, &want),
        differences(&early.view(), &want),
        differences(&late.0.view(), &want),
    );
    assert!(
        early.errors().is_empty(),
        "{:?}",
        &early.errors()[..early.errors().len().min(5)]
    );
    assert!(
        late.0.errors().is_empty(),
        "{:?}",
        &late.0.errors()[..late.0.errors().len().min(5)]
    );
    // counted once the handlers return, a moment after they recorded
    eventually(
        "early_reg.has_synced() && late.1.has_synced()",
        async || early_reg.has_synced() && late.1.has_synced(),
    )
    .await;
    assert!(informer.store().check_consistency().is_ok());
    shutdown.cancel();
    bounded(run).await.unwrap();
}
