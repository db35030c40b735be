//! Everything around the contracts: shutdown ends `run` promptly whatever
//! it is doing, a closed FIFO ends it, resyncs follow `should_resync`, the
//! transform runs before queueing, metrics count what happened, selectors
//! reach lists and watches, and a second `run` does not start twice.

use kcontrol_reflector::WatchConfig;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kcontrol_client::Api;
use kcontrol_deltafifo::DeltaType;
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_reflector::{
    BackoffConfig, ListWatch, ReflectorConfig, ReflectorMetrics, RestartCause, WatchEventType,
};
use kcontrol_testserver::{Failure, Verb};
use tokio::sync::Notify;

use crate::support::*;

fn config() -> ReflectorConfig<ConfigMap> {
    fast_config()
}

/// Cancels the harness's token and checks `run` returns within 5 s.
async fn shutdown_is_prompt(mut h: Harness) {
    let run = h.take_run();
    h.shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("run returns promptly on shutdown")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_run_promptly_mid_list() {
    let server = server().await;
    bulk_seed(&server, 2000);
    let proxy = Proxy::start(server.url()).await;
    let gate = Arc::new(Notify::new());
    proxy.set_rule({
        let gate = gate.clone();
        move |_, _, q| Action::ForwardThen {
            query: q.to_owned(),
            after_bytes: 16 * 1024,
            then: Then::Hold(gate.clone()),
        }
    });
    let h = Harness::for_url(&proxy.url(), config());
    let store = h.store.clone();
    eventually_within("a list under way", DEADLINE, async || {
        !store.list_keys().is_empty()
    })
    .await;
    shutdown_is_prompt(h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_run_promptly_mid_watch_and_mid_backoff() {
    let server = server().await;
    seed(&server, 3);
    let h = Harness::for_url(server.url(), config());
    h.synced().await;
    shutdown_is_prompt(h).await;

    // every request fails and the backoff is long
    server.faults().fail_next(10_000, Failure::InternalError);
    let h = Harness::for_url(
        server.url(),
        ReflectorConfig::default().watch_config(WatchConfig::default().backoff(BackoffConfig {
            initial: Duration::from_secs(60),
            ..BackoffConfig::default()
        })),
    );
    let errors = h.errors.clone();
    eventually_within("a failed list", DEADLINE, async || {
        !errors.lock().unwrap().is_empty()
    })
    .await;
    shutdown_is_prompt(h).await;
    server.faults().reset();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_fifo_ends_run() {
    let server = server().await;
    seed(&server, 3);
    let mut h = Harness::for_url(server.url(), config());
    h.synced().await;
    let run = h.take_run();
    h.fifo.close();
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("run returns once the FIFO is closed")
        .unwrap();

    // mid-backoff too
    server.faults().fail_next(10_000, Failure::InternalError);
    let mut h = Harness::for_url(
        server.url(),
        ReflectorConfig::default().watch_config(WatchConfig::default().backoff(BackoffConfig {
            initial: Duration::from_secs(60),
            ..BackoffConfig::default()
        })),
    );
    let errors = h.errors.clone();
    eventually_within("a failed list", DEADLINE, async || {
        !errors.lock().unwrap().is_empty()
    })
    .await;
    let run = h.take_run();
    h.fifo.close();
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("run returns once the FIFO is closed, even while backing off")
        .unwrap();
    server.faults().reset();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_returns_at_once() {
    let server = server().await;
    let h = Harness::for_url(server.url(), config());
    h.synced().await;
    bounded(
        "a second run",
        h.reflector.run(tokio_util::sync::CancellationToken::new()),
    )
    .await;
    h.converge(&server).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resyncs_follow_the_period_and_should_resync() {
    let server = server().await;
    seed(&server, 4);
    let allow = Arc::new(AtomicBool::new(false));
    let asked = Arc::new(AtomicU64::new(0));
    let h = Harness::for_url(
        server.url(),
        config()
            .resync_period(Duration::from_millis(50))
            .should_resync({
                let (allow, asked) = (allow.clone(), asked.clone());
                move || {
                    asked.fetch_add(1, Ordering::SeqCst);
                    allow.load(Ordering::SeqCst)
                }
            }),
    );
    h.synced().await;
    eventually_within("should_resync to be asked", DEADLINE, async || {
        asked.load(Ordering::SeqCst) >= 3
    })
    .await;
    assert_eq!(h.popped(DeltaType::Sync), 0, "should_resync said no");
    allow.store(true, Ordering::SeqCst);
    eventually_within("Sync deltas", DEADLINE, async || {
        h.popped(DeltaType::Sync) >= 8
    })
    .await;
    h.converge(&server).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transform_runs_before_objects_are_queued() {
    let server = server().await;
    seed(&server, 3);
    let h = Harness::for_url(
        server.url(),
        config().transform(|mut cm: ConfigMap| {
            cm.data = None;
            cm.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert("transformed".into(), "yes".into());
            cm
        }),
    );
    h.synced().await;
    update(&server, "cm-0", "watched");
    h.converge(&server).await;
    for cm in h.store.list() {
        assert!(cm.data.is_none());
        assert_eq!(
            cm.metadata.annotations.as_ref().unwrap()["transformed"],
            "yes"
        );
    }
    h.stop().await;
}

#[derive(Default)]
struct Counting {
    lists: AtomicU64,
    relists: AtomicU64,
    items: AtomicU64,
    watches: AtomicU64,
    added: AtomicU64,
    modified: AtomicU64,
    errors_events: AtomicU64,
    failures: AtomicU64,
    last_rv: Mutex<String>,
    causes: Mutex<Vec<(&'static str, RestartCause)>>,
}

impl ReflectorMetrics for Counting {
    fn list_started(&self, relist: bool) {
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.relists.fetch_add(u64::from(relist), Ordering::SeqCst);
    }
    fn list_finished(&self, items: u64, _elapsed: Duration) {
        self.items.fetch_add(items, Ordering::SeqCst);
    }
    fn watch_started(&self) {
        self.watches.fetch_add(1, Ordering::SeqCst);
    }
    fn relisting(&self, cause: RestartCause) {
        self.causes.lock().unwrap().push(("relist", cause));
    }
    fn watch_restarting(&self, cause: RestartCause) {
        self.causes.lock().unwrap().push(("watch", cause));
    }
    fn watch_event(&self, event: WatchEventType) {
        let counter = match event {
            WatchEventType::Added => &self.added,
            WatchEventType::Modified => &self.modified,
            WatchEventType::Error => &self.errors_events,
            _ => return,
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }
    fn failure(&self) {
        self.failures.fetch_add(1, Ordering::SeqCst);
    }
    fn last_resource_version(&self, rv: &str) {
        *self.last_rv.lock().unwrap() = rv.to_owned();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_lists_relists_watches_and_events() {
    let server = server().await;
    seed(&server, 4);
    let metrics = Arc::new(Counting::default());
    let h = Harness::for_url(server.url(), config().metrics(metrics.clone()));
    h.synced().await;
    server
        .objects()
        .create("configmaps", NS, configmap("added", "x"))
        .unwrap();
    update(&server, "cm-0", "y");
    h.converge(&server).await;
    server.faults().expire_next_watches(1);
    server.faults().close_all_watches();
    eventually_within("the relist", DEADLINE, async || {
        metrics.relists.load(Ordering::SeqCst) == 1
    })
    .await;
    h.converge(&server).await;
    assert_eq!(metrics.lists.load(Ordering::SeqCst), 2);
    eventually_within("the relist to finish", DEADLINE, async || {
        metrics.items.load(Ordering::SeqCst) == 4 + 5
    })
    .await;
    assert!(metrics.watches.load(Ordering::SeqCst) >= 2);
    assert_eq!(metrics.added.load(Ordering::SeqCst), 1);
    assert_eq!(metrics.modified.load(Ordering::SeqCst), 1);
    assert_eq!(metrics.errors_events.load(Ordering::SeqCst), 1);
    assert!(metrics.failures.load(Ordering::SeqCst) >= 1);
    assert_eq!(
        *metrics.last_rv.lock().unwrap(),
        h.reflector.last_sync_resource_version().unwrap()
    );
    // the closed watch is resumed, the 410 on it relists, and the watch
    // after the relist is a restart caused by that 410
    eventually_within("the watch after the relist", DEADLINE, async || {
        metrics.causes.lock().unwrap().len() >= 3
    })
    .await;
    assert_eq!(
        metrics.causes.lock().unwrap()[..3],
        [
            ("watch", RestartCause::Closed),
            ("relist", RestartCause::Expired),
            ("watch", RestartCause::Expired)
        ]
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_watch_selectors_reach_lists_and_watches() {
    let server = server().await;
    seed(&server, 3); // app=web
    server
        .objects()
        .create(
            "configmaps",
            NS,
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "other", "labels": {"app": "db"}}}),
        )
        .unwrap();
    let lw = ListWatch::new(Api::<ConfigMap>::namespaced(client_for(server.url()), NS))
        .labels("app=web")
        .fields("metadata.name!=cm-2");
    let h = Harness::start(Arc::new(lw), config());
    h.synced().await;
    update(&server, "cm-0", "watched");
    server
        .objects()
        .update(
            "configmaps",
            NS,
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "other", "labels": {"app": "db"}}, "data": {"v": "x"}}),
        )
        .unwrap();
    let store = h.store.clone();
    eventually_within("the watched update", DEADLINE, async || {
        store
            .get_by_key(&format!("{NS}/cm-0"))
            .is_some_and(|cm| cm.data.as_ref().unwrap()["value"] == "watched")
    })
    .await;
    let mut keys = h.store.list_keys();
    keys.sort();
    assert_eq!(keys, [format!("{NS}/cm-0"), format!("{NS}/cm-1")]);
    for r in requests(&server, Verb::List)
        .into_iter()
        .chain(requests(&server, Verb::Watch))
    {
        assert_eq!(param(&r.query, "labelSelector").as_deref(), Some("app=web"));
        assert_eq!(
            param(&r.query, "fieldSelector").as_deref(),
            Some("metadata.name!=cm-2")
        );
    }
    h.stop().await;
}
