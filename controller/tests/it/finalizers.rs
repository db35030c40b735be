//! Finalizers against the in-process API server (CT14): added on the first
//! reconcile, cleanup then removal once `deletionTimestamp` is set, a
//! failing cleanup retried while the object stays, foreign finalizers
//! kept, and writes that fail rather than overwrite a concurrent change.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::Api;
use kcontrol_controller::finalizers::{finalizer, Event, FinalizerError};
use kcontrol_controller::{Action, Context, Controller};
use kcontrol_indexer::Object;
use kcontrol_testserver::TestServer;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use support::{eventually, next, server};

const OURS: &str = "example.com/cleanup";
const FOREIGN: &str = "other.example.com/keep";

/// Creates a ConfigMap; no finalizers list at all when `finalizers` is empty.
fn create_cm(server: &TestServer, name: &str, finalizers: &[&str]) {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"}});
    if !finalizers.is_empty() {
        cm["metadata"]["finalizers"] = json!(finalizers);
    }
    server
        .objects()
        .create("configmaps", "default", cm)
        .unwrap();
}

fn get_cm(server: &TestServer, name: &str) -> Option<ConfigMap> {
    server
        .objects()
        .get_as::<ConfigMap>("default", name)
        .unwrap()
}

fn finalizers_of(cm: &ConfigMap) -> Vec<String> {
    cm.metadata.finalizers.clone().unwrap_or_default()
}

/// Sets a ConfigMap's finalizers on the server (as another controller would).
fn set_finalizers(server: &TestServer, name: &str, finalizers: &[&str]) {
    let mut cm = get_cm(server, name).unwrap();
    cm.metadata.finalizers = Some(finalizers.iter().map(|f| (*f).to_owned()).collect());
    let mut value = serde_json::to_value(&cm).unwrap();
    value["apiVersion"] = json!("v1");
    value["kind"] = json!("ConfigMap");
    server
        .objects()
        .update("configmaps", "default", value)
        .unwrap();
}

#[derive(Debug, thiserror::Error)]
#[error("cleanup attempt {0} failed")]
struct CleanupFailed(u32);

/// What the reconciler saw.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// A reconcile began: name, deleting, finalizers in the cache.
    Reconcile(String, bool, Vec<String>),
    /// `Event::Apply` of this object.
    Apply(String),
    /// `Event::Cleanup` of this object, attempt n, and what the server
    /// held meanwhile: `(deleting, finalizers)`, `None` when absent.
    Cleanup(String, u32, Option<(bool, Vec<String>)>),
}

/// A reconciler under the finalizer `OURS` whose cleanup fails its first
/// `failures` attempts (per object).
fn reconciler(
    tx: mpsc::UnboundedSender<Seen>,
    failures: u32,
) -> impl Fn(
    Arc<ConfigMap>,
    Context<ConfigMap>,
) -> futures::future::BoxFuture<'static, Result<Action, FinalizerError<CleanupFailed>>>
       + Send
       + Sync
       + 'static {
    let attempts = Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
    move |cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
        let (tx, attempts) = (tx.clone(), Arc::clone(&attempts));
        Box::pin(async move {
            let name = cm.name().unwrap().to_owned();
            let _ = tx.send(Seen::Reconcile(
                name.clone(),
                cm.deletion_timestamp().is_some(),
                finalizers_of(&cm),
            ));
            let api = Api::<ConfigMap>::namespaced(ctx.client().clone(), "default");
            let check = api.clone();
            finalizer(&api, OURS, cm, |event| async move {
                match event {
                    Event::Apply(cm) => {
                        let _ = tx.send(Seen::Apply(cm.name().unwrap().to_owned()));
                        Ok(Action::Done)
                    }
                    Event::Cleanup(cm) => {
                        let n = {
                            let mut a = attempts.lock().unwrap();
                            let n: &mut u32 = a.entry(name.clone()).or_default();
                            *n += 1;
                            *n
                        };
                        // what the server holds while the cleanup runs
                        let live = check.get_opt(&name).await.unwrap().map(|live| {
                            (live.deletion_timestamp().is_some(), finalizers_of(&live))
                        });
                        let _ = tx.send(Seen::Cleanup(cm.name().unwrap().to_owned(), n, live));
                        if n <= failures {
                            Err(CleanupFailed(n))
                        } else {
                            Ok(Action::Done)
                        }
                    }
                }
            })
            .await
        })
    }
}

fn reconcile(name: &str, deleting: bool, finalizers: &[&str]) -> Seen {
    Seen::Reconcile(
        name.to_owned(),
        deleting,
        finalizers.iter().map(|f| (*f).to_owned()).collect(),
    )
}

fn live(finalizers: &[&str]) -> Option<(bool, Vec<String>)> {
    Some((true, finalizers.iter().map(|f| (*f).to_owned()).collect()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct14_added_on_first_reconcile_then_cleanup_removes_it_and_the_object_goes() {
    let (server, client) = server().await;
    create_cm(&server, "a", &[]);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let controller = Controller::new(client)
        .for_resource::<ConfigMap>()
        .workers(1);
    let run = tokio::spawn(controller.run(reconciler(tx, 0), shutdown.clone()));
    // the first reconcile only adds the finalizer; its write's event
    // reconciles again, and only then is Apply called
    assert_eq!(next(&mut rx).await, reconcile("a", false, &[]));
    assert_eq!(next(&mut rx).await, reconcile("a", false, &[OURS]));
    assert_eq!(next(&mut rx).await, Seen::Apply("a".into()));
    assert_eq!(finalizers_of(&get_cm(&server, "a").unwrap()), [OURS]);
    // the server keeps the object, with deletionTimestamp, for the finalizer
    let deleted = server
        .objects()
        .delete("configmaps", "default", "a")
        .unwrap();
    assert!(!deleted.value()["metadata"]["deletionTimestamp"].is_null());
    assert!(get_cm(&server, "a").is_some());
    assert_eq!(next(&mut rx).await, reconcile("a", true, &[OURS]));
    assert_eq!(
        next(&mut rx).await,
        Seen::Cleanup("a".into(), 1, live(&[OURS]))
    );
    eventually("the object is removed", async || {
        get_cm(&server, "a").is_none()
    })
    .await;
    shutdown.cancel();
    run.await.unwrap().unwrap();
    // the removal's delete event finds no object: not reconciled (CT10)
    assert!(rx.try_recv().is_err());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct14_a_failing_cleanup_is_retried_and_the_object_stays_until_it_succeeds() {
    let (server, client) = server().await;
    create_cm(&server, "a", &[]);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let controller = Controller::new(client)
        .for_resource::<ConfigMap>()
        .workers(1);
    let stats = controller.stats();
    let run = tokio::spawn(controller.run(reconciler(tx, 3), shutdown.clone()));
    loop {
        if next(&mut rx).await == Seen::Apply("a".into()) {
            break;
        }
    }
    server
        .objects()
        .delete("configmaps", "default", "a")
        .unwrap();
    let mut cleanups = Vec::new();
    while cleanups.len() < 4 {
        if let Seen::Cleanup(name, n, live) = next(&mut rx).await {
            cleanups.push((name, n, live));
        }
    }
    // every attempt ran while the server still held the object, deleting,
    // with our finalizer; the three failures were retried (with backoff)
    assert_eq!(
        cleanups,
        (1..=4)
            .map(|n| ("a".to_owned(), n, live(&[OURS])))
            .collect::<Vec<_>>()
    );
    eventually("the object is removed", async || {
        get_cm(&server, "a").is_none()
    })
    .await;
    assert_eq!(stats.errors(), 3);
    shutdown.cancel();
    run.await.unwrap().unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct14_a_foreign_finalizer_is_kept() {
    let (server, client) = server().await;
    create_cm(&server, "a", &[FOREIGN]);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let controller = Controller::new(client)
        .for_resource::<ConfigMap>()
        .workers(1);
    let run = tokio::spawn(controller.run(reconciler(tx, 0), shutdown.clone()));
    assert_eq!(next(&mut rx).await, reconcile("a", false, &[FOREIGN]));
    assert_eq!(next(&mut rx).await, reconcile("a", false, &[FOREIGN, OURS]));
    assert_eq!(next(&mut rx).await, Seen::Apply("a".into()));
    server
        .objects()
        .delete("configmaps", "default", "a")
        .unwrap();
    assert_eq!(next(&mut rx).await, reconcile("a", true, &[FOREIGN, OURS]));
    assert_eq!(
        next(&mut rx).await,
        Seen::Cleanup("a".into(), 1, live(&[FOREIGN, OURS]))
    );
    // only ours is removed: the object waits for the other finalizer, and
    // being reconciled without ours, it is not cleaned up again
    assert_eq!(next(&mut rx).await, reconcile("a", true, &[FOREIGN]));
    let cm = get_cm(&server, "a").unwrap();
    assert!(cm.deletion_timestamp().is_some());
    assert_eq!(finalizers_of(&cm), [FOREIGN]);
    create_cm(&server, "sentinel", &[]);
    assert_eq!(next(&mut rx).await, reconcile("sentinel", false, &[]));
    // the other controller finishes: the object goes
    set_finalizers(&server, "a", &[]);
    eventually("the object is removed", async || {
        get_cm(&server, "a").is_none()
    })
    .await;
    shutdown.cancel();
    run.await.unwrap().unwrap();
    server.shutdown().await;
}

/// Counts the calls of the function given to `finalizer`.
fn counting(
    calls: &Arc<AtomicU32>,
) -> impl FnOnce(Event<ConfigMap>) -> std::future::Ready<Result<Action, std::io::Error>> {
    let calls = Arc::clone(calls);
    move |_event| {
        calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(Action::Requeue))
    }
}

/// Writes computed from a stale object fail (422, a failed `test`) rather
/// than overwrite what a concurrent writer did to the finalizers; a
/// re-created object of the same name is not written for the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct14_writes_from_a_stale_object_fail_rather_than_overwrite() {
    let (server, client) = server().await;
    let api = Api::<ConfigMap>::namespaced(client.clone(), "default");
    let calls = Arc::new(AtomicU32::new(0));
    let is_invalid = |e: &FinalizerError<std::io::Error>| match e {
        FinalizerError::AddFinalizer { source, .. }
        | FinalizerError::RemoveFinalizer { source, .. } => {
            source.api_error().is_some_and(|a| a.code() == 422)
        }
        _ => false,
    };

    // no list yet: the resourceVersion is tested
    create_cm(&server, "a", &[]);
    let stale = Arc::new(api.get("a").await.unwrap());
    assert!(stale.metadata.finalizers.is_none());
    set_finalizers(&server, "a", &[FOREIGN]);
    let err = finalizer(&api, OURS, Arc::clone(&stale), counting(&calls))
        .await
        .unwrap_err();
    assert!(is_invalid(&err), "{err}");
    assert_eq!(finalizers_of(&get_cm(&server, "a").unwrap()), [FOREIGN]);

    // a list: it is tested, then ours appended
    let fresh = Arc::new(api.get("a").await.unwrap());
    let action = finalizer(&api, OURS, Arc::clone(&fresh), counting(&calls))
        .await
        .unwrap();
    assert_eq!(action, Action::Done);
    assert_eq!(
        finalizers_of(&get_cm(&server, "a").unwrap()),
        [FOREIGN, OURS]
    );
    // the same stale list again: no second copy of ours
    let err = finalizer(&api, OURS, fresh, counting(&calls))
        .await
        .unwrap_err();
    assert!(is_invalid(&err), "{err}");
    assert_eq!(calls.load(Ordering::SeqCst), 0, "never called while adding");

    // live with ours: Apply, its action returned
    let with_ours = Arc::new(api.get("a").await.unwrap());
    let action = finalizer(&api, OURS, with_ours, counting(&calls))
        .await
        .unwrap();
    assert_eq!((action, calls.load(Ordering::SeqCst)), (Action::Requeue, 1));

    // deleting; our index moves (the foreign finalizer goes) after the read:
    // the cleanup ran, the removal fails, the object keeps ours
    server
        .objects()
        .delete("configmaps", "default", "a")
        .unwrap();
    let deleting = Arc::new(api.get("a").await.unwrap());
    set_finalizers(&server, "a", &[OURS]);
    let err = finalizer(&api, OURS, deleting, counting(&calls))
        .await
        .unwrap_err();
    assert!(is_invalid(&err), "{err}");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(finalizers_of(&get_cm(&server, "a").unwrap()), [OURS]);
    // from the fresh state: cleanup again, ours removed, the object gone
    let deleting = Arc::new(api.get("a").await.unwrap());
    finalizer(&api, OURS, deleting, counting(&calls))
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(get_cm(&server, "a").is_none());

    // re-created under the same name with the same list: the uid differs
    create_cm(&server, "b", &[FOREIGN]);
    let old = Arc::new(api.get("b").await.unwrap());
    server
        .objects()
        .delete("configmaps", "default", "b")
        .unwrap();
    set_finalizers(&server, "b", &[]);
    assert!(get_cm(&server, "b").is_none());
    create_cm(&server, "b", &[FOREIGN]);
    let err = finalizer(&api, OURS, old, counting(&calls))
        .await
        .unwrap_err();
    assert!(is_invalid(&err), "{err}");
    assert_eq!(finalizers_of(&get_cm(&server, "b").unwrap()), [FOREIGN]);
    server.shutdown().await;
}

/// Deleting without our finalizer: nothing to do; bad input is refused
/// before any write or call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct14_nothing_without_our_finalizer_and_bad_input_is_refused() {
    let (server, client) = server().await;
    let api = Api::<ConfigMap>::namespaced(client.clone(), "default");
    let calls = Arc::new(AtomicU32::new(0));
    create_cm(&server, "a", &[FOREIGN]);
    server
        .objects()
        .delete("configmaps", "default", "a")
        .unwrap();
    let deleting = Arc::new(api.get("a").await.unwrap());
    let action = finalizer(&api, OURS, Arc::clone(&deleting), counting(&calls))
        .await
        .unwrap();
    assert_eq!(action, Action::Done);

    let live = {
        create_cm(&server, "b", &[]);
        Arc::new(api.get("b").await.unwrap())
    };
    for bad in ["", "example.com/with space", "example.com/\n"] {
        let err = finalizer(&api, bad, Arc::clone(&live), counting(&calls))
            .await
            .unwrap_err();
        assert!(matches!(err, FinalizerError::InvalidName(_)), "{err}");
    }
    let everywhere = Api::<ConfigMap>::all(client.clone());
    let err = finalizer(&everywhere, OURS, Arc::clone(&live), counting(&calls))
        .await
        .unwrap_err();
    assert!(
        matches!(err, FinalizerError::NamespaceMismatch { api: None, .. }),
        "{err}"
    );
    let other = Api::<ConfigMap>::namespaced(client.clone(), "kube-system");
    let err = finalizer(&other, OURS, Arc::clone(&live), counting(&calls))
        .await
        .unwrap_err();
    assert!(
        matches!(err, FinalizerError::NamespaceMismatch { .. }),
        "{err}"
    );
    let mut unversioned = (*live).clone();
    unversioned.metadata.resource_version = None;
    let err = finalizer(&api, OURS, Arc::new(unversioned), counting(&calls))
        .await
        .unwrap_err();
    assert!(
        matches!(err, FinalizerError::MissingMetadata("resourceVersion")),
        "{err}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(finalizers_of(&get_cm(&server, "a").unwrap()), [FOREIGN]);
    assert!(finalizers_of(&get_cm(&server, "b").unwrap()).is_empty());
    server.shutdown().await;
}
