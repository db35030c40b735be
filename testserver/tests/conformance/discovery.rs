//! Discovery, OpenAPI, version and health endpoints.

use crate::client::Client;
use crate::server;

#[tokio::test]
async fn discovery_documents_match_kube_shapes() {
    let s = server().await;
    let c = Client::new(&s);
    let api = c.get("/api").await.json();
    assert_eq!(api["kind"], "APIVersions");
    assert_eq!(api["versions"][0], "v1");
    let v1 = c.get("/api/v1").await.json();
    assert_eq!(v1["kind"], "APIResourceList");
    assert_eq!(v1["groupVersion"], "v1");
    let cms = v1["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "configmaps")
        .unwrap()
        .clone();
    assert_eq!(cms["namespaced"], true);
    assert_eq!(cms["kind"], "ConfigMap");
    assert!(cms["verbs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v == "watch"));
    let ns = v1["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "namespaces")
        .unwrap()
        .clone();
    assert_eq!(ns["namespaced"], false);
    let groups = c.get("/apis").await.json();
    assert_eq!(groups["kind"], "APIGroupList");
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"apps")
            && names.contains(&"coordination.k8s.io")
            && names.contains(&"apiextensions.k8s.io")
    );
    let apps = c.get("/apis/apps").await.json();
    assert_eq!(apps["kind"], "APIGroup");
    assert_eq!(apps["preferredVersion"]["groupVersion"], "apps/v1");
    let appsv1 = c.get("/apis/apps/v1").await.json();
    let res: Vec<&str> = appsv1["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        res,
        [
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "statefulsets",
            "statefulsets/scale",
            "statefulsets/status"
        ]
    );
    let missing = c.get("/apis/nope.example.com/v1").await;
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.json()["message"],
        "the server could not find the requested resource"
    );
    assert_eq!(
        c.get("/apis/apps/v1/namespaces/default/widgets")
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn version_health_and_openapi() {
    let s = server().await;
    let c = Client::new(&s);
    let v = c.get("/version").await.json();
    assert_eq!(v["major"], "1");
    for path in ["/healthz", "/readyz", "/livez"] {
        let r = c.get(path).await;
        assert_eq!((r.status, r.body.as_ref()), (200, b"ok".as_ref()), "{path}");
    }
    let root = c.get("/openapi/v3").await.json();
    let url = root["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_owned();
    let doc = c.get(&url).await.json();
    assert_eq!(doc["openapi"], "3.0.0");
    let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"]["kind"],
        "ConfigMap"
    );
    assert!(patch["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "fieldValidation"));
    let v2 = c.get("/openapi/v2").await;
    assert_eq!(v2.status, 200);
    assert!(v2.json()["definitions"]["io.k8s.api.apps.v1.Deployment"].is_object());
    // kubectl asks for protobuf only: not served, it falls back
    let pb = c
        .get_as(
            "/openapi/v2",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        )
        .await;
    assert_eq!(pb.status, 406);
}
