//! Every request kind of `Api<K>` against loopback servers over HTTP and
//! HTTPS (HTTP/2 by ALPN): the path, query, method, headers and body the
//! server receives, and how the answer decodes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use futures::TryStreamExt;
use http::Method;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kcontrol_client::{
    Api, Client, DeleteParams, DeleteResponse, ListParams, Patch, PatchParams, PostParams,
    Preconditions, ResourceVersionMatch, WatchEvent, WatchParams,
};
use kcontrol_indexer::{ApiResource, DynamicObject};
use serde_json::json;
use support::{configmap, json, Pki, Recorded, TestServer};

/// A fake API: answers by method and path the way kube-apiserver would.
fn fake_api(req: &Recorded) -> http::Response<support::Body> {
    let path = req.path();
    match (&req.method, path) {
        (&Method::GET, "/api/v1/namespaces/ns1/configmaps") if req.param("watch").is_none() => {
            json(
                200,
                json!({
                    "kind": "ConfigMapList", "apiVersion": "v1",
                    "metadata": {"resourceVersion": "100", "continue": "next-page", "remainingItemCount": 7},
                    "items": [configmap("ns1", "a", "10"), configmap("ns1", "b", "11")]
                }),
            )
        }
        (&Method::GET, "/api/v1/namespaces/ns1/configmaps/a") => {
            json(200, configmap("ns1", "a", "10"))
        }
        (&Method::GET, "/api/v1/namespaces/ns1/configmaps/a/status") => {
            json(200, configmap("ns1", "a", "10"))
        }
        (&Method::GET, "/api/v1/namespaces/ns1/configmaps/missing") => {
            support::status(404, "NotFound", "configmaps \"missing\" not found")
        }
        (&Method::POST, "/api/v1/namespaces/ns1/configmaps") => {
            let mut obj = req.json();
            obj["metadata"]["resourceVersion"] = json!("12");
            json(201, obj)
        }
        (&Method::PUT, p) if p.starts_with("/api/v1/namespaces/ns1/configmaps/") => {
            let mut obj = req.json();
            obj["metadata"]["resourceVersion"] = json!("13");
            json(200, obj)
        }
        (&Method::PATCH, p) if p.starts_with("/api/v1/namespaces/ns1/configmaps/a") => {
            json(200, configmap("ns1", "a", "14"))
        }
        (&Method::DELETE, "/api/v1/namespaces/ns1/configmaps/a") => json(
            200,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                   "details": {"name": "a", "kind": "configmaps", "uid": "uid-a"}}),
        ),
        (&Method::DELETE, "/api/v1/namespaces/ns1/configmaps/b") => {
            let mut obj = configmap("ns1", "b", "15");
            obj["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
            obj["metadata"]["finalizers"] = json!(["keep"]);
            json(200, obj)
        }
        (&Method::GET, "/api/v1/namespaces") => json(
            200,
            json!({"kind": "NamespaceList", "apiVersion": "v1", "metadata": {"resourceVersion": "5"},
                   "items": [{"metadata": {"name": "default"}}]}),
        ),
        (&Method::GET, "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns1/foos/f") => json(
            200,
            json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
                   "metadata": {"name": "f", "namespace": "ns1", "resourceVersion": "3"},
                   "spec": {"deploymentName": "f", "replicas": 2}}),
        ),
        _ => support::status(
            404,
            "NotFound",
            &format!("no route for {} {}", req.method, req.uri),
        ),
    }
}

async fn exercise_every_request_kind(server: &TestServer, client: Client) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "ns1");

    // list, with every parameter
    let lp = ListParams::default()
        .labels("app=web,tier!=db")
        .fields("metadata.name!=x")
        .limit(2)
        .continue_token("tok")
        .resource_version("0")
        .resource_version_match(ResourceVersionMatch::NotOlderThan)
        .timeout(30);
    let list = api.list(&lp).await.unwrap();
    assert_eq!(list.items.len(), 2);
    assert_eq!(list.resource_version(), Some("100"));
    assert_eq!(list.continue_token(), Some("next-page"));
    assert_eq!(list.remaining_item_count(), Some(7));
    let req = server.last();
    assert_eq!(req.method, Method::GET);
    assert_eq!(
        req.param("labelSelector").as_deref(),
        Some("app=web,tier!=db")
    );
    assert_eq!(
        req.param("fieldSelector").as_deref(),
        Some("metadata.name!=x")
    );
    assert_eq!(req.param("limit").as_deref(), Some("2"));
    assert_eq!(req.param("continue").as_deref(), Some("tok"));
    assert_eq!(req.param("resourceVersion").as_deref(), Some("0"));
    assert_eq!(
        req.param("resourceVersionMatch").as_deref(),
        Some("NotOlderThan")
    );
    assert_eq!(req.param("timeoutSeconds").as_deref(), Some("30"));
    assert!(req
        .header("user-agent")
        .unwrap()
        .starts_with("kcontrol-client/"));
    // a built-in kind asks protobuf first (client-go's header); this server
    // answers JSON, which is decoded by its Content-Type
    assert_eq!(
        req.header("accept").as_deref(),
        Some("application/vnd.kubernetes.protobuf,application/json")
    );

    // get, get_opt, get_status
    let a = api.get("a").await.unwrap();
    assert_eq!(a.metadata.resource_version.as_deref(), Some("10"));
    assert!(api.get_opt("missing").await.unwrap().is_none());
    assert!(api.get_opt("a").await.unwrap().is_some());
    let err = api.get("missing").await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
    api.get_status("a").await.unwrap();
    assert_eq!(
        server.last().path(),
        "/api/v1/namespaces/ns1/configmaps/a/status"
    );

    // create
    let mut new = ConfigMap::default();
    new.metadata.name = Some("c".into());
    let pp = PostParams {
        dry_run: true,
        field_manager: Some("tester".into()),
    };
    let created = api.create(&pp, &new).await.unwrap();
    assert_eq!(created.metadata.resource_version.as_deref(), Some("12"));
    let req = server.last();
    assert_eq!(req.method, Method::POST);
    assert_eq!(
        req.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(req.param("dryRun").as_deref(), Some("All"));
    assert_eq!(req.param("fieldManager").as_deref(), Some("tester"));
    assert_eq!(req.json()["metadata"]["name"], "c");
    assert_eq!(req.json()["kind"], "ConfigMap");

    // replace and replace_status
    let replaced = api.replace("a", &PostParams::default(), &a).await.unwrap();
    assert_eq!(replaced.metadata.resource_version.as_deref(), Some("13"));
    assert_eq!(server.last().method, Method::PUT);
    assert_eq!(server.last().path(), "/api/v1/namespaces/ns1/configmaps/a");
    api.replace_status("a", &PostParams::default(), &a)
        .await
        .unwrap();
    assert_eq!(
        server.last().path(),
        "/api/v1/namespaces/ns1/configmaps/a/status"
    );

    // patch: every type
    let body = json!({"data": {"k": "w"}});
    for (patch, params, content_type) in [
        (
            Patch::Merge(body.clone()),
            PatchParams::default(),
            "application/merge-patch+json",
        ),
        (
            Patch::Strategic(body.clone()),
            PatchParams::default(),
            "application/strategic-merge-patch+json",
        ),
        (
            Patch::Json(json!([{"op": "replace", "path": "/data/k", "value": "w"}])),
            PatchParams::default(),
            "application/json-patch+json",
        ),
        (
            Patch::Apply(body.clone()),
            PatchParams::apply("kcontrol").force(),
            "application/apply-patch+yaml",
        ),
    ] {
        let patched = api.patch("a", &params, &patch).await.unwrap();
        assert_eq!(patched.metadata.resource_version.as_deref(), Some("14"));
        let req = server.last();
        assert_eq!(req.method, Method::PATCH);
        assert_eq!(req.header("content-type").as_deref(), Some(content_type));
        assert_eq!(
            req.body,
            serde_json::to_vec(match &patch {
                Patch::Apply(p) | Patch::Json(p) | Patch::Merge(p) | Patch::Strategic(p) => p,
            })
            .unwrap()
        );
    }
    let req = server.last();
    assert_eq!(req.param("fieldManager").as_deref(), Some("kcontrol"));
    assert_eq!(req.param("force").as_deref(), Some("true"));
    api.patch_status(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {}})),
    )
    .await
    .unwrap();
    assert_eq!(
        server.last().path(),
        "/api/v1/namespaces/ns1/configmaps/a/status"
    );

    // delete: a Status when gone, the object while finalizers hold it
    let dp = DeleteParams::background()
        .grace_period(0)
        .preconditions(Preconditions {
            uid: Some("uid-a".into()),
            resource_version: Some("10".into()),
        });
    match api.delete("a", &dp).await.unwrap() {
        DeleteResponse::Deleted(status) => assert_eq!(status.status.as_deref(), Some("Success")),
        other => panic!("expected a Status, got {other:?}"),
    }
    let body = server.last().json();
    assert_eq!(body["kind"], "DeleteOptions");
    assert_eq!(body["propagationPolicy"], "Background");
    assert_eq!(body["gracePeriodSeconds"], 0);
    assert_eq!(
        body["preconditions"],
        json!({"uid": "uid-a", "resourceVersion": "10"})
    );
    match api.delete("b", &DeleteParams::default()).await.unwrap() {
        DeleteResponse::Pending(cm) => assert!(cm.metadata.deletion_timestamp.is_some()),
        other => panic!("expected the object, got {other:?}"),
    }

    // cluster-scoped
    let namespaces: Api<Namespace> = Api::all(client.clone());
    assert_eq!(
        namespaces
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    assert_eq!(server.last().path(), "/api/v1/namespaces");

    // dynamic objects
    let foos = ApiResource::new("samplecontroller.k8s.io", "v1alpha1", "Foo", "foos", true);
    let dynamic: Api<DynamicObject> = Api::namespaced_with(client, "ns1", &foos);
    let sample = dynamic.get("f").await.unwrap();
    assert_eq!(sample.data["spec"]["replicas"], 2);
}

#[tokio::test]
async fn every_request_kind_over_http() {
    let server = TestServer::http(fake_api).await;
    let client = Client::try_from(server.config()).unwrap();
    exercise_every_request_kind(&server, client).await;
    assert!(server
        .requests()
        .iter()
        .all(|r| r.version == http::Version::HTTP_11));
}

#[tokio::test]
async fn every_request_kind_over_https_with_http2() {
    let pki = Pki::new();
    let server = TestServer::https(pki.server_config(false), fake_api).await;
    let mut config = server.config();
    config.tls.root_certs = vec![pki.ca_der.clone()];
    let client = Client::try_from(config).unwrap();
    exercise_every_request_kind(&server, client).await;
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.version == http::Version::HTTP_2),
        "ALPN should pick h2"
    );
}

#[tokio::test]
async fn api_all_needs_a_namespace_for_named_calls() {
    let server = TestServer::http(fake_api).await;
    let client = Client::try_from(server.config()).unwrap();
    let all: Api<ConfigMap> = Api::all(client.clone());
    assert!(matches!(
        all.get("a").await,
        Err(kcontrol_client::Error::InvalidRequest(_))
    ));
    // create through Api::all uses the object's namespace
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("x".into());
    cm.metadata.namespace = Some("ns1".into());
    all.create(&PostParams::default(), &cm).await.unwrap();
    assert_eq!(server.last().path(), "/api/v1/namespaces/ns1/configmaps");
    // default_namespaced uses the config's namespace
    let client = Client::try_from(server.config().with_default_namespace("ns1")).unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    api.get("a").await.unwrap();
    assert_eq!(server.last().path(), "/api/v1/namespaces/ns1/configmaps/a");
}

#[tokio::test]
async fn server_url_path_prefix_is_kept() {
    let server = TestServer::http(|req| {
        if req.path() == "/k8s/clusters/c1/api/v1/namespaces/ns1/configmaps/a" {
            json(200, configmap("ns1", "a", "1"))
        } else {
            support::status(404, "NotFound", "wrong path")
        }
    })
    .await;
    let config = kcontrol_client::Config::new(
        format!("{}/k8s/clusters/c1/", server.url())
            .parse()
            .unwrap(),
    );
    let api: Api<ConfigMap> = Api::namespaced(Client::try_from(config).unwrap(), "ns1");
    api.get("a").await.unwrap();
}

fn watch_body() -> Vec<u8> {
    let events = [
        json!({"type": "ADDED", "object": configmap("ns1", "a", "101")}),
        json!({"type": "MODIFIED", "object": configmap("ns1", "a", "102")}),
        json!({"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"resourceVersion": "103", "annotations": {"k8s.io/initial-events-end": "true"}}}}),
        json!({"type": "DELETED", "object": configmap("ns1", "a", "104")}),
        json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": "too old resource version: 50 (100)", "reason": "Expired", "code": 410}}),
    ];
    let mut body = Vec::new();
    for e in events {
        body.extend_from_slice(e.to_string().as_bytes());
        body.push(b'\n');
    }
    body
}

#[tokio::test]
async fn watch_streams_events_split_across_chunks() {
    let body = watch_body();
    let server = TestServer::http(move |req| {
        assert_eq!(req.param("watch").as_deref(), Some("true"));
        // odd-sized chunks so that frames straddle chunk boundaries
        let chunks = body.chunks(37).map(bytes::Bytes::copy_from_slice).collect();
        support::chunked(chunks, Duration::from_millis(1))
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(Client::try_from(server.config()).unwrap(), "ns1");
    let wp = WatchParams::default()
        .labels("app=web")
        .timeout(290)
        .streaming_lists();
    let events: Vec<_> = api
        .watch(&wp, "")
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let req = server.last();
    assert_eq!(req.param("resourceVersion"), None);
    assert_eq!(req.param("allowWatchBookmarks").as_deref(), Some("true"));
    assert_eq!(req.param("sendInitialEvents").as_deref(), Some("true"));
    assert_eq!(
        req.param("resourceVersionMatch").as_deref(),
        Some("NotOlderThan")
    );
    assert_eq!(req.param("timeoutSeconds").as_deref(), Some("290"));
    assert_eq!(req.param("labelSelector").as_deref(), Some("app=web"));
    assert_eq!(events.len(), 5);
    assert!(
        matches!(&events[0], WatchEvent::Added(cm) if cm.metadata.resource_version.as_deref() == Some("101"))
    );
    assert!(matches!(&events[1], WatchEvent::Modified(_)));
    let WatchEvent::Bookmark(bookmark) = &events[2] else {
        panic!("{:?}", events[2])
    };
    assert_eq!(bookmark.resource_version(), "103");
    assert!(bookmark.is_initial_events_end());
    assert!(matches!(&events[3], WatchEvent::Deleted(_)));
    let WatchEvent::Error(status) = &events[4] else {
        panic!("{:?}", events[4])
    };
    assert!(status.is_expired() && status.is_gone());
    let as_error: kcontrol_client::Error = status.clone().into();
    assert!(as_error.is_expired());
}

#[tokio::test]
async fn watch_with_a_corrupt_frame_yields_one_error_then_ends() {
    let server = TestServer::http(|_| {
        let good = json!({"type": "ADDED", "object": configmap("ns1", "a", "1")}).to_string();
        let body = format!("{good}\n{{\"type\":\"ADDED\",\"object\":{{\"metadata\":\n{good}\n");
        support::bytes(200, body)
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(Client::try_from(server.config()).unwrap(), "ns1");
    let items: Vec<_> =
        futures::StreamExt::collect(api.watch(&WatchParams::default(), "1").await.unwrap()).await;
    assert_eq!(
        items.len(),
        2,
        "one event, one error, then the end: {items:?}"
    );
    assert!(items[0].is_ok());
    assert!(matches!(
        items[1],
        Err(kcontrol_client::Error::Decode { .. })
    ));
}

#[tokio::test]
async fn watch_frames_over_the_limit_fail() {
    let server = TestServer::http(|_| {
        let big = json!({"type": "ADDED", "object": {"metadata": {"name": "x"}, "data": {"k": "v".repeat(4096)}}});
        support::bytes(200, format!("{big}\n"))
    })
    .await;
    let config = server.config().with_max_watch_frame_size(1024);
    let api: Api<ConfigMap> = Api::namespaced(Client::try_from(config).unwrap(), "ns1");
    let items: Vec<_> =
        futures::StreamExt::collect(api.watch(&WatchParams::default(), "1").await.unwrap()).await;
    assert_eq!(items.len(), 1);
    assert!(matches!(
        items[0],
        Err(kcontrol_client::Error::FrameTooLarge { limit: 1024 })
    ));
}

#[tokio::test]
async fn watch_start_errors_are_returned_by_the_call() {
    let server =
        TestServer::http(|_| support::status(410, "Expired", "too old resource version: 1 (50)"))
            .await;
    let api: Api<ConfigMap> = Api::namespaced(Client::try_from(server.config()).unwrap(), "ns1");
    let err = api.watch(&WatchParams::default(), "1").await.unwrap_err();
    assert!(err.is_expired() && err.is_gone(), "{err}");
}

#[tokio::test]
async fn request_timeout_applies_to_requests_not_to_watches() {
    let server = TestServer::http(|req| {
        let events =
            json!({"type": "ADDED", "object": configmap("ns1", "a", "1")}).to_string() + "\n";
        if req.param("watch").is_some() {
            // a watch that sends its event after the request timeout
            support::chunked(vec![events.into()], Duration::from_millis(600))
        } else {
            // a list whose body arrives after the request timeout
            let list = json!({"metadata": {}, "items": []}).to_string();
            support::chunked(vec![list.into()], Duration::from_secs(30))
        }
    })
    .await;
    let config = server
        .config()
        .with_request_timeout(Some(Duration::from_millis(200)));
    let api: Api<ConfigMap> = Api::namespaced(Client::try_from(config).unwrap(), "ns1");
    let err = api.list(&ListParams::default()).await.unwrap_err();
    assert!(matches!(err, kcontrol_client::Error::Timeout(_)), "{err}");
    assert!(err.is_transport());
    let events: Vec<_> = api
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(events.len(), 1);
}

#[tokio::test]
async fn rate_limit_holds_requests_and_watches() {
    let server = TestServer::http(|req| {
        if req.param("watch").is_some() {
            support::bytes(200, "")
        } else {
            json(200, json!({"metadata": {}, "items": []}))
        }
    })
    .await;
    // one request, then the next token in ~3 hours
    let config = server
        .config()
        .with_rate_limit(Some(kcontrol_client::RateLimit {
            qps: 0.0001,
            burst: 1,
        }));
    let api: Api<ConfigMap> = Api::namespaced(Client::try_from(config).unwrap(), "ns1");
    api.list(&ListParams::default()).await.unwrap();
    // as in client-go, a watch waits for a token too (a relist storm is
    // throttled)
    let watch = tokio::time::timeout(
        Duration::from_millis(300),
        api.watch(&WatchParams::default(), "1"),
    )
    .await;
    assert!(watch.is_err(), "the watch must wait for a token");
    let second =
        tokio::time::timeout(Duration::from_millis(300), api.list(&ListParams::default())).await;
    assert!(second.is_err(), "the second list must wait for a token");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn connection_refused_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let config = kcontrol_client::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
    let api: Api<ConfigMap> = Api::namespaced(Client::try_from(config).unwrap(), "ns1");
    let err = api.get("a").await.unwrap_err();
    assert!(
        matches!(err, kcontrol_client::Error::Connect { .. }),
        "{err}"
    );
    assert!(err.is_transport());
}
