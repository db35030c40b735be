//! The reflector over both encodings end to end: each scenario runs once
//! with the client asking protobuf (the default for built-in kinds) and
//! once asking JSON, and checks from the server's request log that the
//! lists and watches really went over that encoding (the `Content-Type` of
//! each answer), then that the store converges (RF8).

use std::sync::Arc;

use kcontrol_client::{Api, ContentType};
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_reflector::ReflectorConfig;
use kcontrol_testserver::{TestServer, Verb};

use crate::support::*;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";
const JSON: &str = "application/json";

fn harness(
    server: &TestServer,
    encoding: ContentType,
    config: ReflectorConfig<ConfigMap>,
) -> Harness {
    let client = client_for(server.url()).with_content_type(encoding);
    let api: Api<ConfigMap> = Api::namespaced(client, NS);
    Harness::start(Arc::new(api), config)
}

/// Every answer to `verb` (successful ones) was in `encoding`.
fn answered_in(server: &TestServer, verb: Verb, encoding: ContentType) {
    let want = match (encoding, verb) {
        (ContentType::Protobuf, Verb::Watch) => PROTOBUF_WATCH,
        (ContentType::Protobuf, _) => PROTOBUF,
        (ContentType::Json, _) => JSON,
    };
    let answers: Vec<_> = requests(server, verb)
        .into_iter()
        .filter(|r| r.status == 200)
        .collect();
    assert!(!answers.is_empty(), "no {verb:?} answered");
    for r in answers {
        assert_eq!(r.content_type, want, "{verb:?} {}?{}", r.path, r.query);
    }
}

macro_rules! both_encodings {
    ($($name:ident => $scenario:ident),* $(,)?) => {
        $(
            mod $name {
                use super::*;
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn protobuf() {
                    $scenario(ContentType::Protobuf).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn json() {
                    $scenario(ContentType::Json).await;
                }
            }
        )*
    };
}

both_encodings! {
    rf2_paged_list_then_watch => paged_list_then_watch,
    rf1_expired_list_relists => expired_relist,
    rf3_bookmarks_advance_the_version => bookmarks,
    rf6_watch_list_ends_at_the_bookmark => watch_list,
    rf4_error_event_410_relists => error_event,
    rf7_a_frame_that_does_not_decode_restarts_the_watch => corrupt_frame,
    rf7_stripped_managed_fields_never_reach_the_store => stripped_managed_fields,
}

/// A ConfigMap whose metadata carries one managedFields entry.
fn with_managed_fields(name: &str, value: &str) -> serde_json::Value {
    let mut cm = configmap(name, value);
    cm["metadata"]["managedFields"] = serde_json::json!([{
        "manager": "kubectl", "operation": "Update", "apiVersion": "v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:value": {}}}
    }]);
    cm
}

/// `strip_managed_fields`: listed and watched objects reach the store
/// without managedFields in either encoding (protobuf skips them unread,
/// JSON drops them after decoding), while the server's objects keep them.
async fn stripped_managed_fields(encoding: ContentType) {
    let server = server().await;
    for i in 0..3 {
        let cm = with_managed_fields(&format!("cm-{i}"), "v0");
        server.objects().create("configmaps", NS, cm).unwrap();
    }
    let config = ReflectorConfig::default().watch_config(fast_watch().strip_managed_fields(true));
    let h = harness(&server, encoding, config);
    h.synced().await;
    h.converge(&server).await;
    let cm = with_managed_fields("cm-1", "later");
    server.objects().update("configmaps", NS, cm).unwrap();
    h.converge(&server).await;
    let on_server = server.objects().list("configmaps", Some(NS)).unwrap();
    for o in &on_server.items {
        let managed = &o.value()["metadata"]["managedFields"];
        assert!(managed.is_array(), "the server keeps them: {managed}");
    }
    let stored = h.store.list();
    assert_eq!(stored.len(), 3);
    for cm in &stored {
        assert_eq!(cm.metadata.managed_fields, None, "{:?}", cm.metadata.name);
    }
    answered_in(&server, Verb::List, encoding);
    answered_in(&server, Verb::Watch, encoding);
    h.stop().await;
}

/// RF2, RF8: a paged list, then changes through the watch.
async fn paged_list_then_watch(encoding: ContentType) {
    let server = server().await;
    seed(&server, 25);
    let h = harness(
        &server,
        encoding,
        ReflectorConfig::default().watch_config(fast_watch().page_size(10)),
    );
    h.synced().await;
    h.converge(&server).await;
    // (the first list, at resourceVersion "0", is served whole from the
    // watch cache, limit or not, as kube-apiserver does)
    update(&server, "cm-3", "later");
    server.objects().delete("configmaps", NS, "cm-4").unwrap();
    h.converge(&server).await;
    answered_in(&server, Verb::List, encoding);
    answered_in(&server, Verb::Watch, encoding);
    assert!(h.errors().is_empty(), "{:?}", h.errors());
    h.stop().await;
}

/// RF1: a 410 on the list falls back to a consistent list.
async fn expired_relist(encoding: ContentType) {
    let server = server().await;
    seed(&server, 5);
    server.faults().expire_next_lists(1);
    let h = harness(&server, encoding, fast_config());
    h.synced().await;
    h.converge(&server).await;
    let lists = requests(&server, Verb::List);
    assert_eq!(lists[0].status, 410);
    answered_in(&server, Verb::List, encoding);
    h.stop().await;
}

/// RF3: bookmarks move the last synced version without touching the store.
async fn bookmarks(encoding: ContentType) {
    let server = server().await;
    seed(&server, 3);
    let h = harness(&server, encoding, fast_config());
    h.synced().await;
    h.converge(&server).await;
    let before = h.reflector.last_sync_resource_version().unwrap();
    let later = bump_version(&server);
    let reflector = h.reflector.clone();
    eventually_within(
        "a bookmark at the newer version",
        DEADLINE,
        async move || {
            reflector
                .last_sync_resource_version()
                .and_then(|v| v.parse::<u64>().ok())
                >= Some(later)
        },
    )
    .await;
    assert_ne!(h.reflector.last_sync_resource_version().unwrap(), before);
    answered_in(&server, Verb::Watch, encoding);
    h.stop().await;
}

/// RF6: WatchList's initial events end at the annotated bookmark.
async fn watch_list(encoding: ContentType) {
    let server = server().await;
    seed(&server, 40);
    let config = ReflectorConfig::default().watch_config(fast_watch().use_watch_list(true));
    let h = harness(&server, encoding, config);
    h.synced().await;
    h.converge(&server).await;
    assert!(requests(&server, Verb::List).is_empty(), "no list");
    update(&server, "cm-1", "later");
    h.converge(&server).await;
    answered_in(&server, Verb::Watch, encoding);
    h.stop().await;
}

/// RF4: an ERROR event (410 Expired) in the stream's encoding ends the
/// watch and relists.
async fn error_event(encoding: ContentType) {
    let server = server().await;
    seed(&server, 4);
    let h = harness(&server, encoding, fast_config());
    h.synced().await;
    h.converge(&server).await;
    let lists = requests(&server, Verb::List).len();
    // a converged store does not mean the watch is open: a close before
    // it opens would be missed, and the expiry never served
    wait_watch_open(&server).await;
    server.faults().expire_next_watches(1);
    server.faults().close_all_watches();
    update(&server, "cm-2", "after");
    eventually_within("a relist after the ERROR event", DEADLINE, async || {
        requests(&server, Verb::List).len() > lists
    })
    .await;
    h.converge(&server).await;
    answered_in(&server, Verb::Watch, encoding);
    h.stop().await;
}

/// RF7: an undecodable frame is an error that restarts the watch.
async fn corrupt_frame(encoding: ContentType) {
    let server = server().await;
    seed(&server, 2);
    let h = harness(&server, encoding, fast_config());
    h.synced().await;
    h.converge(&server).await;
    server.faults().corrupt_next_watch_frames(1);
    update(&server, "cm-0", "lost frame");
    let errors = h.errors.clone();
    eventually_within("the decode error", DEADLINE, async move || {
        !errors.lock().unwrap().is_empty()
    })
    .await;
    update(&server, "cm-1", "after");
    h.converge(&server).await;
    answered_in(&server, Verb::Watch, encoding);
    assert_eq!(
        requests(&server, Verb::List).len(),
        1,
        "re-watched, not relisted: {:?}",
        h.errors()
    );
    h.stop().await;
}
