//! IN6: the factory hands out one shared informer per resource and scope,
//! starts them all (later ones on the next start), waits for them all and
//! reports each, and shuts them down.

use kcontrol_informer::WatchConfig;
use std::sync::Arc;
use std::time::Duration;

use kcontrol_indexer::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcontrol_indexer::{ApiResource, Object};
use kcontrol_informer::{
    wait_for_cache_sync, CacheSyncError, FactoryError, HasSynced, InformerFactory, InformerScope,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::*;

fn labelled(name: &str, app: &str) -> serde_json::Value {
    let mut obj = cm(name, "0");
    obj["metadata"]["labels"] = json!({ "app": app });
    obj
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in6_one_informer_per_resource_and_scope_started_and_awaited_together() {
    let server = server().await;
    namespaces(&server, &["a", "b"]);
    for (ns, name, app) in [("a", "x", "web"), ("a", "y", "db"), ("b", "x", "web")] {
        server
            .objects()
            .create("configmaps", ns, labelled(name, app))
            .unwrap();
    }
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}});
    server.objects().create("secrets", "a", secret).unwrap();

    let factory = InformerFactory::new(client(&server), Duration::ZERO);
    let cms = factory.informer::<ConfigMap>();
    assert!(
        Arc::ptr_eq(&cms, &factory.informer::<ConfigMap>()),
        "shared, not one per caller"
    );
    let secrets = factory.informer::<Secret>();
    let in_a = factory.scoped_informer::<ConfigMap>(InformerScope::all().namespace("a"));
    assert!(!Arc::ptr_eq(&in_a, &cms));
    assert!(Arc::ptr_eq(
        &in_a,
        &factory.scoped_informer::<ConfigMap>(InformerScope::all().namespace("a"))
    ));
    let web = factory.scoped_informer::<ConfigMap>(InformerScope::all().label_selector("app=web"));
    let dynamic = factory.dynamic_informer(&ApiResource::of::<ConfigMap>());
    assert!(Arc::ptr_eq(
        &dynamic,
        &factory.dynamic_informer(&ApiResource::of::<ConfigMap>())
    ));

    let shutdown = CancellationToken::new();
    factory.start(&shutdown).unwrap();
    bounded(factory.wait_for_cache_sync(&shutdown, None))
        .await
        .unwrap();
    assert!(factory.has_synced());
    assert_eq!(cms.store().len(), 3);
    assert_eq!(dynamic.store().len(), 3);
    assert_eq!(secrets.store().len(), 1);
    assert_eq!(in_a.lister().list().len(), 2);
    let mut web_keys = web.store().list_keys();
    web_keys.sort();
    assert_eq!(web_keys, ["a/x", "b/x"]);

    // created after start: it starts with the next start call
    let late = factory.scoped_informer::<Secret>(InformerScope::all().namespace("b"));
    assert!(!late.has_started());
    factory.start(&shutdown).unwrap();
    eventually("late.has_synced()", async || late.has_synced()).await;
    assert!(cms
        .lister()
        .get("a", "y")
        .is_some_and(|o| o.labels()["app"] == "db"));

    bounded(factory.shutdown()).await;
    for stopped in [
        cms.is_stopped(),
        secrets.is_stopped(),
        in_a.is_stopped(),
        web.is_stopped(),
        dynamic.is_stopped(),
        late.is_stopped(),
    ] {
        assert!(stopped);
    }
    // a shut-down factory starts nothing more
    let after = factory.scoped_informer::<Secret>(InformerScope::all().namespace("c"));
    factory.start(&shutdown).unwrap();
    assert!(!after.has_started());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in6_wait_reports_each_informer_and_ends_on_timeout_or_shutdown() {
    let server = server().await;
    server
        .objects()
        .create("configmaps", "default", cm("x", "0"))
        .unwrap();
    let factory = InformerFactory::builder(client(&server))
        .namespace("default")
        .build();
    let cms = factory.informer::<ConfigMap>();
    // a resource the server does not serve: its informer never syncs
    let missing =
        factory.dynamic_informer(&ApiResource::new("example.com", "v1", "Foo", "foos", true));
    let shutdown = CancellationToken::new();
    factory.start(&shutdown).unwrap();
    // the served one syncs (waited for without a deadline of its own)...
    bounded(wait_for_cache_sync(&shutdown, None, &[&*cms]))
        .await
        .unwrap();
    // ...and a timeout names the other one only
    let err = bounded(factory.wait_for_cache_sync(&shutdown, Some(Duration::from_millis(50))))
        .await
        .unwrap_err();
    assert!(matches!(err, CacheSyncError::Timeout { .. }), "{err}");
    assert_eq!(err.unsynced(), ["informer foos.example.com/v1 in default"]);
    assert!(!factory.has_synced() && !missing.has_synced());
    assert_eq!(cms.store().list_keys(), ["default/x"]);

    // the caller's shutdown ends the wait, and the informers
    let cancel = shutdown.clone();
    tokio::spawn(async move {
        // shapes the interleaving; a shutdown before or during the wait
        // ends it the same way
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.cancel();
    });
    let err = bounded(factory.wait_for_cache_sync(&shutdown, None))
        .await
        .unwrap_err();
    assert!(matches!(err, CacheSyncError::Shutdown { .. }), "{err}");
    assert_eq!(err.unsynced().len(), 1, "{err}");
    eventually("cms.is_stopped() && missing.is_stopped()", async || {
        cms.is_stopped() && missing.is_stopped()
    })
    .await;
    bounded(factory.shutdown()).await;
}

#[test]
fn start_outside_a_runtime_is_an_error() {
    let client = kcontrol_client::Client::new(kcontrol_client::Config::new(
        "http://127.0.0.1:1".parse().unwrap(),
    ))
    .unwrap();
    let factory = InformerFactory::new(client, Duration::ZERO);
    let _ = factory.informer::<ConfigMap>();
    assert!(matches!(
        factory.start(&CancellationToken::new()),
        Err(FactoryError::NoRuntime)
    ));
}

/// `factory.scope()` narrows the factory's own scope (its namespace kept);
/// `InformerScope::all()` starts from nothing, as its name says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_built_from_the_factory_keeps_its_namespace() {
    let server = server().await;
    namespaces(&server, &["a", "b"]);
    for (ns, name, app) in [("a", "x", "web"), ("a", "y", "db"), ("b", "x", "web")] {
        server
            .objects()
            .create("configmaps", ns, labelled(name, app))
            .unwrap();
    }
    let factory = InformerFactory::builder(client(&server))
        .namespace("a")
        .build();
    assert_eq!(factory.scope().namespace.as_deref(), Some("a"));
    let narrowed = factory.scoped_informer::<ConfigMap>(factory.scope().label_selector("app=web"));
    let everywhere =
        factory.scoped_informer::<ConfigMap>(InformerScope::all().label_selector("app=web"));
    let shutdown = CancellationToken::new();
    factory.start(&shutdown).unwrap();
    bounded(factory.wait_for_cache_sync(&shutdown, None))
        .await
        .unwrap();
    assert_eq!(narrowed.store().list_keys(), ["a/x"]);
    let mut keys = everywhere.store().list_keys();
    keys.sort();
    assert_eq!(keys, ["a/x", "b/x"]);
    bounded(factory.shutdown()).await;
}

#[tokio::test]
async fn a_label_selector_that_does_not_parse_fails_start_naming_the_informer() {
    let client = kcontrol_client::Client::new(kcontrol_client::Config::new(
        "http://127.0.0.1:1".parse().unwrap(),
    ))
    .unwrap();
    let factory = kcontrol_informer::SharedInformerFactory::new(client, Duration::ZERO);
    let good =
        factory.scoped_informer::<ConfigMap>(factory.scope().label_selector("app in (web,db)"));
    let _bad = factory.scoped_informer::<Secret>(factory.scope().label_selector("app in (web"));
    let shutdown = CancellationToken::new();
    let err = factory.start(&shutdown).unwrap_err();
    let FactoryError::InvalidLabelSelector {
        informer, selector, ..
    } = &err
    else {
        panic!("{err}");
    };
    assert!(informer.starts_with("secrets"), "{err}");
    assert_eq!(selector, "app in (web");
    // nothing started: the valid informer's selector did not make it run
    assert!(!good.has_synced());
    assert!(!good.is_stopped());
    factory.shutdown().await;
}

/// A server whose namespace `a` holds ConfigMaps `x` and `y`, both
/// labelled `app=web`.
async fn web_configmaps() -> kcontrol_testserver::TestServer {
    let server = server().await;
    namespaces(&server, &["a"]);
    for name in ["x", "y"] {
        server
            .objects()
            .create("configmaps", "a", labelled(name, "web"))
            .unwrap();
    }
    server
}

/// A metadata-only informer, through a list or WatchList, then watch:
/// its cache holds every object's metadata (labels included) and follows
/// updates and deletes; its bookmarks (PartialObjectMetadata, as
/// kube-apiserver sends them) move its version on; and it is an informer
/// apart from the full one of the same resource.
async fn metadata_informer_follows_the_server(use_watch_list: bool) {
    use kcontrol_indexer::PartialObjectMetadata;
    let server = web_configmaps().await;
    let factory = InformerFactory::builder(client(&server))
        .watch_config(WatchConfig::default().use_watch_list(use_watch_list))
        .build();
    let meta = factory.metadata_informer::<ConfigMap>();
    let full = factory.informer::<ConfigMap>();
    let shutdown = CancellationToken::new();
    factory.start(&shutdown).unwrap();
    bounded(factory.wait_for_cache_sync(&shutdown, None))
        .await
        .unwrap();
    let labels_of = |name: &str| -> Option<String> {
        let o: Arc<PartialObjectMetadata<ConfigMap>> =
            meta.store().get_by_key(&format!("a/{name}"))?;
        o.metadata.labels.as_ref()?.get("app").cloned()
    };
    assert_eq!(labels_of("x").as_deref(), Some("web"));
    assert_eq!(full.store().len(), 2);

    server
        .objects()
        .update("configmaps", "a", labelled("x", "db"))
        .unwrap();
    server.objects().delete("configmaps", "a", "y").unwrap();
    eventually("x relabelled db, alone in the metadata store", async || {
        labels_of("x").as_deref() == Some("db") && meta.store().len() == 1
    })
    .await;

    // only a bookmark can carry a version past the last ConfigMap change
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
    server.objects().create("secrets", "a", secret).unwrap();
    let now = server.objects().resource_version().to_string();
    assert!(
        try_eventually("a bookmark accepted", async || {
            meta.last_sync_resource_version().as_deref() == Some(now.as_str())
        })
        .await
        .is_ok(),
        "no bookmark accepted: at {:?}, server at {now}",
        meta.last_sync_resource_version()
    );
    // one sync per informer: a rejected bookmark would have relisted
    let syncs = server
        .request_log()
        .iter()
        .filter(|r| r.resource.as_deref() == Some("configmaps"))
        .filter(|r| {
            r.verb == Some(kcontrol_testserver::Verb::List)
                || r.query.contains("sendInitialEvents=true")
        })
        .count();
    assert_eq!(syncs, 2, "{:?}", server.request_log());
    shutdown.cancel();
    bounded(factory.shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_informer_lists_and_watches_metadata_only() {
    metadata_informer_follows_the_server(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_informer_syncs_through_watch_list_too() {
    metadata_informer_follows_the_server(true).await;
}

/// A compact metadata informer holds what the metadata informer holds
/// (through the same protobuf `PartialObjectMetadataList`), as
/// `CompactMeta`, and follows changes: an informer of its own beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compact_metadata_informer_holds_what_the_metadata_informer_holds() {
    use kcontrol_indexer::compact::CompactPartialObjectMetadata;
    let server = web_configmaps().await;
    // CompactMeta never keeps managedFields
    let factory = InformerFactory::builder(client(&server))
        .watch_config(WatchConfig::default().strip_managed_fields(true))
        .build();
    let meta = factory.metadata_informer::<ConfigMap>();
    let compact = factory.compact_metadata_informer::<ConfigMap>();
    let shutdown = CancellationToken::new();
    factory.start(&shutdown).unwrap();
    bounded(factory.wait_for_cache_sync(&shutdown, None))
        .await
        .unwrap();
    let same = || {
        let keys = meta.store().list_keys();
        keys.len() == compact.store().len()
            && keys.iter().all(|k| {
                let c: Option<Arc<CompactPartialObjectMetadata<ConfigMap>>> =
                    compact.store().get_by_key(k);
                c.map(|c| c.metadata.to_object_meta())
                    == meta.store().get_by_key(k).map(|m| m.metadata.clone())
            })
    };
    assert!(
        same(),
        "{:?} / {:?}",
        meta.store().get_by_key("a/x").map(|m| m.metadata.clone()),
        compact
            .store()
            .get_by_key("a/x")
            .map(|c| c.metadata.to_object_meta())
    );
    server
        .objects()
        .update("configmaps", "a", labelled("x", "db"))
        .unwrap();
    server.objects().delete("configmaps", "a", "y").unwrap();
    eventually("x relabelled db, alone in the compact store", async || {
        compact
            .store()
            .get_by_key("a/x")
            .is_some_and(|c| c.metadata.labels.get("app") == Some("db"))
            && compact.store().len() == 1
            && same()
    })
    .await;
    shutdown.cancel();
    bounded(factory.shutdown()).await;
}

/// CT9's "managedFields stripped": the factory's `strip_managed_fields`
/// reaches each informer it builds (PB6: the client asks protobuf, so the
/// decoder skips them), and a transform given for one type replaces it for
/// that type only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_factory_strips_managed_fields_unless_a_transform_replaces_it() {
    let server = server().await;
    let managed = json!([{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}}]);
    let mut cm = cm("a", "0");
    cm["metadata"]["managedFields"] = managed.clone();
    server
        .objects()
        .create("configmaps", "default", cm)
        .unwrap();
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s", "namespace": "default", "managedFields": managed}});
    server
        .objects()
        .create("secrets", "default", secret)
        .unwrap();
    let factory = InformerFactory::builder(client(&server))
        .watch_config(WatchConfig::default().strip_managed_fields(true))
        .namespace("default")
        .transform(|s: Secret| s)
        .build();
    let configmaps = factory.informer::<ConfigMap>();
    let secrets = factory.informer::<Secret>();
    let shutdown = CancellationToken::new();
    factory.start(&shutdown).unwrap();
    bounded(factory.wait_for_cache_sync(&shutdown, None))
        .await
        .unwrap();
    let stored = configmaps.lister().get("default", "a").unwrap();
    assert_eq!(stored.metadata.managed_fields, None);
    let kept = secrets.lister().get("default", "s").unwrap();
    // (the server adds an entry of its own: at least the one created)
    let entries = kept.metadata.managed_fields.as_ref().map_or(0, Vec::len);
    assert!(entries >= 1, "the transform keeps them: {entries}");
    bounded(factory.shutdown()).await;
}
