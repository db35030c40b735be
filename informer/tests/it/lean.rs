//! Lean types through the informer, against the testserver: the compact
//! `CompactConfigMap` and a user-defined `lean_resource!` type are listed
//! (list or WatchList), watched, relisted after a 410, selected by label
//! on the server and in the cache, and handed to handlers, and the cache
//! ends equal to the server's objects.

use kcontrol_informer::WatchConfig;
use std::collections::BTreeMap;
use std::sync::Arc;

use kcontrol_indexer::compact::{CompactConfigMap, CompactMap};
use kcontrol_indexer::labels::Selector;
use kcontrol_indexer::{lean_resource, meta_namespace_key, KubeObject, ObjectOrTombstone};
use kcontrol_informer::{InformerFactory, ResourceEventHandler};
use kcontrol_testserver::{TestServer, Verb};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{
    bounded, client, eventually, namespaces, server, server_view, try_eventually,
};

lean_resource! {
    /// Only the names, labels and `data` of ConfigMaps.
    pub struct DataOnly {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        scope: Namespaced,
        fields {
            data: CompactMap = "data",
        }
    }
}

fn labelled(name: &str, app: &str, value: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": app}},
        "data": {"v": value}})
}

/// A handler that rebuilds key -> resourceVersion from its notifications.
struct View(Mutex<BTreeMap<String, String>>);

impl<K: KubeObject> ResourceEventHandler<K> for View {
    fn on_add(&self, obj: &Arc<K>, _: bool) {
        let rv = obj.resource_version().unwrap_or_default().to_owned();
        if let Ok(key) = meta_namespace_key(obj.as_ref()) {
            self.0.lock().insert(key, rv);
        }
    }
    fn on_update(&self, _: &Arc<K>, new: &Arc<K>) {
        self.on_add(new, false);
    }
    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        let key = match obj {
            ObjectOrTombstone::Object(o) => meta_namespace_key(o.as_ref()).unwrap_or_default(),
            ObjectOrTombstone::Tombstone(t) => t.key.clone(),
        };
        self.0.lock().remove(&key);
    }
}

/// The server's `app=web` ConfigMaps of namespace `a` as key -> resourceVersion.
fn server_web(server: &TestServer) -> BTreeMap<String, String> {
    server
        .objects()
        .list("configmaps", Some("a"))
        .unwrap()
        .items
        .iter()
        .filter(|o| o.value()["metadata"]["labels"]["app"] == "web")
        .map(|o| (o.key().to_owned(), o.resource_version().to_string()))
        .collect()
}

fn lists(server: &TestServer) -> usize {
    server
        .request_log()
        .iter()
        .filter(|r| r.resource.as_deref() == Some("configmaps") && r.verb == Some(Verb::List))
        .count()
}

async fn lean_informers_follow_the_server(use_watch_list: bool) {
    let server = server().await;
    namespaces(&server, &["a"]);
    for (name, app) in [("x", "web"), ("y", "db"), ("z", "web")] {
        server
            .objects()
            .create("configmaps", "a", labelled(name, app, "1"))
            .unwrap();
    }
    let factory = InformerFactory::builder(client(&server))
        .watch_config(WatchConfig::default().use_watch_list(use_watch_list))
        .namespace("a")
        .build();
    let web = factory.scope().label_selector("app=web");
    let compact = factory.scoped_informer::<CompactConfigMap>(web);
    let lean = factory.informer::<DataOnly>();
    let view = Arc::new(View(Mutex::new(BTreeMap::new())));
    compact.add_event_handler(Arc::clone(&view)).unwrap();
    let shutdown = CancellationToken::new();
    factory.start(&shutdown).unwrap();
    bounded(factory.wait_for_cache_sync(&shutdown, None))
        .await
        .unwrap();

    let cached = |store: &kcontrol_indexer::ThreadSafeStore<CompactConfigMap>| {
        store
            .list()
            .iter()
            .map(|o| {
                let key = meta_namespace_key(o.as_ref()).unwrap();
                (key, o.resource_version().unwrap_or_default().to_owned())
            })
            .collect::<BTreeMap<_, _>>()
    };
    // the server applied the label selector; the cache holds lean objects
    assert_eq!(cached(&compact.store()), server_web(&server));
    let x = compact.store().get_by_key("a/x").unwrap();
    assert_eq!(x.data.get("v"), Some("1"));
    assert_eq!(x.metadata.labels.get("app"), Some("web"));
    assert_eq!(lean.store().len(), 3);
    let db = Selector::parse("app=db").unwrap();
    let lister = kcontrol_indexer::Lister::new(lean.store());
    assert_eq!(lister.list_namespaced_by_selector("a", &db).len(), 1);

    // watch: update, relabel out of the selection, delete, create
    server
        .objects()
        .update("configmaps", "a", labelled("x", "web", "2"))
        .unwrap();
    server
        .objects()
        .update("configmaps", "a", labelled("z", "db", "2"))
        .unwrap();
    server.objects().delete("configmaps", "a", "y").unwrap();
    server
        .objects()
        .create("configmaps", "a", labelled("w", "web", "1"))
        .unwrap();
    let lean_view = || {
        lean.store()
            .list()
            .iter()
            .map(|o| {
                let key = meta_namespace_key(o.as_ref()).unwrap();
                (key, o.resource_version().unwrap_or_default().to_owned())
            })
            .collect::<BTreeMap<_, _>>()
    };
    let converged = || {
        cached(&compact.store()) == server_web(&server)
            && *view.0.lock() == server_web(&server)
            && lean_view() == server_view(&server, Some("a"))
    };
    let state = || {
        format!(
            "handler {:?} compact {:?} server {:?} lean {:?}",
            view.0.lock(),
            cached(&compact.store()),
            server_view(&server, Some("a")),
            lean_view()
        )
    };
    let converge = async || {
        if let Err(e) = try_eventually("both informers to converge", async || converged()).await {
            panic!("{e}: {}", state());
        }
    };
    converge().await;
    let x = compact.store().get_by_key("a/x").unwrap();
    assert_eq!(x.data.get("v"), Some("2"));

    // a 410 on the next watch: both informers relist and converge again
    let before = lists(&server);
    server.faults().expire_next_watches(2);
    server.faults().close_all_watches();
    server
        .objects()
        .update("configmaps", "a", labelled("w", "web", "3"))
        .unwrap();
    server.objects().delete("configmaps", "a", "x").unwrap();
    eventually("a relist (or a WatchList)", async || {
        lists(&server) > before || use_watch_list
    })
    .await;
    converge().await;
    let w = lean.store().get_by_key("a/w").unwrap();
    assert_eq!(w.data.get("v"), Some("3"));

    shutdown.cancel();
    bounded(factory.shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lean_informers_list_watch_relist_and_select() {
    lean_informers_follow_the_server(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lean_informers_sync_through_watch_list_too() {
    lean_informers_follow_the_server(true).await;
}
