//! kube-apiserver's protobuf encoding over HTTP, with a raw client and the
//! k8s-pb messages: create, get, list, watch, scale, delete and errors of
//! built-in kinds; custom resources, Tables and unsupported fields.

use crate::client::{Client, Resp, WAIT};
use crate::{foo, foo_crd, server};
use k8s_pb::api::{apps::v1 as apps, autoscaling::v1 as autoscaling, core::v1 as core};
use k8s_pb::apimachinery::pkg::apis::meta::v1 as metav1;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use kcontrol_testserver::eventually;
use prost::Message;
use serde_json::json;

const PB: &str = "application/vnd.kubernetes.protobuf";
/// What kubectl's typed clients send.
const PB_OR_JSON: &str = "application/vnd.kubernetes.protobuf,application/json";

fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let mut out = b"k8s\0".to_vec();
    Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    }
    .encode(&mut out)
    .unwrap();
    out
}

/// The envelope's kind and the message inside.
fn open<T: Message + Default>(body: &[u8]) -> (String, T) {
    assert_eq!(&body[..4], b"k8s\0", "not an enveloped protobuf body");
    let u = Unknown::decode(&body[4..]).unwrap();
    let kind = u.type_meta.unwrap().kind.unwrap();
    (kind, T::decode(u.raw.unwrap().as_slice()).unwrap())
}

fn s(x: &str) -> Option<String> {
    Some(x.to_owned())
}

/// A Deployment as kubectl create deployment builds it.
fn deployment(name: &str, replicas: i32) -> apps::Deployment {
    let labels: std::collections::BTreeMap<String, String> =
        [("app".to_owned(), name.to_owned())].into();
    apps::Deployment {
        metadata: Some(metav1::ObjectMeta {
            name: s(name),
            labels: labels.clone(),
            ..Default::default()
        }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(replicas),
            selector: Some(metav1::LabelSelector {
                match_labels: labels.clone(),
                ..Default::default()
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(metav1::ObjectMeta {
                    labels,
                    ..Default::default()
                }),
                spec: Some(core::PodSpec {
                    containers: vec![core::Container {
                        name: s("nginx"),
                        image: s("nginx"),
                        resources: Some(Default::default()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            strategy: Some(Default::default()),
            ..Default::default()
        }),
        status: Some(Default::default()),
    }
}

async fn send_pb(c: &Client, method: &str, path: &str, accept: &str, body: Vec<u8>) -> Resp {
    c.send_raw(method, path, Some(PB), Some(accept), Some(body))
        .await
}

fn content_type(r: &Resp) -> String {
    r.header("content-type").unwrap_or_default()
}

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

#[tokio::test]
async fn protobuf_create_get_list_and_delete() {
    let srv = server().await;
    let c = Client::new(&srv);
    let body = envelope(
        "apps/v1",
        "Deployment",
        deployment("web", 2).encode_to_vec(),
    );
    let r = send_pb(&c, "POST", DEPLOYMENTS, PB_OR_JSON, body).await;
    assert_eq!(r.status, 201, "{:?}", String::from_utf8_lossy(&r.body));
    assert_eq!(content_type(&r), PB);
    let (kind, created): (_, apps::Deployment) = open(&r.body);
    assert_eq!(kind, "Deployment");
    let meta = created.metadata.clone().unwrap();
    assert_eq!(meta.name.as_deref(), Some("web"));
    assert!(meta.uid.is_some_and(|u| !u.is_empty()));
    assert!(meta.resource_version.is_some_and(|v| !v.is_empty()));
    // stored as kube-apiserver's JSON, defaulted
    let stored = srv
        .objects()
        .get("deployments.apps", "default", "web")
        .unwrap();
    let v = stored.value();
    assert_eq!(v["kind"], "Deployment");
    assert_eq!(v["apiVersion"], "apps/v1");
    assert_eq!(v["spec"]["replicas"], 2);
    assert_eq!(
        v["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx"
    );
    assert_eq!(v["spec"]["strategy"]["type"], "RollingUpdate");
    assert!(v["spec"].get("minReadySeconds").is_none());

    // get
    let r = c.get_as(&format!("{DEPLOYMENTS}/web"), PB_OR_JSON).await;
    assert_eq!((r.status, content_type(&r)), (200, PB.to_owned()));
    let (_, got): (_, apps::Deployment) = open(&r.body);
    assert_eq!(got.spec.as_ref().and_then(|s| s.replicas), Some(2));
    assert_eq!(
        got.spec
            .as_ref()
            .and_then(|s| s.strategy.as_ref())
            .and_then(|s| s.r#type.as_deref()),
        Some("RollingUpdate")
    );

    // list: XxxList with ListMeta
    let cm = envelope(
        "v1",
        "ConfigMap",
        core::ConfigMap {
            metadata: Some(metav1::ObjectMeta {
                name: s("c1"),
                ..Default::default()
            }),
            data: [("k".to_owned(), "v".to_owned())].into(),
            binary_data: [("b".to_owned(), vec![0, 255])].into(),
            ..Default::default()
        }
        .encode_to_vec(),
    );
    let r = send_pb(&c, "POST", "/api/v1/namespaces/default/configmaps", PB, cm).await;
    assert_eq!(r.status, 201);
    let stored = srv.objects().get("configmaps", "default", "c1").unwrap();
    assert_eq!(stored.value()["binaryData"]["b"], "AP8=");
    let r = c.get_as("/api/v1/namespaces/default/configmaps", PB).await;
    assert_eq!(r.status, 200);
    let (kind, list): (_, core::ConfigMapList) = open(&r.body);
    assert_eq!(kind, "ConfigMapList");
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].binary_data.get("b"), Some(&vec![0, 255]));
    let rv: u64 = list
        .metadata
        .and_then(|m| m.resource_version)
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv > 0);

    // secrets: data is bytes
    let secret = envelope(
        "v1",
        "Secret",
        core::Secret {
            metadata: Some(metav1::ObjectMeta {
                name: s("s1"),
                ..Default::default()
            }),
            data: [("p".to_owned(), b"hunter2".to_vec())].into(),
            ..Default::default()
        }
        .encode_to_vec(),
    );
    let r = send_pb(&c, "POST", "/api/v1/namespaces/default/secrets", PB, secret).await;
    assert_eq!(r.status, 201);
    let (_, s1): (_, core::Secret) = open(&r.body);
    assert_eq!(s1.data.get("p").map(Vec::as_slice), Some(&b"hunter2"[..]));
    assert_eq!(s1.r#type.as_deref(), Some("Opaque"));

    // delete with protobuf DeleteOptions: the Status comes back in protobuf
    let opts = envelope(
        "v1",
        "DeleteOptions",
        metav1::DeleteOptions {
            preconditions: Some(metav1::Preconditions {
                uid: s("not-the-uid"),
                resource_version: None,
            }),
            ..Default::default()
        }
        .encode_to_vec(),
    );
    let r = send_pb(
        &c,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/c1",
        PB,
        opts,
    )
    .await;
    assert_eq!((r.status, content_type(&r)), (409, PB.to_owned()));
    let (kind, status): (_, metav1::Status) = open(&r.body);
    assert_eq!(kind, "Status");
    assert_eq!(status.code, Some(409));
    assert_eq!(status.reason.as_deref(), Some("Conflict"));
    let r = c
        .send_raw(
            "DELETE",
            "/api/v1/namespaces/default/configmaps/c1",
            None,
            Some(PB),
            None,
        )
        .await;
    assert_eq!(r.status, 200);
    let (kind, status): (_, metav1::Status) = open(&r.body);
    assert_eq!(kind, "Status");
    assert_eq!(status.status.as_deref(), Some("Success"));
}

#[tokio::test]
async fn protobuf_errors_are_status_messages() {
    let srv = server().await;
    let c = Client::new(&srv);
    let r = c.get_as(&format!("{DEPLOYMENTS}/nope"), PB_OR_JSON).await;
    assert_eq!((r.status, content_type(&r)), (404, PB.to_owned()));
    let (kind, status): (_, metav1::Status) = open(&r.body);
    assert_eq!(kind, "Status");
    assert_eq!(status.code, Some(404));
    assert_eq!(status.reason.as_deref(), Some("NotFound"));
    assert_eq!(
        status.message.as_deref(),
        Some("deployments.apps \"nope\" not found")
    );
    // a second create: AlreadyExists
    let body = envelope(
        "apps/v1",
        "Deployment",
        deployment("web", 1).encode_to_vec(),
    );
    assert_eq!(
        send_pb(&c, "POST", DEPLOYMENTS, PB, body.clone())
            .await
            .status,
        201
    );
    let r = send_pb(&c, "POST", DEPLOYMENTS, PB, body).await;
    assert_eq!(r.status, 409);
    let (_, status): (_, metav1::Status) = open(&r.body);
    assert_eq!(status.reason.as_deref(), Some("AlreadyExists"));
}

#[tokio::test]
async fn unsupported_fields_and_malformed_bodies_are_refused_by_name() {
    let srv = server().await;
    let c = Client::new(&srv);
    // a field the server does not map: 415 naming it, nothing stored
    let mut d = deployment("web", 1);
    let pod = d
        .spec
        .as_mut()
        .and_then(|s| s.template.as_mut())
        .and_then(|t| t.spec.as_mut())
        .unwrap();
    pod.containers[0].liveness_probe = Some(Default::default());
    let body = envelope("apps/v1", "Deployment", d.encode_to_vec());
    let r = send_pb(&c, "POST", DEPLOYMENTS, "application/json", body).await;
    assert_eq!(r.status, 415, "{:?}", String::from_utf8_lossy(&r.body));
    let msg = r.json()["message"].as_str().unwrap_or_default().to_owned();
    assert!(
        msg.contains("spec.template.spec.containers[0].livenessProbe"),
        "{msg}"
    );
    assert!(srv
        .objects()
        .get("deployments.apps", "default", "web")
        .is_none());
    // not protobuf at all: 400
    let r = send_pb(&c, "POST", DEPLOYMENTS, "application/json", b"{}".to_vec()).await;
    assert_eq!(r.status, 400);
    assert!(r.json()["message"]
        .as_str()
        .unwrap_or_default()
        .contains("k8s\\0"));
    // a truncated message: 400
    let mut body = envelope(
        "apps/v1",
        "Deployment",
        deployment("web", 1).encode_to_vec(),
    );
    body.truncate(body.len() - 3);
    let r = send_pb(&c, "POST", DEPLOYMENTS, "application/json", body).await;
    assert_eq!(r.status, 400);

    // an object stored through JSON with a field protobuf cannot carry:
    // JSON when the client also accepts it, else 406 naming the field
    let v = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "probed"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
            "metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i"}], "affinity": {}}}}});
    assert_eq!(c.post(DEPLOYMENTS, &v).await.status, 201);
    let r = c.get_as(&format!("{DEPLOYMENTS}/probed"), PB_OR_JSON).await;
    assert_eq!(
        (r.status, content_type(&r)),
        (200, "application/json".to_owned())
    );
    assert_eq!(r.json()["metadata"]["name"], "probed");
    let r = c.get_as(&format!("{DEPLOYMENTS}/probed"), PB).await;
    assert_eq!(r.status, 406);
    let (_, status): (_, metav1::Status) = open(&r.body);
    assert!(status
        .message
        .unwrap_or_default()
        .contains("spec.template.spec.affinity"));
    // the list falls back to JSON as a whole
    let r = c.get_as(DEPLOYMENTS, PB_OR_JSON).await;
    assert_eq!(
        (r.status, content_type(&r)),
        (200, "application/json".to_owned())
    );
    assert_eq!(r.json()["items"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn custom_resources_and_tables_stay_json_metadata_lists_are_protobuf() {
    let srv = server().await;
    let c = Client::new(&srv);
    assert_eq!(
        c.post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &foo_crd()
        )
        .await
        .status,
        201
    );
    let foos = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos";
    eventually("the CRD's resource to accept a Foo", async || {
        c.post(foos, &foo("f1", 1)).await.status == 201
    })
    .await;
    // protobuf only: 406; with JSON listed: JSON
    assert_eq!(c.get_as(foos, PB).await.status, 406);
    let r = c.get_as(foos, PB_OR_JSON).await;
    assert_eq!(
        (r.status, content_type(&r)),
        (200, "application/json".to_owned())
    );
    // a protobuf body for a custom resource: 415
    let r = send_pb(
        &c,
        "POST",
        foos,
        "application/json",
        envelope("samplecontroller.k8s.io/v1alpha1", "Foo", Vec::new()),
    )
    .await;
    assert_eq!(r.status, 415);
    // Tables are JSON even for built-in kinds (kube-apiserver has no
    // protobuf Table)
    let body = envelope(
        "apps/v1",
        "Deployment",
        deployment("web", 1).encode_to_vec(),
    );
    assert_eq!(send_pb(&c, "POST", DEPLOYMENTS, PB, body).await.status, 201);
    let r = c
        .get_as(
            DEPLOYMENTS,
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io",
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["kind"], "Table");
    let r = c
        .get_as(
            DEPLOYMENTS,
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        )
        .await;
    // PartialObjectMetadataList asked protobuf first (client-go's metadata
    // client) is protobuf, as kube-apiserver answers it
    assert_eq!((r.status, content_type(&r)), (200, PB.to_owned()));
    let (kind, list): (_, metav1::PartialObjectMetadataList) = open(&r.body);
    assert_eq!(kind, "PartialObjectMetadataList");
    let names: Vec<_> = list
        .items
        .iter()
        .filter_map(|m| m.metadata.as_ref()?.name.clone())
        .collect();
    assert_eq!(names, ["web"]);
}

#[tokio::test]
async fn scale_subresource_speaks_protobuf() {
    let srv = server().await;
    let c = Client::new(&srv);
    let body = envelope(
        "apps/v1",
        "Deployment",
        deployment("web", 1).encode_to_vec(),
    );
    assert_eq!(send_pb(&c, "POST", DEPLOYMENTS, PB, body).await.status, 201);
    let path = format!("{DEPLOYMENTS}/web/scale");
    let r = c.get_as(&path, PB_OR_JSON).await;
    assert_eq!((r.status, content_type(&r)), (200, PB.to_owned()));
    let (kind, mut scale): (_, autoscaling::Scale) = open(&r.body);
    assert_eq!(kind, "Scale");
    assert_eq!(scale.spec.as_ref().and_then(|s| s.replicas), Some(1));
    scale.spec = Some(autoscaling::ScaleSpec { replicas: Some(4) });
    let body = envelope("autoscaling/v1", "Scale", scale.encode_to_vec());
    let r = send_pb(&c, "PUT", &path, PB, body).await;
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    let (_, scaled): (_, autoscaling::Scale) = open(&r.body);
    assert_eq!(scaled.spec.and_then(|s| s.replicas), Some(4));
    let stored = srv
        .objects()
        .get("deployments.apps", "default", "web")
        .unwrap();
    assert_eq!(stored.value()["spec"]["replicas"], 4);
}

#[tokio::test]
async fn protobuf_watch_frames_carry_enveloped_objects() {
    let srv = server().await;
    let c = Client::new(&srv);
    let body = envelope(
        "apps/v1",
        "Deployment",
        deployment("web", 1).encode_to_vec(),
    );
    assert_eq!(send_pb(&c, "POST", DEPLOYMENTS, PB, body).await.status, 201);
    let mut w = c
        .stream_as(
            &format!("{DEPLOYMENTS}?watch=true&allowWatchBookmarks=true"),
            PB_OR_JSON,
        )
        .await;
    assert_eq!(w.status, 200);
    async fn next(w: &mut crate::client::Stream) -> metav1::WatchEvent {
        let len = w.next_bytes(4, WAIT).await.expect("a frame length");
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let frame = w.next_bytes(len, WAIT).await.expect("a whole frame");
        metav1::WatchEvent::decode(frame.as_slice()).expect("a WatchEvent")
    }
    let ev = next(&mut w).await;
    assert_eq!(ev.r#type.as_deref(), Some("ADDED"));
    let (kind, d): (_, apps::Deployment) = open(&ev.object.unwrap().raw.unwrap());
    assert_eq!(kind, "Deployment");
    assert_eq!(d.metadata.unwrap().name.as_deref(), Some("web"));
    // a change made through JSON arrives as a protobuf MODIFIED
    let r = c
        .patch(
            &format!("{DEPLOYMENTS}/web"),
            "application/merge-patch+json",
            r#"{"spec":{"replicas":5}}"#,
        )
        .await;
    assert_eq!(r.status, 200);
    loop {
        let ev = next(&mut w).await;
        let (_, d): (_, apps::Deployment) = open(&ev.object.unwrap().raw.unwrap());
        if ev.r#type.as_deref() == Some("MODIFIED") && d.spec.and_then(|s| s.replicas) == Some(5) {
            break;
        }
    }
    // an object protobuf cannot carry (stored through JSON): an ERROR
    // event naming the field
    let probed = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "probed"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
            "metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i"}], "affinity": {}}}}});
    assert_eq!(c.post(DEPLOYMENTS, &probed).await.status, 201);
    loop {
        let ev = next(&mut w).await;
        if ev.r#type.as_deref() == Some("ERROR") {
            let (_, status): (_, metav1::Status) = open(&ev.object.unwrap().raw.unwrap());
            assert_eq!(status.code, Some(500));
            assert!(status
                .message
                .unwrap_or_default()
                .contains("spec.template.spec.affinity"));
            break;
        }
    }
    // a delete
    assert_eq!(
        c.delete(&format!("{DEPLOYMENTS}/web"), None).await.status,
        200
    );
    loop {
        let ev = next(&mut w).await;
        if ev.r#type.as_deref() == Some("DELETED") {
            break;
        }
    }
    // a watch whose version is gone: one ERROR event with a 410 Status
    srv.faults().expire_next_watches(1);
    let mut w = c
        .stream_as(&format!("{DEPLOYMENTS}?watch=true&resourceVersion=1"), PB)
        .await;
    let ev = next(&mut w).await;
    assert_eq!(ev.r#type.as_deref(), Some("ERROR"));
    let (kind, status): (_, metav1::Status) = open(&ev.object.unwrap().raw.unwrap());
    assert_eq!(kind, "Status");
    assert_eq!(status.code, Some(410));
    assert_eq!(status.reason.as_deref(), Some("Expired"));
}
