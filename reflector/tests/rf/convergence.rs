//! RF8: after any sequence of faults the consumer converges to exactly the
//! server's state. A proptest draws schedules of object churn (creates,
//! updates, deletes) interleaved with every fault the testserver injects
//! (closed watches, 410 on lists and watches, compaction, missed changes,
//! 429, 5xx, corrupt frames, frames of another kind, watches cut after a few
//! events, lagging replicas), in list+watch and in WatchList mode; once the
//! faults stop, the store must hold the server's keys at the server's
//! resourceVersions.
//!
//! A second property (RF1 with RF9) puts lists cut short and lagging
//! replicas together: whatever happens, the versions handlers see of a key
//! never decrease, and an object that exists throughout is never deleted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_reflector::ReflectorConfig;
use kcontrol_testserver::{Failure, TestServer};
use proptest::prelude::*;

use crate::support::*;

const OBJECTS: usize = 300;

#[derive(Clone, Debug)]
enum Step {
    Put(u16),
    Delete(u16),
    Burst(u16, u8),
    CloseWatches,
    ExpireWatch,
    ExpireList,
    Compact,
    MissChangesThenCompact(u16),
    TooManyRequests,
    ServerErrors(u8),
    CorruptFrame,
    ForeignFrame,
    CloseWatchesAfter(u8),
    Sleep(u8),
    /// The next lists and watches come from a replica this many versions
    /// behind.
    Lagging(u8),
    /// Watches answer 429 while the watch cache initializes.
    Initializing(u8),
}

fn step() -> impl Strategy<Value = Step> {
    let name = 0u16..(OBJECTS as u16 + 20);
    prop_oneof![
        6 => name.clone().prop_map(Step::Put),
        3 => name.clone().prop_map(Step::Delete),
        2 => (name.clone(), 2u8..20).prop_map(|(n, k)| Step::Burst(n, k)),
        2 => Just(Step::CloseWatches),
        2 => Just(Step::ExpireWatch),
        1 => Just(Step::ExpireList),
        1 => Just(Step::Compact),
        2 => name.prop_map(Step::MissChangesThenCompact),
        1 => Just(Step::TooManyRequests),
        2 => (1u8..4).prop_map(Step::ServerErrors),
        2 => Just(Step::CorruptFrame),
        1 => Just(Step::ForeignFrame),
        1 => (1u8..5).prop_map(Step::CloseWatchesAfter),
        3 => (1u8..10).prop_map(Step::Sleep),
        2 => (1u8..40).prop_map(Step::Lagging),
        1 => (1u8..10).prop_map(Step::Initializing),
    ]
}

fn name(i: u16) -> String {
    format!("bulk-{i}")
}

/// Creates or updates object `i`.
fn put(server: &TestServer, i: u16, round: usize) {
    let objects = server.objects();
    let value = format!("r{round}");
    if objects.get("configmaps", NS, &name(i)).is_some() {
        let _ = objects.update("configmaps", NS, configmap(&name(i), &value));
    } else {
        let _ = objects.create("configmaps", NS, configmap(&name(i), &value));
    }
}

fn apply(server: &TestServer, step: &Step, round: usize) -> Duration {
    let faults = server.faults();
    match *step {
        Step::Put(i) => put(server, i, round),
        Step::Delete(i) => {
            let _ = server.objects().delete("configmaps", NS, &name(i));
        }
        Step::Burst(i, k) => {
            for j in 0..u16::from(k) {
                put(server, (i + j * 7) % (OBJECTS as u16 + 20), round);
            }
        }
        Step::CloseWatches => faults.close_all_watches(),
        Step::ExpireWatch => {
            faults.expire_next_watches(1);
            faults.close_all_watches();
        }
        Step::ExpireList => faults.expire_next_lists(1),
        Step::Compact => {
            bump_version(server);
            faults.compact();
        }
        Step::MissChangesThenCompact(i) => {
            faults.pause_watches();
            put(server, i, round);
            let _ = server.objects().delete("configmaps", NS, &name(i / 2));
            bump_version(server);
            faults.compact();
            faults.close_all_watches();
            faults.resume_watches();
        }
        Step::TooManyRequests => faults.fail_next(
            1,
            Failure::TooManyRequests {
                retry_after_secs: 1,
            },
        ),
        Step::ServerErrors(n) => faults.fail_next(u64::from(n), Failure::InternalError),
        Step::CorruptFrame => faults.corrupt_next_watch_frames(1),
        Step::ForeignFrame => faults.send_unexpected_kind_frames(1),
        Step::CloseWatchesAfter(n) => faults.close_watches_after(Some(u64::from(n) * 5)),
        Step::Sleep(n) => return Duration::from_millis(u64::from(n) * 20),
        Step::Lagging(k) => {
            let now = bump_version(server);
            faults.serve_from_lagging_replica(3, now.saturating_sub(u64::from(k)));
        }
        Step::Initializing(n) => {
            faults.initialize_watch_cache("configmaps", Duration::from_millis(u64::from(n) * 50));
        }
    }
    Duration::from_millis(5)
}

async fn run_schedule(schedule: Vec<Step>, watch_list: bool, page_size: u32) {
    let server = server().await;
    bulk_seed(&server, OBJECTS);
    let config = ReflectorConfig::<ConfigMap>::default()
        .watch_config(fast_watch().use_watch_list(watch_list).page_size(page_size));
    let h = Harness::for_url(server.url(), config);
    for (round, step) in schedule.iter().enumerate() {
        let pause = apply(&server, step, round);
        tokio::time::sleep(pause).await;
    }
    server.faults().reset();
    h.converge(&server).await;
    // and it stays converged through more changes
    for i in 0..5 {
        put(&server, i * 3, 10_000);
    }
    h.converge(&server).await;
    h.stop().await;
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 10,
        max_shrink_iters: 20,
        ..ProptestConfig::default()
    })]

    #[test]
    fn rf8_the_store_converges_to_the_server_after_any_faults(
        schedule in proptest::collection::vec(step(), 5..30),
        watch_list in any::<bool>(),
        page_size in prop_oneof![Just(0u32), Just(7), Just(500)],
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(run_schedule(schedule, watch_list, page_size));
    }
}

/// Objects `bulk-0` to `bulk-{STABLE - 1}` exist throughout (only updated).
const STABLE: u16 = 200;

#[derive(Clone, Debug)]
enum TimeStep {
    Put(u16),
    /// Deletes an object that is not stable.
    Delete(u16),
    /// With watches paused, `writes` updates; then a relist whose body is
    /// cut after `kib` KiB, and the requests after the cut find a replica
    /// that has only the first of those writes.
    CutRelist {
        writes: u8,
        kib: u8,
    },
    /// The next lists and watches come from a replica this many versions
    /// behind.
    Lagging(u8),
    ExpireWatch,
    ExpireList,
    CloseWatches,
    Sleep(u8),
}

fn time_step() -> impl Strategy<Value = TimeStep> {
    let name = 0u16..(OBJECTS as u16 + 20);
    prop_oneof![
        6 => name.clone().prop_map(TimeStep::Put),
        3 => (STABLE..(OBJECTS as u16 + 20)).prop_map(TimeStep::Delete),
        4 => (2u8..30, 4u8..64).prop_map(|(writes, kib)| TimeStep::CutRelist { writes, kib }),
        3 => (1u8..60).prop_map(TimeStep::Lagging),
        3 => Just(TimeStep::ExpireWatch),
        1 => Just(TimeStep::ExpireList),
        1 => Just(TimeStep::CloseWatches),
        3 => (1u8..10).prop_map(TimeStep::Sleep),
    ]
}

async fn run_time_schedule(schedule: Vec<TimeStep>, watch_list: bool, page_size: u32) {
    let server = server().await;
    bulk_seed(&server, OBJECTS);
    let proxy = Proxy::start(server.url()).await;
    // KiB after which the next list (or WatchList) body is cut (0 = none),
    // and the version of the replica the requests after a cut find
    let cut_after = Arc::new(AtomicU64::new(0));
    let lag_at = Arc::new(AtomicU64::new(0));
    let lag_next = Arc::new(AtomicU64::new(0));
    proxy.set_rule({
        let (cut_after, lag_at, lag_next) = (cut_after.clone(), lag_at.clone(), lag_next.clone());
        let faults = server.faults().clone();
        move |_, _, q| {
            let replica = lag_next.swap(0, Ordering::SeqCst);
            if replica > 0 {
                faults.serve_from_lagging_replica(3, replica);
            }
            let listing = param(q, "watch").is_none() || param(q, "sendInitialEvents").is_some();
            let kib = if listing {
                cut_after.swap(0, Ordering::SeqCst)
            } else {
                0
            };
            if kib == 0 {
                return Action::Forward(q.to_owned());
            }
            lag_next.store(lag_at.swap(0, Ordering::SeqCst), Ordering::SeqCst);
            Action::ForwardThen {
                query: q.to_owned(),
                after_bytes: usize::try_from(kib * 1024).unwrap(),
                then: Then::Cut,
            }
        }
    });
    let config = ReflectorConfig::<ConfigMap>::default()
        .watch_config(fast_watch().use_watch_list(watch_list).page_size(page_size));
    let h = Harness::for_url(&proxy.url(), config);
    let faults = server.faults();
    for (round, step) in schedule.iter().enumerate() {
        let pause = match *step {
            TimeStep::Put(i) => {
                put(&server, i, round);
                5
            }
            TimeStep::Delete(i) => {
                let _ = server.objects().delete("configmaps", NS, &name(i));
                5
            }
            TimeStep::CutRelist { writes, kib } => {
                faults.pause_watches();
                let mut first = None;
                for i in 0..u16::from(writes) {
                    put(&server, i, round);
                    first.get_or_insert_with(|| bump_version(&server));
                }
                lag_at.store(first.unwrap_or(0), Ordering::SeqCst);
                cut_after.store(u64::from(kib), Ordering::SeqCst);
                faults.expire_next_watches(1);
                faults.close_all_watches();
                faults.resume_watches();
                20
            }
            TimeStep::Lagging(k) => {
                let now = bump_version(&server);
                faults.serve_from_lagging_replica(3, now.saturating_sub(u64::from(k)));
                5
            }
            TimeStep::ExpireWatch => {
                faults.expire_next_watches(1);
                faults.close_all_watches();
                5
            }
            TimeStep::ExpireList => {
                faults.expire_next_lists(1);
                5
            }
            TimeStep::CloseWatches => {
                faults.close_all_watches();
                5
            }
            TimeStep::Sleep(n) => u64::from(n) * 20,
        };
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    faults.reset();
    cut_after.store(0, Ordering::SeqCst);
    lag_next.store(0, Ordering::SeqCst);
    h.converge(&server).await;
    faults.reset();
    {
        let (regressions, deleted) = {
            let popped = h.popped.lock().unwrap();
            (popped.regressions.clone(), popped.deleted.clone())
        };
        assert!(
            regressions.is_empty(),
            "handlers saw objects go back in time: {regressions:?}"
        );
        let stable_deleted: Vec<&String> = deleted
            .iter()
            .filter(|k| {
                k.strip_prefix("default/bulk-")
                    .and_then(|n| n.parse::<u16>().ok())
                    .is_some_and(|n| n < STABLE)
            })
            .collect();
        assert!(
            stable_deleted.is_empty(),
            "handlers saw objects that exist throughout deleted: {stable_deleted:?}"
        );
    }
    h.stop().await;
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 8,
        max_shrink_iters: 20,
        ..ProptestConfig::default()
    })]

    #[test]
    fn rf1_handlers_never_see_time_go_back_with_cut_lists_and_lagging_replicas(
        schedule in proptest::collection::vec(time_step(), 5..30),
        watch_list in any::<bool>(),
        page_size in prop_oneof![Just(0u32), Just(7), Just(500)],
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(run_time_schedule(schedule, watch_list, page_size));
    }
}
