//! RF8: after any sequence of faults the consumer converges to exactly the
//! server's state. A proptest draws schedules of object churn (creates,
//! updates, deletes) interleaved with every fault the testserver injects
//! (closed watches, 410 on lists and watches, compaction, missed changes,
//! 429, 5xx, corrupt frames, frames of another kind, watches cut after a few
//! events), in list+watch and in WatchList mode; once the faults stop, the
//! store must hold the server's keys at the server's resourceVersions.

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
    }
    Duration::from_millis(5)
}

async fn run_schedule(schedule: Vec<Step>, watch_list: bool, page_size: u32) {
    let server = server().await;
    bulk_seed(&server, OBJECTS);
    let config = ReflectorConfig::<ConfigMap>::default()
        .backoff(fast_backoff())
        .use_watch_list(watch_list)
        .page_size(page_size);
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
