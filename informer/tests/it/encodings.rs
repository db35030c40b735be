//! The informer over both encodings end to end: a factory on a client
//! asking protobuf (the default for built-in kinds) or JSON caches
//! ConfigMaps as k8s-openapi's type, as `CompactConfigMap` and metadata
//! only, through list or WatchList, follows changes, and ends equal to the
//! server; the server's request log shows each list and watch went over
//! the encoding asked for.

use kcontrol_informer::WatchConfig;
use std::collections::BTreeMap;

use kcontrol_client::ContentType;
use kcontrol_indexer::compact::CompactConfigMap;
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::{meta_namespace_key, KubeObject, ThreadSafeStore};
use kcontrol_informer::InformerFactory;
use kcontrol_testserver::{TestServer, Verb};
use tokio_util::sync::CancellationToken;

use crate::support::{bounded, client, cm, eventually, namespaces, server, server_view};

fn view<K: KubeObject>(store: &ThreadSafeStore<K>) -> BTreeMap<String, String> {
    store
        .list()
        .iter()
        .map(|o| {
            (
                meta_namespace_key(o.as_ref()).unwrap(),
                o.resource_version().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The content types of the successful configmap lists and watches.
fn answers(server: &TestServer) -> Vec<(Verb, String)> {
    server
        .request_log()
        .into_iter()
        .filter(|r| r.resource.as_deref() == Some("configmaps") && r.status == 200)
        .filter_map(|r| Some((r.verb?, r.content_type)))
        .filter(|(v, _)| matches!(v, Verb::List | Verb::Watch))
        .collect()
}

async fn informers_follow_the_server(encoding: ContentType, use_watch_list: bool) {
    let server = server().await;
    namespaces(&server, &["a"]);
    for i in 0..20 {
        server
            .objects()
            .create("configmaps", "a", cm(&format!("cm-{i}"), "1"))
            .unwrap();
    }
    let factory = InformerFactory::builder(client(&server).with_content_type(encoding))
        .watch_config(WatchConfig::default().use_watch_list(use_watch_list))
        .namespace("a")
        .build();
    let full = factory.informer::<ConfigMap>();
    let compact = factory.informer::<CompactConfigMap>();
    let meta = factory.metadata_informer::<ConfigMap>();
    let shutdown = CancellationToken::new();
    factory.start(&shutdown).unwrap();
    bounded(factory.wait_for_cache_sync(&shutdown, None))
        .await
        .unwrap();
    let want = server_view(&server, Some("a"));
    assert_eq!(view(&full.store()), want);
    assert_eq!(view(&compact.store()), want);
    assert_eq!(view(&meta.store()), want);
    assert_eq!(
        compact.store().get_by_key("a/cm-3").unwrap().data.get("v"),
        Some("1")
    );

    server
        .objects()
        .update("configmaps", "a", cm("cm-3", "2"))
        .unwrap();
    server.objects().delete("configmaps", "a", "cm-4").unwrap();
    server
        .objects()
        .create("configmaps", "a", cm("new", "1"))
        .unwrap();
    let synced = || {
        let want = server_view(&server, Some("a"));
        view(&full.store()) == want && view(&compact.store()) == want && view(&meta.store()) == want
    };
    eventually("the caches follow the server", async || synced()).await;
    assert_eq!(
        full.store()
            .get_by_key("a/cm-3")
            .unwrap()
            .data
            .as_ref()
            .unwrap()["v"],
        "2"
    );

    let answers = answers(&server);
    assert!(answers.iter().any(|(v, _)| *v == Verb::Watch));
    for (verb, content_type) in answers {
        let want = match (encoding, verb) {
            (ContentType::Json, _) => "application/json",
            (ContentType::Protobuf, Verb::Watch) => {
                "application/vnd.kubernetes.protobuf;stream=watch"
            }
            (ContentType::Protobuf, _) => "application/vnd.kubernetes.protobuf",
        };
        assert_eq!(content_type, want, "{verb:?}");
    }
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_list_and_watch() {
    informers_follow_the_server(ContentType::Protobuf, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_watch_list() {
    informers_follow_the_server(ContentType::Protobuf, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_list_and_watch() {
    informers_follow_the_server(ContentType::Json, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_watch_list() {
    informers_follow_the_server(ContentType::Json, true).await;
}
