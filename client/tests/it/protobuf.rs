//! Content negotiation against the testserver over real loopback HTTP:
//! built-in kinds are read in protobuf (list, get, watch, WatchList,
//! metadata-only) and decode to exactly what JSON decodes to; a server
//! answering JSON (an object the protobuf mapping cannot carry) is decoded
//! by the answer's Content-Type; errors answered in protobuf are the same
//! typed errors; writes stay JSON; `ContentType::Json` turns it off.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::{
    Api, Client, Config, ContentType, ListParams, PostParams, WatchEvent, WatchParams,
};
use kcontrol_indexer::compact::CompactConfigMap;
use kcontrol_indexer::PartialObjectMetadata;
use kcontrol_testserver::{RequestRecord, TestServer, Verb};
use serde_json::json;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const ACCEPT: &str = "application/vnd.kubernetes.protobuf,application/json";

async fn server() -> TestServer {
    TestServer::builder()
        .deployment_simulator(None)
        .start()
        .await
        .unwrap()
}

fn client(server: &TestServer, content_type: ContentType) -> Client {
    let config = Config::new(server.url().parse().unwrap())
        .with_rate_limit(None)
        .with_request_timeout(Some(Duration::from_secs(20)))
        .with_content_type(content_type);
    Client::new(config).unwrap()
}

/// The next event, within 30 s.
async fn next(events: &mut kcontrol_client::WatchStream<ConfigMap>) -> WatchEvent<ConfigMap> {
    tokio::time::timeout(Duration::from_secs(30), events.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
}

fn last(server: &TestServer, verb: Verb) -> RequestRecord {
    server
        .request_log()
        .into_iter()
        .rev()
        .find(|r| r.verb == Some(verb))
        .unwrap()
}

fn configmap(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
            "annotations": {"note": "n"}, "finalizers": ["x/y"]},
        "data": {"k": "v", "empty": ""}, "binaryData": {"b": "AAEC"}})
}

/// A Deployment with `spec.replicas: 0` (a pointer set to zero) and
/// `paused: false`, `minReadySeconds: 0` (Go non-pointer zeros).
fn deployment(name: &str, probe: bool) -> serde_json::Value {
    let mut container = json!({"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]});
    if probe {
        // the testserver's protobuf mapping does not carry probes
        container["readinessProbe"] = json!({"tcpSocket": {"port": 80}});
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [container], "automountServiceAccountToken": false}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn built_in_reads_go_over_protobuf_and_decode_as_json_does() {
    let server = server().await;
    for i in 0..3 {
        server
            .objects()
            .create("configmaps", "default", configmap(&format!("cm-{i}")))
            .unwrap();
    }
    let pb: Api<ConfigMap> = Api::namespaced(client(&server, ContentType::Protobuf), "default");
    let js: Api<ConfigMap> = Api::namespaced(client(&server, ContentType::Json), "default");

    let list = pb.list(&ListParams::default()).await.unwrap();
    let rec = last(&server, Verb::List);
    assert_eq!(
        (rec.accept.as_str(), rec.content_type.as_str()),
        (ACCEPT, PROTOBUF)
    );
    let json_list = js.list(&ListParams::default()).await.unwrap();
    assert_eq!(last(&server, Verb::List).content_type, "application/json");
    assert_eq!(list.items, json_list.items);
    assert_eq!(list.resource_version(), json_list.resource_version());
    assert_eq!(list.kind.as_deref(), Some("ConfigMapList"));

    let streamed: Vec<ConfigMap> = pb
        .list_stream(&ListParams::default().limit(2))
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(last(&server, Verb::List).content_type, PROTOBUF);
    assert_eq!(streamed, json_list.items[..2]);

    let got = pb.get("cm-1").await.unwrap();
    assert_eq!(last(&server, Verb::Get).content_type, PROTOBUF);
    assert_eq!(got, js.get("cm-1").await.unwrap());

    // the compact type from the same bytes
    let compact: Api<CompactConfigMap> =
        Api::namespaced(client(&server, ContentType::Protobuf), "default");
    let c = compact.get("cm-1").await.unwrap();
    assert_eq!(c.data.get("k"), Some("v"));
    assert_eq!(c.binary_data.get("b"), Some("AAEC"));
    assert_eq!(c.metadata.to_object_meta().labels, got.metadata.labels);

    // writes stay JSON
    pb.create(
        &PostParams::default(),
        &serde_json::from_value(configmap("cm-9")).unwrap(),
    )
    .await
    .unwrap();
    let rec = last(&server, Verb::Create);
    assert_eq!(rec.content_type, "application/json");
    assert!(!rec.accept.contains("protobuf"), "{}", rec.accept);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_decode_protobuf_frames_and_error_events() {
    let server = server().await;
    server
        .objects()
        .create("configmaps", "default", configmap("a"))
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client(&server, ContentType::Protobuf), "default");
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .resource_version()
        .unwrap()
        .to_owned();
    let mut events = api
        .watch(&WatchParams::default().timeout(30), &rv)
        .await
        .unwrap();
    assert_eq!(
        last(&server, Verb::Watch).content_type,
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    server
        .objects()
        .create("configmaps", "default", configmap("b"))
        .unwrap();
    server
        .objects()
        .delete("configmaps", "default", "a")
        .unwrap();

    assert!(
        matches!(next(&mut events).await, WatchEvent::Added(cm) if cm.metadata.name.as_deref() == Some("b"))
    );
    // "a" has a finalizer: its deletion is a MODIFIED setting deletionTimestamp
    assert!(matches!(next(&mut events).await, WatchEvent::Modified(cm)
            if cm.metadata.name.as_deref() == Some("a") && cm.metadata.deletion_timestamp.is_some()));

    // a watch from a compacted version: one ERROR event, a 410 Status in protobuf
    server.faults().compact();
    let mut events = api.watch(&WatchParams::default(), "1").await.unwrap();
    match next(&mut events).await {
        WatchEvent::Error(status) => assert!(status.is_expired(), "{status:?}"),
        other => panic!("not an ERROR event: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_list_ends_at_the_annotated_bookmark_in_protobuf() {
    let server = server().await;
    for i in 0..5 {
        server
            .objects()
            .create("configmaps", "default", configmap(&format!("cm-{i}")))
            .unwrap();
    }
    let api: Api<ConfigMap> = Api::namespaced(client(&server, ContentType::Protobuf), "default");
    let params = WatchParams::default().streaming_lists().timeout(30);
    let mut events = api.watch(&params, "").await.unwrap();
    let mut added = 0;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        match event {
            WatchEvent::Added(_) => added += 1,
            WatchEvent::Bookmark(b) if b.is_initial_events_end() => {
                assert!(!b.resource_version().is_empty());
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(added, 5);
    assert_eq!(
        last(&server, Verb::Watch).content_type,
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_answered_in_protobuf_are_the_same_typed_errors() {
    let server = server().await;
    let pb: Api<ConfigMap> = Api::namespaced(client(&server, ContentType::Protobuf), "default");
    let js: Api<ConfigMap> = Api::namespaced(client(&server, ContentType::Json), "default");
    let e = pb.get("missing").await.unwrap_err();
    assert_eq!(
        last(&server, Verb::Get).content_type,
        PROTOBUF,
        "the 404 came in protobuf"
    );
    let j = js.get("missing").await.unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert_eq!(e.to_string(), j.to_string());
    assert_eq!(pb.get_opt("missing").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_answer_to_a_protobuf_request_is_decoded_and_zero_pointers_are_kept() {
    let server = server().await;
    let pb: Api<Deployment> = Api::namespaced(client(&server, ContentType::Protobuf), "default");
    let js: Api<Deployment> = Api::namespaced(client(&server, ContentType::Json), "default");
    for (name, probe) in [("plain", false), ("probed", true)] {
        let d: Deployment = serde_json::from_value(deployment(name, probe)).unwrap();
        js.create(&PostParams::default(), &d).await.unwrap();
    }

    // a Deployment the server encodes in protobuf
    let plain = pb.get("plain").await.unwrap();
    assert_eq!(last(&server, Verb::Get).content_type, PROTOBUF);
    assert_eq!(
        plain,
        js.get("plain").await.unwrap(),
        "protobuf decodes as JSON does"
    );
    let spec = plain.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(0), "a pointer set to zero is kept");
    assert_eq!(
        spec.template
            .spec
            .as_ref()
            .unwrap()
            .automount_service_account_token,
        Some(false)
    );
    assert_eq!(
        spec.min_ready_seconds, None,
        "a Go non-pointer zero is left out, as in JSON"
    );
    assert_eq!(plain.metadata.generation, Some(1));

    // one with a probe: the server answers JSON (it also accepts JSON)
    let probed = pb.get("probed").await.unwrap();
    assert_eq!(last(&server, Verb::Get).content_type, "application/json");
    assert!(probed.spec.unwrap().template.spec.unwrap().containers[0]
        .readiness_probe
        .is_some());
    // the list holding it too
    let list = pb.list(&ListParams::default()).await.unwrap();
    assert_eq!(last(&server, Verb::List).content_type, "application/json");
    assert_eq!(list.items.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_only_reads_ask_partial_object_metadata_in_protobuf() {
    let server = server().await;
    for i in 0..3 {
        server
            .objects()
            .create("configmaps", "default", configmap(&format!("cm-{i}")))
            .unwrap();
    }
    let pb =
        Api::<ConfigMap>::namespaced(client(&server, ContentType::Protobuf), "default").metadata();
    let js = Api::<ConfigMap>::namespaced(client(&server, ContentType::Json), "default").metadata();
    let list = pb.list(&ListParams::default()).await.unwrap();
    let rec = last(&server, Verb::List);
    assert!(
        rec.accept.starts_with(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
        ),
        "{}",
        rec.accept
    );
    assert_eq!(rec.content_type, PROTOBUF);
    assert_eq!(list.kind.as_deref(), Some("PartialObjectMetadataList"));
    let json_list = js.list(&ListParams::default()).await.unwrap();
    assert_eq!(last(&server, Verb::List).content_type, "application/json");
    assert_eq!(list.items, json_list.items);
    let one: PartialObjectMetadata<ConfigMap> = pb.get("cm-2").await.unwrap();
    assert_eq!(last(&server, Verb::Get).content_type, PROTOBUF);
    assert_eq!(one, js.get("cm-2").await.unwrap());

    let mut events = pb
        .watch(&WatchParams::default(), list.resource_version().unwrap())
        .await
        .unwrap();
    server
        .objects()
        .create("configmaps", "default", configmap("new"))
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(30), events.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(event, WatchEvent::Added(m) if m.metadata.name.as_deref() == Some("new")));
    assert_eq!(
        last(&server, Verb::Watch).content_type,
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
}

/// `strip_managed_fields` in the params: protobuf lists and watch events
/// decode without `metadata.managedFields` (skipped unread: nothing strips
/// them after the decoder here), and without it they keep them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripped_managed_fields_are_skipped_by_the_protobuf_decoder() {
    let server = server().await;
    let managed = |name: &str| {
        let mut cm = configmap(name);
        cm["metadata"]["managedFields"] = json!([{"manager": "kubectl", "operation": "Update",
            "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:k": {}}}}]);
        cm
    };
    server
        .objects()
        .create("configmaps", "default", managed("a"))
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client(&server, ContentType::Protobuf), "default");
    let list = |strip: bool| {
        let api = api.clone();
        async move {
            let params = ListParams {
                strip_managed_fields: strip,
                ..ListParams::default()
            };
            let mut stream = api.list_stream(&params).await.unwrap();
            let mut items = Vec::new();
            while let Some(item) = stream.try_next().await.unwrap() {
                items.push(item);
            }
            let rv: String = stream.resource_version().unwrap().to_owned();
            (items, rv)
        }
    };
    let (kept, _) = list(false).await;
    assert_eq!(
        kept[0].metadata.managed_fields.as_ref().map(Vec::len),
        Some(1)
    );
    let (stripped, rv) = list(true).await;
    assert_eq!(last(&server, Verb::List).content_type, PROTOBUF);
    assert_eq!(stripped[0].metadata.managed_fields, None);
    assert_eq!(stripped[0].data, kept[0].data, "nothing else is skipped");

    let params = WatchParams {
        strip_managed_fields: true,
        ..WatchParams::default().timeout(30)
    };
    let mut events = api.watch(&params, &rv).await.unwrap();
    server
        .objects()
        .create("configmaps", "default", managed("b"))
        .unwrap();
    match next(&mut events).await {
        WatchEvent::Added(cm) => {
            assert_eq!(cm.metadata.name.as_deref(), Some("b"));
            assert_eq!(cm.metadata.managed_fields, None);
        }
        other => panic!("not an ADDED event: {other:?}"),
    }
}
