//! The streaming list decoder against its contract: the same list as a
//! whole-body `serde_json` decode whatever the chunking and field order
//! (proptest over random lists and random split points), errors and never
//! panics on malformed bodies (and never accepts a body the whole-body
//! decode rejects), bounded memory (one item at a time), and over real
//! loopback HTTP: items arrive before the body ends, HTTP errors, truncated
//! bodies and the request timeout.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use http::Response;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::list_stream::ListScanner;
use kcontrol_client::{Api, Client, Error, ListParams, ListStream, ObjectList};
use proptest::prelude::*;
use serde_json::{json, Value};
use support::TestServer;
use tokio::sync::mpsc;

fn chunks_of(body: &[u8], splits: &[usize]) -> Vec<Result<Bytes, Error>> {
    let mut points: Vec<usize> = splits.iter().map(|s| s % (body.len() + 1)).collect();
    points.sort_unstable();
    let mut out = Vec::new();
    let mut start = 0;
    for p in points {
        out.push(Ok(Bytes::copy_from_slice(&body[start..p])));
        start = p;
    }
    out.push(Ok(Bytes::copy_from_slice(&body[start..])));
    out
}

fn stream_decode(body: &[u8], splits: &[usize]) -> Result<ObjectList<ConfigMap>, Error> {
    let source = futures::stream::iter(chunks_of(body, splits));
    futures::executor::block_on(
        ListStream::<ConfigMap>::new(source, "list", 1 << 20).collect_list(),
    )
}

/// Strings that stress the scanner: brackets, quotes, escapes, unicode.
fn tricky_string() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9]{0,8}",
        proptest::collection::vec(
            prop_oneof![
                Just("\"".to_owned()),
                Just("\\".to_owned()),
                Just("]".to_owned()),
                Just("}".to_owned()),
                Just("{[".to_owned()),
                Just("\n".to_owned()),
                Just("ü✓".to_owned()),
                Just("\\\"".to_owned()),
                "[a-z ,:]{0,3}",
            ],
            0..6
        )
        .prop_map(|parts| parts.concat()),
    ]
}

fn configmap_json() -> impl Strategy<Value = Value> {
    (
        "[a-z][a-z0-9-]{0,10}",
        1u64..1_000_000,
        proptest::collection::btree_map("[a-z]{1,5}", tricky_string(), 0..4),
    )
        .prop_map(|(name, rv, data)| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv.to_string(),
                    "labels": {"a": "b"}},
                "data": data})
        })
}

/// A list body with its fields in a chosen order, compact or pretty.
fn list_body() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::collection::vec(configmap_json(), 0..6),
        0usize..4,
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(tricky_string()),
    )
        .prop_map(|(items, meta_pos, pretty, extra, token)| {
            let mut fields: Vec<(String, Value)> = vec![
                ("kind".into(), json!("ConfigMapList")),
                ("apiVersion".into(), json!("v1")),
                ("items".into(), Value::Array(items)),
            ];
            if extra {
                fields.push((
                    "extra".into(),
                    json!({"nested": ["]", {"}": null}], "n": -1.5e3}),
                ));
            }
            let mut meta = json!({"resourceVersion": "42", "remainingItemCount": 3});
            if let Some(t) = token {
                meta["continue"] = json!(t);
            }
            fields.insert(meta_pos.min(fields.len()), ("metadata".into(), meta));
            // serialize by hand to keep the chosen field order
            let sep = if pretty { ",\n  " } else { "," };
            let body: Vec<String> = fields
                .iter()
                .map(|(k, v)| {
                    let v = if pretty {
                        serde_json::to_string_pretty(v).unwrap()
                    } else {
                        v.to_string()
                    };
                    format!("{}:{}", json!(k), v)
                })
                .collect();
            format!("{{{}}}", body.join(sep)).into_bytes()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_chunking_and_field_order_decodes_like_a_whole_body_decode(
        body in list_body(),
        splits in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let whole: ObjectList<ConfigMap> = serde_json::from_slice(&body).unwrap();
        let streamed = stream_decode(&body, &splits).unwrap();
        prop_assert_eq!(streamed, whole);
    }

    #[test]
    fn malformed_bodies_error_and_never_pass_what_a_whole_decode_rejects(
        body in list_body(),
        cut in any::<usize>(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 1..4),
        splits in proptest::collection::vec(any::<usize>(), 0..4),
    ) {
        let mut bad = body.clone();
        for (pos, byte, op) in edits {
            let pos = pos % (bad.len() + 1);
            match op {
                0 => bad.insert(pos, byte),
                1 if pos < bad.len() => bad[pos] = byte,
                _ => bad.truncate(pos.max(cut % (body.len() + 1))),
            }
        }
        let whole = serde_json::from_slice::<ObjectList<ConfigMap>>(&bad);
        match stream_decode(&bad, &splits) {
            Ok(list) => prop_assert_eq!(Some(list), whole.ok(), "accepted what serde rejects"),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = stream_decode(&bytes, &[bytes.len() / 2]);
        let mut scanner = ListScanner::new(64);
        scanner.push(Bytes::from(bytes));
        while let Ok(Some(_)) = scanner.next_part() {}
    }
}

#[test]
fn memory_holds_one_item_not_the_list() {
    // 2,000 items of ~1 KiB each, fed 700 bytes at a time: the scanner's
    // gathering buffer never needs more than one item.
    let items: Vec<Value> = (0..2000)
        .map(|i| json!({"metadata": {"name": format!("cm-{i}")}, "data": {"v": "x".repeat(1000)}}))
        .collect();
    let body = json!({"metadata": {"resourceVersion": "1"}, "items": items}).to_string();
    let chunks: Vec<Result<Bytes, Error>> = body
        .as_bytes()
        .chunks(700)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    // an item limit of 1,100 bytes passes: only one item is ever gathered
    let list = futures::executor::block_on(
        ListStream::<ConfigMap>::new(futures::stream::iter(chunks), "list", 1100).collect_list(),
    )
    .unwrap();
    assert_eq!(list.items.len(), 2000);
}

/// A handler whose list body is fed by the test through a channel.
fn gated_list(
    rx: Arc<Mutex<Option<mpsc::Receiver<Bytes>>>>,
) -> impl Fn(&support::Recorded) -> Response<support::Body> + Send + Sync {
    move |_req| {
        let rx = rx.lock().unwrap().take().expect("one request");
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv()
                .await
                .map(|chunk| (Ok::<_, std::io::Error>(Frame::data(chunk)), rx))
        });
        Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .body(BodyExt::boxed(StreamBody::new(stream)))
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_arrive_over_http_before_the_body_ends() {
    let (tx, rx) = mpsc::channel(4);
    let server = TestServer::http(gated_list(Arc::new(Mutex::new(Some(rx))))).await;
    let api: Api<ConfigMap> = Api::namespaced(Client::try_from(server.config()).unwrap(), "ns");
    let first = support::configmap("ns", "a", "1").to_string();
    tx.send(Bytes::from(format!(
        r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"5"}},"items":[{first}"#
    )))
    .await
    .unwrap();
    let mut list = api
        .list_stream(&ListParams::default().limit(2).resource_version("0"))
        .await
        .unwrap();
    // the first item is decoded while the server still holds the rest back
    let a = tokio::time::timeout(Duration::from_secs(10), list.try_next())
        .await
        .expect("the first item arrives before the body ends")
        .unwrap()
        .unwrap();
    assert_eq!(a.metadata.name.as_deref(), Some("a"));
    assert_eq!(list.resource_version(), Some("5"));
    let second = support::configmap("ns", "b", "2").to_string();
    tx.send(Bytes::from(format!(",{second}]}}"))).await.unwrap();
    drop(tx);
    let b = list.try_next().await.unwrap().unwrap();
    assert_eq!(b.metadata.name.as_deref(), Some("b"));
    assert!(list.try_next().await.unwrap().is_none());
    assert!(list.is_complete());
    let req = server.last();
    assert_eq!(req.path(), "/api/v1/namespaces/ns/configmaps");
    assert_eq!(req.param("limit").as_deref(), Some("2"));
    assert_eq!(req.param("resourceVersion").as_deref(), Some("0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_cut_short_is_an_error_not_a_short_list() {
    let (tx, rx) = mpsc::channel(4);
    let server = TestServer::http(gated_list(Arc::new(Mutex::new(Some(rx))))).await;
    let api: Api<ConfigMap> = Api::all(Client::try_from(server.config()).unwrap());
    let first = support::configmap("ns", "a", "1").to_string();
    tx.send(Bytes::from(format!(
        r#"{{"metadata":{{}},"items":[{first},"#
    )))
    .await
    .unwrap();
    drop(tx); // the body ends mid-list
    let mut list = api.list_stream(&ListParams::default()).await.unwrap();
    assert!(list.try_next().await.unwrap().is_some());
    let err = list.try_next().await.unwrap_err();
    assert!(
        err.to_string().contains("before the list was complete"),
        "{err}"
    );
    assert!(!list.is_complete());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_errors_are_the_error_of_the_call() {
    let server = TestServer::http(|_| {
        support::status(410, "Expired", "The provided continue parameter is too old")
    })
    .await;
    let api: Api<ConfigMap> = Api::all(Client::try_from(server.config()).unwrap());
    let err = api
        .list_stream(&ListParams::default().continue_token("tok"))
        .await
        .unwrap_err();
    assert!(err.is_expired(), "{err}");
    assert_eq!(server.last().param("continue").as_deref(), Some("tok"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_timeout_covers_the_whole_body() {
    let (tx, rx) = mpsc::channel(4);
    let server = TestServer::http(gated_list(Arc::new(Mutex::new(Some(rx))))).await;
    let config = server
        .config()
        .with_request_timeout(Some(Duration::from_millis(300)));
    let api: Api<ConfigMap> = Api::all(Client::try_from(config).unwrap());
    tx.send(Bytes::from_static(br#"{"items":["#)).await.unwrap();
    let mut list = api.list_stream(&ListParams::default()).await.unwrap();
    // the server never finishes the body (tx is kept alive)
    let err = list.try_next().await.unwrap_err();
    assert!(matches!(err, Error::Timeout(_)), "{err}");
    drop(tx);
}
