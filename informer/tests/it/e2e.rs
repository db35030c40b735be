//! Every IN rule end to end: an informer listing and watching the test
//! server over HTTP, with the server misbehaving where the rule is about
//! what happens then.

use kcontrol_informer::WatchConfig;
use std::sync::Arc;
use std::time::Duration;

use kcontrol_client::{Api, DeleteParams, PostParams};
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kcontrol_indexer::{DeletedFinalStateUnknown, Object, ObjectOrTombstone};
use kcontrol_informer::{
    wait_for_cache_sync, AsyncResourceEventHandler, HandlerFuture, HandlerOptions, HasSynced,
    ResourceEventHandler, ResourceEventHandlerFuncs, SharedIndexInformer,
};
use kcontrol_reflector::{BackoffConfig, ReflectorConfig};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::*;

/// Fast retries: the tests make the server fail on purpose.
fn quick_reflector() -> ReflectorConfig<ConfigMap> {
    ReflectorConfig::default().watch_config(WatchConfig::default().backoff(BackoffConfig {
        initial: Duration::from_millis(20),
        max: Duration::from_millis(200),
        reset_after: Duration::from_secs(5),
        jitter: 0.5,
    }))
}

struct Running {
    informer: Arc<SharedIndexInformer<ConfigMap>>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start(informer: Arc<SharedIndexInformer<ConfigMap>>) -> Self {
        let shutdown = CancellationToken::new();
        let task = tokio::spawn({
            let (informer, shutdown) = (Arc::clone(&informer), shutdown.clone());
            async move { informer.run(shutdown).await.unwrap() }
        });
        Self {
            informer,
            shutdown,
            task,
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        bounded(self.task).await.unwrap();
        assert!(self.informer.is_stopped());
    }
}

fn informer_of(
    server: &kcontrol_testserver::TestServer,
    ns: &str,
) -> kcontrol_informer::SharedIndexInformerBuilder<ConfigMap> {
    SharedIndexInformer::builder(Api::<ConfigMap>::namespaced(client(server), ns))
        .reflector_config(quick_reflector())
        .name(format!("configmaps-{ns}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_follows_the_server_over_http() {
    let server = server().await;
    for i in 0..100 {
        server
            .objects()
            .create("configmaps", "default", cm(&format!("c{i}"), "0"))
            .unwrap();
    }
    namespaces(&server, &["other"]);
    server
        .objects()
        .create("configmaps", "other", cm("elsewhere", "0"))
        .unwrap();
    let informer = informer_of(&server, "default").build();
    let r = Recorder::new();
    let reg = informer.add_event_handler(Arc::clone(&r)).unwrap();
    let run = Running::start(Arc::clone(&informer));
    let token = CancellationToken::new();
    bounded(wait_for_cache_sync(
        &token,
        Some(DEADLINE),
        &[&*informer, &reg],
    ))
    .await
    .unwrap();
    assert_eq!(
        view_of(&informer.store().list()),
        server_view(&server, Some("default"))
    );
    assert_eq!(r.view(), server_view(&server, Some("default")));
    assert!(r
        .log()
        .iter()
        .all(|e| matches!(e, Event::Add { initial: true, .. })));
    assert!(informer.last_sync_resource_version().is_some());

    // writes over HTTP reach the store and the handler
    let api: Api<ConfigMap> = Api::namespaced(client(&server), "default");
    let mut created = ConfigMap::default();
    created.meta_mut().name = Some("new".into());
    let created = api.create(&PostParams::default(), &created).await.unwrap();
    let mut changed = api.get("c1").await.unwrap();
    let before = rv(&changed);
    changed.data = Some([("v".to_owned(), "1".to_owned())].into());
    let changed = api
        .replace("c1", &PostParams::default(), &changed)
        .await
        .unwrap();
    api.delete("c2", &DeleteParams::default()).await.unwrap();
    eventually("the handler's view to match the server", async || {
        r.view() == server_view(&server, Some("default"))
    })
    .await;
    let live: Vec<Event> = r
        .log()
        .into_iter()
        .filter(|e| !matches!(e, Event::Add { initial: true, .. }))
        .collect();
    assert_eq!(live.len(), 3, "{live:?}");
    assert_eq!(
        live[0],
        Event::Add {
            key: "default/new".into(),
            rv: rv(&created),
            initial: false
        }
    );
    assert_eq!(
        live[1],
        Event::Update {
            key: "default/c1".into(),
            old: before,
            new: rv(&changed)
        }
    );
    assert!(matches!(&live[2], Event::Delete { key, tombstone: false, .. } if key == "default/c2"));
    assert_eq!(
        view_of(&informer.store().list()),
        server_view(&server, Some("default"))
    );
    assert!(r.errors().is_empty(), "{:?}", r.errors());
    let lister = informer.lister();
    assert_eq!(
        lister.namespaced("default").get("new").map(|o| rv(&o)),
        Some(rv(&created))
    );
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in1_a_stuck_handler_delays_neither_the_others_nor_the_store() {
    let server = server().await;
    for i in 0..100 {
        server
            .objects()
            .create("configmaps", "default", cm(&format!("initial{i}"), "0"))
            .unwrap();
    }
    let informer = informer_of(&server, "default").build();
    let gate = Arc::new(Gate::default());
    let stuck = Recorder::gated(&gate);
    let fast = Recorder::new();
    // A handler that blocks asks for a thread of its own (IN1); on a task
    // it would hold one of the runtime's two threads, and the informer's
    // tasks queued behind it there could wait as long as the gate.
    let stuck_reg = informer
        .add_event_handler_with_options(
            Arc::clone(&stuck),
            HandlerOptions::new().name("stuck").blocking(true),
        )
        .unwrap();
    let fast_reg = informer.add_event_handler(Arc::clone(&fast)).unwrap();
    let run = Running::start(Arc::clone(&informer));
    // the server is slow to answer, and busy
    server.faults().set_latency(Duration::from_millis(20));
    for i in 0..300 {
        server
            .objects()
            .create("configmaps", "default", cm(&format!("c{i}"), "0"))
            .unwrap();
    }
    let want = server_view(&server, Some("default"));
    eventually("fast.view() == want", async || fast.view() == want).await;
    eventually("view_of(&informer.store().list()) == want", async || {
        view_of(&informer.store().list()) == want
    })
    .await;
    // The registration counts an initial add as handled once the handler
    // returns, a moment after the recorder saw it (when the list came
    // after the creates, the last event seen is an initial one).
    eventually("fast_reg.has_synced()", async || fast_reg.has_synced()).await;
    assert_eq!(
        gate.arrived(),
        1,
        "the stuck handler is still in its first call"
    );
    assert!(stuck.log().is_empty() && !stuck_reg.has_synced());
    gate.open();
    eventually("stuck.view() == want", async || stuck.view() == want).await;
    eventually("stuck_reg.has_synced()", async || stuck_reg.has_synced()).await;
    assert_eq!(stuck.log(), fast.log());
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in2_a_late_handler_gets_the_store_then_live_events_while_the_server_churns() {
    let server = server().await;
    for i in 0..200 {
        server
            .objects()
            .create("configmaps", "default", cm(&format!("c{i}"), "0"))
            .unwrap();
    }
    let informer = informer_of(&server, "default").build();
    let run = Running::start(Arc::clone(&informer));
    eventually("informer.has_synced()", async || informer.has_synced()).await;
    let churn = {
        let objects = server.objects();
        tokio::task::spawn_blocking(move || {
            for round in 1..=20 {
                for i in (0..200).step_by(7) {
                    let name = format!("c{i}");
                    if round % 5 == 0 {
                        let _ = objects.delete("configmaps", "default", &name);
                    } else if objects
                        .update("configmaps", "default", cm(&name, &round.to_string()))
                        .is_err()
                    {
                        let _ =
                            objects.create("configmaps", "default", cm(&name, &round.to_string()));
                    }
                }
            }
        })
    };
    let mut late = Vec::new();
    for _ in 0..5 {
        let r = Recorder::new();
        let reg = informer.add_event_handler(Arc::clone(&r)).unwrap();
        late.push((r, reg));
        // staggers the joins over the churn (interleaving, not a wait)
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    bounded(churn).await.unwrap();
    let want = server_view(&server, Some("default"));
    for (r, reg) in &late {
        assert!(
            try_eventually("the late handler's view", async || r.view() == want)
                .await
                .is_ok(),
            "{:?}",
            r.errors()
        );
        assert!(r.errors().is_empty(), "{:?}", r.errors());
        // counted once the handler returns, a moment after it recorded
        eventually("reg.has_synced()", async || reg.has_synced()).await;
        let log = r.log();
        let snapshot = log
            .iter()
            .take_while(|e| matches!(e, Event::Add { initial: true, .. }))
            .count();
        assert!(snapshot > 0);
        assert!(log[snapshot..]
            .iter()
            .all(|e| !matches!(e, Event::Add { initial: true, .. })));
    }
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in3_a_deletion_the_watch_missed_arrives_as_a_typed_tombstone() {
    let server = server().await;
    for name in ["kept", "missed"] {
        server
            .objects()
            .create("configmaps", "default", cm(name, "0"))
            .unwrap();
    }
    let informer = informer_of(&server, "default").build();
    let deletions = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&deletions);
    informer
        .add_event_handler(ResourceEventHandlerFuncs::new().delete_func(
            move |gone: &ObjectOrTombstone<ConfigMap>| {
                log.lock().push(match gone {
                    ObjectOrTombstone::Object(obj) => format!("final {}", key(obj)),
                    ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown { key, obj }) => {
                        format!("tombstone {key} last rv {}", rv(obj))
                    }
                });
            },
        ))
        .unwrap();
    let run = Running::start(Arc::clone(&informer));
    eventually("informer.has_synced()", async || informer.has_synced()).await;
    let last_rv = rv(&informer.lister().get("default", "missed").unwrap());
    // the watch never sees the deletion: delivery is paused, the history is
    // compacted and the watch dropped, so the reflector must relist
    server.faults().pause_watches();
    server
        .objects()
        .delete("configmaps", "default", "missed")
        .unwrap();
    server.faults().compact();
    server.faults().close_all_watches();
    server.faults().resume_watches();
    eventually("!deletions.lock().is_empty()", async || {
        !deletions.lock().is_empty()
    })
    .await;
    assert_eq!(
        *deletions.lock(),
        [format!("tombstone default/missed last rv {last_rv}")]
    );
    // a deletion the watch sees carries the final state
    server
        .objects()
        .delete("configmaps", "default", "kept")
        .unwrap();
    eventually("deletions.lock().len() == 2", async || {
        deletions.lock().len() == 2
    })
    .await;
    assert_eq!(deletions.lock()[1], "final default/kept");
    assert!(informer.store().is_empty());
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in4_handlers_resync_on_their_own_period_and_can_be_removed() {
    let server = server().await;
    server
        .objects()
        .create("configmaps", "default", cm("a", "0"))
        .unwrap();
    let informer = informer_of(&server, "default")
        .resync_period(Duration::from_secs(1))
        .build();
    let resyncing = Recorder::new();
    let quiet = Recorder::new();
    let removed = Recorder::new();
    informer.add_event_handler(Arc::clone(&resyncing)).unwrap();
    informer
        .add_event_handler_with_resync_period(Arc::clone(&quiet), Duration::ZERO)
        .unwrap();
    let removed_reg = informer.add_event_handler(Arc::clone(&removed)).unwrap();
    let run = Running::start(Arc::clone(&informer));
    eventually("removed_reg.has_synced()", async || {
        removed_reg.has_synced()
    })
    .await;
    informer.remove_event_handler(&removed_reg).unwrap();
    let removed_log = removed.log();
    let is_sync = |e: &Event| matches!(e, Event::Update { old, new, .. } if old == new);
    // the reflector's resync check (every 1 s) reaches only `resyncing`
    eventually(
        "resyncing.log().iter().filter(|e| is_sync(e)).count() >= 2",
        async || resyncing.log().iter().filter(|e| is_sync(e)).count() >= 2,
    )
    .await;
    server
        .objects()
        .update("configmaps", "default", cm("a", "1"))
        .unwrap();
    eventually("the quiet handler's view to match the server", async || {
        quiet.view() == server_view(&server, Some("default"))
    })
    .await;
    assert!(quiet.log().iter().all(|e| !is_sync(e)));
    assert_eq!(
        removed.log(),
        removed_log,
        "a removed handler hears nothing more"
    );
    eventually("its thread ended", async || {
        Arc::strong_count(&removed) == 1
    })
    .await;
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in5_the_transform_drops_managed_fields_before_storing() {
    let server = server().await;
    let mut obj = cm("a", "0");
    obj["metadata"]["managedFields"] = json!([{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:v": {}}}}]);
    server
        .objects()
        .create("configmaps", "default", obj)
        .unwrap();
    let plain = informer_of(&server, "default").build();
    let stripped = informer_of(&server, "default")
        .watch_config(WatchConfig::default().strip_managed_fields(true))
        .build();
    let seen: Arc<Mutex<Option<Option<Vec<ManagedFieldsEntry>>>>> = Arc::default();
    let sink = Arc::clone(&seen);
    stripped
        .add_event_handler(ResourceEventHandlerFuncs::new().add_func(
            move |cm: &Arc<ConfigMap>, _| {
                *sink.lock() = Some(cm.meta().managed_fields.clone());
            },
        ))
        .unwrap();
    let runs = [
        Running::start(Arc::clone(&plain)),
        Running::start(Arc::clone(&stripped)),
    ];
    let token = CancellationToken::new();
    let all: [&dyn HasSynced; 2] = [&*plain, &*stripped];
    bounded(wait_for_cache_sync(&token, Some(DEADLINE), &all))
        .await
        .unwrap();
    let kept = plain.lister().get("default", "a").unwrap();
    assert_eq!(
        kept.meta().managed_fields.as_ref().map(Vec::len),
        Some(1),
        "the server keeps them"
    );
    let dropped = stripped.lister().get("default", "a").unwrap();
    assert!(dropped.meta().managed_fields.is_none());
    assert_eq!(dropped.data, kept.data);
    eventually("seen.lock().is_some()", async || seen.lock().is_some()).await;
    assert_eq!(
        *seen.lock(),
        Some(None),
        "handlers see the transformed object"
    );
    for run in runs {
        run.stop().await;
    }
}

/// The `v` value of a stored ConfigMap (the store filter's input below).
fn value(cm: &ConfigMap) -> Option<&str> {
    cm.data.as_ref()?.get("v").map(String::as_str)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in5_a_store_filter_keeps_out_what_it_rejects_and_a_change_moves_an_object_in_or_out() {
    let server = server().await;
    let objects = server.objects();
    objects
        .create("configmaps", "default", cm("a", "kept"))
        .unwrap();
    objects
        .create("configmaps", "default", cm("b", "out"))
        .unwrap();
    let informer = informer_of(&server, "default")
        .store_filter(|cm: &ConfigMap| value(cm) != Some("out"))
        .build();
    let recorder = Recorder::new();
    let reg = informer.add_event_handler(Arc::clone(&recorder)).unwrap();
    let run = Running::start(Arc::clone(&informer));
    let token = CancellationToken::new();
    bounded(wait_for_cache_sync(&token, Some(DEADLINE), &[&reg]))
        .await
        .unwrap();
    assert_eq!(informer.store().list_keys(), ["default/a"]);
    let kept_rv = rv(&informer.lister().get("default", "a").unwrap());
    // a stored object that stops matching leaves as a deletion carrying it
    let out = objects
        .update("configmaps", "default", cm("a", "out"))
        .unwrap();
    // one that starts matching arrives as an add
    let kept = objects
        .update("configmaps", "default", cm("b", "kept"))
        .unwrap();
    eventually("the store to hold b alone", async || {
        informer.store().list_keys() == ["default/b"]
    })
    .await;
    eventually("both changes heard", async || recorder.log().len() == 3).await;
    assert_eq!(
        recorder.log(),
        [
            Event::Add {
                key: "default/a".into(),
                rv: kept_rv,
                initial: true,
            },
            Event::Delete {
                key: "default/a".into(),
                rv: out.resource_version().to_string(),
                tombstone: false,
            },
            Event::Add {
                key: "default/b".into(),
                rv: kept.resource_version().to_string(),
                initial: false,
            },
        ]
    );
    assert_eq!(recorder.errors(), Vec::<String>::new());
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_list_informer_syncs_and_follows_like_a_listing_one() {
    let server = server().await;
    for i in 0..50 {
        server
            .objects()
            .create("configmaps", "default", cm(&format!("c{i}"), "0"))
            .unwrap();
    }
    let streaming = informer_of(&server, "default")
        .watch_config(WatchConfig::default().use_watch_list(true))
        .build();
    let listing = informer_of(&server, "default").build();
    let (rs, rl) = (Recorder::new(), Recorder::new());
    let regs = [
        streaming.add_event_handler(Arc::clone(&rs)).unwrap(),
        listing.add_event_handler(Arc::clone(&rl)).unwrap(),
    ];
    let runs = [
        Running::start(Arc::clone(&streaming)),
        Running::start(Arc::clone(&listing)),
    ];
    let token = CancellationToken::new();
    let all: [&dyn HasSynced; 2] = [&regs[0], &regs[1]];
    bounded(wait_for_cache_sync(&token, Some(DEADLINE), &all))
        .await
        .unwrap();
    assert_eq!(rs.view(), server_view(&server, Some("default")));
    assert!(rs
        .log()
        .iter()
        .all(|e| matches!(e, Event::Add { initial: true, .. })));
    server
        .objects()
        .update("configmaps", "default", cm("c3", "1"))
        .unwrap();
    server
        .objects()
        .delete("configmaps", "default", "c4")
        .unwrap();
    let want = server_view(&server, Some("default"));
    eventually("rs.view() == want && rl.view() == want", async || {
        rs.view() == want && rl.view() == want
    })
    .await;
    assert_eq!(
        view_of(&streaming.store().list()),
        view_of(&listing.store().list())
    );
    assert!(rs.errors().is_empty() && rl.errors().is_empty());
    for run in runs {
        run.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_error_handler_hears_failures_and_is_set_before_start() {
    let server = server().await;
    server
        .objects()
        .create("configmaps", "default", cm("a", "0"))
        .unwrap();
    let informer = informer_of(&server, "default").build();
    let errors = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&errors);
    informer
        .set_watch_error_handler(move |err| sink.lock().push(err.to_string()))
        .unwrap();
    // 500 without Retry-After: a 503 with one is retried inside the
    // request as client-go's REST client does, unseen by the handler
    server
        .faults()
        .fail_next(2, kcontrol_testserver::Failure::InternalError);
    let run = Running::start(Arc::clone(&informer));
    eventually("synced after the failures", async || informer.has_synced()).await;
    assert!(errors.lock().len() >= 2, "{:?}", errors.lock());
    assert!(matches!(
        informer.set_watch_error_handler(|_| {}),
        Err(kcontrol_informer::InformerError::AlreadyStarted { .. })
    ));
    assert!(informer.set_transform(|cm| cm).is_err());
    run.stop().await;
}

/// An async handler: a [`Recorder`] behind a tokio semaphore that stays
/// closed until the test adds a permit (no thread waits meanwhile).
struct AsyncRecorder {
    recorder: Arc<Recorder>,
    gate: Arc<tokio::sync::Semaphore>,
}

impl AsyncRecorder {
    fn new(open: bool) -> (Arc<Recorder>, Arc<tokio::sync::Semaphore>, Self) {
        let recorder = Recorder::new();
        let permits = if open {
            tokio::sync::Semaphore::MAX_PERMITS
        } else {
            0
        };
        let gate = Arc::new(tokio::sync::Semaphore::new(permits));
        let handler = Self {
            recorder: Arc::clone(&recorder),
            gate: Arc::clone(&gate),
        };
        (recorder, gate, handler)
    }

    async fn pass(&self) {
        // Closed only by dropping the semaphore, which the test never does.
        let _permit = self.gate.acquire().await;
    }
}

impl AsyncResourceEventHandler<ConfigMap> for AsyncRecorder {
    fn on_add(&self, obj: Arc<ConfigMap>, initial: bool) -> HandlerFuture<'_> {
        Box::pin(async move {
            self.pass().await;
            self.recorder.on_add(&obj, initial);
        })
    }

    fn on_update(&self, old: Arc<ConfigMap>, new: Arc<ConfigMap>) -> HandlerFuture<'_> {
        Box::pin(async move {
            self.pass().await;
            self.recorder.on_update(&old, &new);
        })
    }

    fn on_delete(&self, obj: ObjectOrTombstone<ConfigMap>) -> HandlerFuture<'_> {
        Box::pin(async move {
            self.pass().await;
            self.recorder.on_delete(&obj);
        })
    }
}

/// IN1 for async handlers, on a runtime of two threads: an async handler
/// gets exactly what a thread handler gets, in the same order, and one
/// that awaits forever holds up neither the store nor the others (nor the
/// runtime: the informer and the other handlers keep going on it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in1_async_handlers_see_what_thread_handlers_see_and_a_stuck_one_holds_up_nothing() {
    let server = server().await;
    for i in 0..50 {
        server
            .objects()
            .create("configmaps", "default", cm(&format!("initial{i}"), "0"))
            .unwrap();
    }
    let informer = informer_of(&server, "default").build();
    let threaded = Recorder::new();
    informer.add_event_handler(Arc::clone(&threaded)).unwrap();
    let (fast, _, handler) = AsyncRecorder::new(true);
    let fast_reg = informer
        .add_async_event_handler(handler, HandlerOptions::new().name("fast"))
        .unwrap();
    let stuck_handlers: Vec<_> = (0..20)
        .map(|i| {
            let (recorder, gate, handler) = AsyncRecorder::new(false);
            let options = HandlerOptions::new().name(format!("stuck{i}"));
            let reg = informer.add_async_event_handler(handler, options).unwrap();
            (recorder, gate, reg)
        })
        .collect();
    let run = Running::start(Arc::clone(&informer));
    let api: Api<ConfigMap> = Api::namespaced(client(&server), "default");
    for i in 0..30 {
        let obj: ConfigMap = serde_json::from_value(cm(&format!("c{i}"), "0")).unwrap();
        api.create(&PostParams::default(), &obj).await.unwrap();
    }
    for i in 0..10 {
        api.delete(&format!("initial{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    let want = server_view(&server, Some("default"));
    eventually("view_of(&informer.store().list()) == want", async || {
        view_of(&informer.store().list()) == want
    })
    .await;
    eventually(
        "threaded.view() == want && fast.view() == want",
        async || threaded.view() == want && fast.view() == want,
    )
    .await;
    assert_eq!(fast.log(), threaded.log());
    eventually("fast_reg.has_synced()", async || fast_reg.has_synced()).await;
    for (recorder, _, reg) in &stuck_handlers {
        assert!(recorder.log().is_empty() && !reg.has_synced());
    }
    for (_, gate, _) in &stuck_handlers {
        gate.add_permits(tokio::sync::Semaphore::MAX_PERMITS);
    }
    for (recorder, _, reg) in &stuck_handlers {
        eventually("recorder.view() == want", async || recorder.view() == want).await;
        eventually("reg.has_synced()", async || reg.has_synced()).await;
        assert_eq!(recorder.log(), threaded.log());
        assert!(recorder.errors().is_empty(), "{:?}", recorder.errors());
    }
    run.stop().await;
}
