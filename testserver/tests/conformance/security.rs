//! TLS, HTTP/2, bearer tokens, client certificates, the kubeconfig.

use crate::client::{Auth, Client};
use crate::cm;
use kcontrol_testserver::TestServer;
use serde_json::json;

#[tokio::test]
async fn tls_http2_and_bearer_tokens() {
    let s = TestServer::builder()
        .tls(true)
        .bearer_token("s3cret")
        .start()
        .await
        .unwrap();
    assert!(s.url().starts_with("https://127.0.0.1:"));
    let anon = Client::new(&s);
    let r = anon.get("/api/v1/namespaces").await;
    assert_eq!(r.status, 401);
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
    );
    assert_eq!(anon.get("/healthz").await.status, 200);
    let wrong = Client::with_auth(
        &s,
        Auth {
            token: Some("nope".into()),
            ..Auth::default()
        },
    );
    assert_eq!(wrong.get("/api").await.status, 401);
    let h2 = Client::with_auth(
        &s,
        Auth {
            token: Some("s3cret".into()),
            http2_only: true,
            ..Auth::default()
        },
    );
    assert_eq!(
        h2.post("/api/v1/namespaces/default/configmaps", &cm("a", json!({})))
            .await
            .status,
        201
    );
    let mut w = h2
        .stream("/api/v1/namespaces/default/configmaps?watch=true")
        .await;
    assert_eq!(
        w.next_event(crate::client::WAIT).await.unwrap()["type"],
        "ADDED"
    );
    let kc: serde_json::Value = serde_yaml::from_str(&s.kubeconfig()).unwrap();
    assert_eq!(kc["users"][0]["user"]["token"], "s3cret");
    assert!(kc["clusters"][0]["cluster"]["certificate-authority-data"].is_string());
    assert!(format!("{:?}", TestServer::builder().bearer_token("hidden")).contains("<redacted>"));
}

#[tokio::test]
async fn client_certificates_authenticate() {
    let s = TestServer::builder()
        .client_cert_auth(true)
        .start()
        .await
        .unwrap();
    let without = Client::new(&s);
    assert_eq!(without.get("/api/v1/namespaces").await.status, 401);
    let with = Client::with_auth(
        &s,
        Auth {
            client_cert: true,
            ..Auth::default()
        },
    );
    assert_eq!(with.get("/api/v1/namespaces").await.status, 200);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    s.write_kubeconfig(&path).unwrap();
    let kc: serde_json::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(kc["users"][0]["user"]["client-certificate-data"].is_string());
    assert!(kc["users"][0]["user"]["client-key-data"].is_string());
}

#[test]
fn a_blocking_server_serves_threads() {
    let s = TestServer::builder().start_blocking().unwrap();
    let url = s.url().to_owned();
    let objects = s.objects();
    objects
        .create("configmaps", "default", cm("seeded", json!({})))
        .unwrap();
    // a plain HTTP/1.1 request from another thread over a raw socket
    let addr = s.addr();
    let body = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut sock = std::net::TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(crate::client::WAIT)).unwrap();
        write!(sock, "GET /api/v1/namespaces/default/configmaps/seeded HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut out = String::new();
        sock.read_to_string(&mut out).unwrap();
        out
    })
    .join()
    .unwrap();
    assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
    assert!(body.contains("\"name\":\"seeded\""));
    assert!(url.starts_with("http://"));
    let list = objects.list("configmaps", Some("default")).unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.resource_version, objects.resource_version());
    s.shutdown();
}
