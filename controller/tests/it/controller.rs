//! The controller builder against the in-process API server: scoping
//! (CT9), predicates (CT5), deleted objects skipped (CT10), the error
//! policy and contained panics (CT11, CT4), one key never reconciled twice
//! at once, watches mapping other types, a shared factory, graceful
//! shutdown and its drain timeout (CT12).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcontrol_controller::predicate::Predicate;
use kcontrol_controller::{Action, Context, Controller, ControllerError};
use kcontrol_indexer::Object;
use kcontrol_informer::{InformerFactory, WatchConfig};
use kcontrol_testserver::{TestServer, Verb};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use support::{eventually, next, server, DEADLINE};

fn create_cm(server: &TestServer, ns: &str, name: &str, labels: serde_json::Value) {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels}, "data": {"k": "v"}});
    server.objects().create("configmaps", ns, cm).unwrap();
}

/// Changes a ConfigMap on the server through `edit`.
fn edit_cm(server: &TestServer, name: &str, edit: impl FnOnce(&mut ConfigMap)) {
    let mut cm = server
        .objects()
        .get_as::<ConfigMap>("default", name)
        .unwrap()
        .unwrap();
    edit(&mut cm);
    let mut value = serde_json::to_value(&cm).unwrap();
    value["apiVersion"] = json!("v1");
    value["kind"] = json!("ConfigMap");
    server
        .objects()
        .update("configmaps", "default", value)
        .unwrap();
}

type Keys = mpsc::UnboundedSender<String>;

/// The key of the ConfigMap a Secret names in its `for` label (the
/// mapping the `watches` tests use).
fn configmap_it_is_for(secret: &Secret) -> Vec<String> {
    secret
        .labels()
        .get("for")
        .map(|cm| format!("default/{cm}"))
        .into_iter()
        .collect()
}

/// A reconciler sending each key it reconciles.
fn record(
    tx: Keys,
) -> impl Fn(Arc<ConfigMap>, Context<ConfigMap>) -> futures_ready::Ready + Send + Sync + 'static {
    move |_cm, ctx| {
        let _ = tx.send(ctx.key().to_owned());
        futures_ready::ready()
    }
}

mod futures_ready {
    use kcontrol_controller::Action;
    pub type Ready = std::future::Ready<Result<Action, std::io::Error>>;
    pub fn ready() -> Ready {
        std::future::ready(Ok(Action::Done))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct9_namespace_and_label_selector_scope_what_is_reconciled() {
    let (server, client) = server().await;
    let other = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}});
    server.objects().create("namespaces", "", other).unwrap();
    create_cm(&server, "other", "x", json!({"app": "web"}));
    create_cm(&server, "default", "plain", json!({}));
    create_cm(&server, "default", "web", json!({"app": "web"}));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let controller = Controller::new(client)
        .for_resource::<ConfigMap>()
        .namespace("default")
        .label_selector("app=web")
        .workers(1);
    let run = tokio::spawn(controller.run(record(tx), shutdown.clone()));
    assert_eq!(next(&mut rx).await, "default/web");
    // one worker, FIFO: had anything else been enqueued, it came first
    create_cm(&server, "default", "web2", json!({"app": "web"}));
    assert_eq!(next(&mut rx).await, "default/web2");
    shutdown.cancel();
    run.await.unwrap().unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct5_ct10_predicates_filter_updates_and_deleted_objects_are_skipped() {
    let (server, client) = server().await;
    create_cm(&server, "default", "a", json!({"v": "1"}));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let controller = Controller::new(client)
        .for_resource::<ConfigMap>()
        .with_predicate(Predicate::labels_changed().or(Predicate::annotations_changed()))
        .workers(1);
    let stats = controller.stats();
    let run = tokio::spawn(controller.run(record(tx), shutdown.clone()));
    assert_eq!(next(&mut rx).await, "default/a");
    // a data change passes neither predicate
    edit_cm(&server, "a", |cm| {
        cm.data = Some([("k".to_owned(), "changed".to_owned())].into());
    });
    create_cm(&server, "default", "sentinel-1", json!({}));
    assert_eq!(next(&mut rx).await, "default/sentinel-1");
    // a label change passes
    edit_cm(&server, "a", |cm| {
        cm.metadata.labels = Some([("v".to_owned(), "2".to_owned())].into());
    });
    assert_eq!(next(&mut rx).await, "default/a");
    // a deletion enqueues the key, but the reconciler is not called for an
    // object gone from the cache
    server
        .objects()
        .delete("configmaps", "default", "a")
        .unwrap();
    create_cm(&server, "default", "sentinel-2", json!({}));
    assert_eq!(next(&mut rx).await, "default/sentinel-2");
    // 4 reconciles, and the skipped key counted as a success
    eventually("the skipped key is counted", async || {
        stats.successes() == 5
    })
    .await;
    shutdown.cancel();
    run.await.unwrap().unwrap();
    assert!(rx.try_recv().is_err());
    server.shutdown().await;
}

#[derive(Debug, thiserror::Error)]
#[error("attempt {0} failed")]
struct Failed(u32);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct11_the_error_policy_chooses_the_backoff_and_panics_are_contained() {
    let (server, client) = server().await;
    create_cm(&server, "default", "flaky", json!({}));
    create_cm(&server, "default", "panicky", json!({}));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (policy_tx, mut policy_rx) = mpsc::unbounded_channel();
    let attempts = Arc::new(Mutex::new(HashMap::<String, u32>::new()));
    let shutdown = CancellationToken::new();
    let controller = Controller::new(client)
        .for_resource::<ConfigMap>()
        .workers(2)
        .error_policy(move |cm, error, ctx| {
            let _ = policy_tx.send((cm.name().unwrap_or("").to_owned(), error.to_string()));
            // rate-limited after a first failure, then a fixed delay
            if ctx.num_requeues() == 0 {
                Action::RequeueRateLimited
            } else {
                Action::RequeueAfter(Duration::from_millis(1))
            }
        });
    let stats = controller.stats();
    let reconciler = move |cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
        let (tx, attempts) = (tx.clone(), Arc::clone(&attempts));
        async move {
            let name = cm.name().unwrap_or("").to_owned();
            let n = {
                let mut a = attempts.lock().unwrap();
                let n = a.entry(name.clone()).or_default();
                *n += 1;
                *n
            };
            let _ = tx.send((name.clone(), ctx.num_requeues()));
            match name.as_str() {
                "panicky" if n == 1 => panic!("a reconcile bug"),
                "flaky" if n <= 3 => Err(Failed(n)),
                _ => Ok(Action::Done),
            }
        }
    };
    let run = tokio::spawn(controller.run(reconciler, shutdown.clone()));
    let mut flaky = Vec::new();
    let mut panicky = Vec::new();
    while flaky.len() < 4 || panicky.len() < 2 {
        let (name, requeues) = next(&mut rx).await;
        if name == "flaky" {
            flaky.push(requeues)
        } else {
            panicky.push(requeues)
        }
    }
    // failure 1 → rate-limited (count 1); failure 2 → policy's delay
    // (count reset); failure 3 → rate-limited again; then success
    assert_eq!(flaky, [0, 1, 0, 1]);
    // a panic is re-queued rate-limited, without the policy
    assert_eq!(panicky, [0, 1]);
    let mut policy = Vec::new();
    for _ in 0..3 {
        policy.push(next(&mut policy_rx).await);
    }
    assert_eq!(
        policy,
        (1..=3)
            .map(|n| ("flaky".to_owned(), format!("attempt {n} failed")))
            .collect::<Vec<_>>()
    );
    eventually("counters", async || {
        stats.errors() == 3 && stats.panics() == 1 && stats.successes() == 2
    })
    .await;
    shutdown.cancel();
    run.await.unwrap().unwrap();
    server.shutdown().await;
}

/// Updates while a key is reconciled queue it once more; other workers
/// reconcile other keys meanwhile, never the same one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_key_is_never_reconciled_twice_at_once() {
    let (server, client) = server().await;
    create_cm(&server, "default", "a", json!({}));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (release_tx, release_rx) = tokio::sync::watch::channel(false);
    let in_flight = Arc::new(Mutex::new(HashMap::<String, u32>::new()));
    let max = Arc::new(Mutex::new(0u32));
    let shutdown = CancellationToken::new();
    let (f, m) = (Arc::clone(&in_flight), Arc::clone(&max));
    let reconciler = move |cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
        let (tx, f, m, mut release) = (
            tx.clone(),
            Arc::clone(&f),
            Arc::clone(&m),
            release_rx.clone(),
        );
        async move {
            let key = ctx.key().to_owned();
            {
                let mut f = f.lock().unwrap();
                let n = f.entry(key.clone()).or_default();
                *n += 1;
                let mut m = m.lock().unwrap();
                *m = (*m).max(*n);
            }
            let label = cm.labels().get("n").cloned().unwrap_or_default();
            let _ = tx.send((key.clone(), label));
            if key == "default/a" {
                let _ = release.wait_for(|r| *r).await;
            }
            *f.lock().unwrap().get_mut(&key).unwrap() -= 1;
            Ok::<_, std::io::Error>(Action::Done)
        }
    };
    let controller = Controller::new(client)
        .for_resource::<ConfigMap>()
        .workers(4);
    let run = tokio::spawn(controller.run(reconciler, shutdown.clone()));
    assert_eq!(next(&mut rx).await, ("default/a".to_owned(), String::new()));
    for n in ["1", "2"] {
        edit_cm(&server, "a", |cm| {
            cm.metadata.labels = Some([("n".to_owned(), n.to_owned())].into());
        });
    }
    for name in ["b", "c"] {
        create_cm(&server, "default", name, json!({}));
    }
    // b and c are reconciled by free workers; "a" is not taken again
    let mut others = vec![next(&mut rx).await.0, next(&mut rx).await.0];
    others.sort();
    assert_eq!(others, ["default/b", "default/c"]);
    release_tx.send_replace(true);
    // once released, "a" is reconciled again, from the latest state
    assert_eq!(
        next(&mut rx).await,
        ("default/a".to_owned(), "2".to_owned())
    );
    shutdown.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(*max.lock().unwrap(), 1);
    server.shutdown().await;
}

/// `watches` maps another type to keys; a shared factory keeps running
/// after the controller stops; thread workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_map_other_types_and_a_shared_factory_outlives_the_controller() {
    let (server, client) = server().await;
    create_cm(&server, "default", "a", json!({}));
    let factory = Arc::new(
        InformerFactory::builder(client.clone())
            .namespace("default")
            .build(),
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let controller = Controller::new(client)
        .with_factory(Arc::clone(&factory))
        .for_resource::<ConfigMap>()
        .watches::<Secret>(configmap_it_is_for)
        .threads(true)
        .workers(1);
    let run = tokio::spawn(controller.run(record(tx), shutdown.clone()));
    assert_eq!(next(&mut rx).await, "default/a");
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s", "namespace": "default", "labels": {"for": "a"}}});
    server
        .objects()
        .create("secrets", "default", secret)
        .unwrap();
    assert_eq!(next(&mut rx).await, "default/a");
    shutdown.cancel();
    run.await.unwrap().unwrap();
    // the factory's owner stops its informers, not the controller
    let configmaps = factory.informer::<ConfigMap>();
    assert!(configmaps.has_synced() && !configmaps.is_stopped());
    factory.shutdown().await;
    assert!(configmaps.is_stopped());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct12_a_reconcile_outliving_the_drain_timeout_is_an_error() {
    let (server, client) = server().await;
    create_cm(&server, "default", "stuck", json!({}));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let controller = Controller::new(client)
        .for_resource::<ConfigMap>()
        .drain_timeout(Duration::from_millis(50));
    let reconciler = move |_cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
        let _ = tx.send(ctx.key().to_owned());
        async move {
            std::future::pending::<()>().await;
            Ok::<_, std::io::Error>(Action::Done)
        }
    };
    let run = tokio::spawn(controller.run(reconciler, shutdown.clone()));
    assert_eq!(next(&mut rx).await, "default/stuck");
    shutdown.cancel();
    let err = tokio::time::timeout(DEADLINE, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(err, ControllerError::DrainTimeout { unfinished: 1, .. }),
        "{err}"
    );
    server.shutdown().await;
}

/// Each `Action` re-queues as it says: `Requeue` at once, `RequeueAfter`
/// after the delay, `RequeueRateLimited` with the backoff count kept; the
/// others reset it; `Done` ends the series (CT8).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct8_actions_requeue_as_they_say() {
    let (server, client) = server().await;
    create_cm(&server, "default", "a", json!({}));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let calls = Arc::new(Mutex::new(0u32));
    let shutdown = CancellationToken::new();
    let reconciler = move |cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
        let (tx, calls) = (tx.clone(), Arc::clone(&calls));
        async move {
            let name = cm.name().unwrap_or("").to_owned();
            let _ = tx.send((name.clone(), ctx.num_requeues()));
            if name != "a" {
                return Ok::<_, std::io::Error>(Action::Done);
            }
            let n = {
                let mut c = calls.lock().unwrap();
                *c += 1;
                *c
            };
            Ok(match n {
                1 => Action::RequeueRateLimited,
                2 => Action::RequeueRateLimited,
                3 => Action::Requeue,
                4 => Action::RequeueAfter(Duration::from_millis(1)),
                _ => Action::Done,
            })
        }
    };
    let controller = Controller::new(client)
        .for_resource::<ConfigMap>()
        .workers(1);
    let run = tokio::spawn(controller.run(reconciler, shutdown.clone()));
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(next(&mut rx).await);
    }
    let a = |n| ("a".to_owned(), n);
    assert_eq!(seen, [a(0), a(1), a(2), a(0), a(0)]);
    // Done: no sixth reconcile of "a" before a later key
    create_cm(&server, "default", "sentinel", json!({}));
    assert_eq!(next(&mut rx).await, ("sentinel".to_owned(), 0));
    shutdown.cancel();
    run.await.unwrap().unwrap();
    server.shutdown().await;
}

kcontrol_indexer::lean_resource! {
    /// A Secret as a controller that only routes it reads it: metadata and `type`.
    pub struct LeanSecret {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        scope: Namespaced,
        fields {
            /// `type`.
            type_: Option<String> = "type",
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lean_types_are_reconciled_owned_and_read_from_the_cache() {
    use kcontrol_indexer::compact::CompactConfigMap;

    let (server, client) = server().await;
    create_cm(&server, "default", "a", json!({}));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let controller = Controller::new(client)
        .for_resource::<CompactConfigMap>()
        .owns::<LeanSecret>()
        .workers(1);
    let reconcile = move |cm: Arc<CompactConfigMap>, ctx: Context<CompactConfigMap>| {
        let owned = ctx.cached::<LeanSecret>("a-secret");
        let _ = tx.send((
            ctx.key().to_owned(),
            cm.data.get("k").map(str::to_owned),
            owned.and_then(|s| s.type_.clone()),
        ));
        futures_ready::ready()
    };
    let run = tokio::spawn(controller.run(reconcile, shutdown.clone()));
    let first = next(&mut rx).await;
    assert_eq!(first, ("default/a".to_owned(), Some("v".to_owned()), None));
    let uid = server
        .objects()
        .get_as::<ConfigMap>("default", "a")
        .unwrap()
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "a-secret", "namespace": "default",
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "a",
                "uid": uid, "controller": true}]}});
    server
        .objects()
        .create("secrets", "default", secret)
        .unwrap();
    // the owned Secret's add reconciles its owner, whose cache holds it by then
    let second = next(&mut rx).await;
    assert_eq!(
        second,
        (
            "default/a".to_owned(),
            Some("v".to_owned()),
            Some("Opaque".to_owned())
        )
    );
    shutdown.cancel();
    run.await.unwrap().unwrap();
    server.shutdown().await;
}

/// The ConfigMap requests `server` answered: their verbs and queries.
pub(crate) fn configmap_requests(server: &TestServer) -> Vec<(Option<Verb>, String)> {
    server
        .request_log()
        .into_iter()
        .filter(|r| r.resource.as_deref() == Some("configmaps"))
        .map(|r| (r.verb, r.query))
        .collect()
}

/// Whether the requests synced through WatchList and never listed.
pub(crate) fn synced_by_watch_list(requests: &[(Option<Verb>, String)]) -> bool {
    !requests.iter().any(|(verb, _)| *verb == Some(Verb::List))
        && requests.iter().any(|(verb, query)| {
            *verb == Some(Verb::Watch) && query.contains("sendInitialEvents=true")
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_lists_and_watches_as_its_watch_config_says() {
    let (server, client) = server().await;
    create_cm(&server, "default", "a", json!({}));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let controller = Controller::new(client)
        .watch_config(WatchConfig::default().use_watch_list(true))
        .for_resource::<ConfigMap>()
        .workers(1);
    let run = tokio::spawn(controller.run(record(tx), shutdown.clone()));
    assert_eq!(next(&mut rx).await, "default/a");
    let requests = configmap_requests(&server);
    assert!(synced_by_watch_list(&requests), "{requests:?}");
    shutdown.cancel();
    run.await.unwrap().unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_known_at_run_time_is_reconciled_as_dynamic_objects() {
    use kcontrol_indexer::{ApiResource, DynamicObject};

    let (server, client) = server().await;
    create_cm(&server, "default", "a", json!({"app": "web"}));
    create_cm(&server, "default", "b", json!({}));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let controller = Controller::new(client)
        .for_dynamic(ApiResource::of::<ConfigMap>())
        .label_selector("app=web")
        .watches::<Secret>(configmap_it_is_for)
        .workers(1);
    let reconcile = move |cm: Arc<DynamicObject>, ctx: Context<DynamicObject>| {
        let value = cm.data["data"]["k"].as_str().map(str::to_owned);
        let cached = ctx.lister::<DynamicObject>().map(|l| l.list().len());
        let _ = tx.send((ctx.key().to_owned(), value, cached));
        futures_ready::ready()
    };
    let run = tokio::spawn(controller.run(reconcile, shutdown.clone()));
    // only the labelled ConfigMap is listed, decoded whole, and cached
    let first = ("default/a".to_owned(), Some("v".to_owned()), Some(1));
    assert_eq!(next(&mut rx).await, first);
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s", "namespace": "default", "labels": {"for": "a"}}});
    server
        .objects()
        .create("secrets", "default", secret)
        .unwrap();
    assert_eq!(next(&mut rx).await, first);
    shutdown.cancel();
    run.await.unwrap().unwrap();
    // `b` was never listed, so never reconciled
    assert!(rx.try_recv().is_err());
    server.shutdown().await;
}
