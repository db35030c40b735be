//! Create, get, update, status, patch, apply and delete semantics;
//! server-side apply's field ownership.

use crate::client::Client;
use crate::{cm, deployment, server};
use serde_json::json;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn create_get_conflict_and_not_found() {
    let s = server().await;
    let c = Client::new(&s);
    let r = c.post(CMS, &cm("a", json!({"x": "1"}))).await;
    assert_eq!(r.status, 201);
    let created = r.json();
    let uid = created["metadata"]["uid"].as_str().unwrap().to_owned();
    assert_eq!(uid.len(), 36);
    assert!(created["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap()
        .ends_with('Z'));
    assert_eq!(created["metadata"]["namespace"], "default");
    assert!(
        created["metadata"].get("generation").is_none(),
        "configmaps have no generation"
    );
    let rv: u64 = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let got = c.get(&format!("{CMS}/a")).await.json();
    assert_eq!(got, created);

    let dup = c.post(CMS, &cm("a", json!({}))).await;
    assert_eq!(dup.status, 409);
    assert_eq!(
        dup.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "configmaps \"a\" already exists", "reason": "AlreadyExists",
        "details": {"name": "a", "kind": "configmaps"}, "code": 409})
    );

    let mut upd = created.clone();
    upd["data"]["k"] = json!("changed");
    let r = c.put(&format!("{CMS}/a"), &upd).await;
    assert_eq!(r.status, 200);
    let rv2: u64 = r.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv);
    assert_eq!(r.json()["metadata"]["uid"], uid.as_str());
    // the same body again carries the old resourceVersion: stale
    let stale = c.put(&format!("{CMS}/a"), &upd).await;
    assert_eq!(stale.status, 409);
    assert_eq!(stale.json()["reason"], "Conflict");
    assert_eq!(
        stale.json()["message"],
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );
    // without a resourceVersion the update is unconditional
    upd["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    upd["data"]["k"] = json!("again");
    assert_eq!(c.put(&format!("{CMS}/a"), &upd).await.status, 200);
    // an update that changes nothing writes nothing
    let cur = c.get(&format!("{CMS}/a")).await.json();
    let same = c.put(&format!("{CMS}/a"), &cur).await.json();
    assert_eq!(
        same["metadata"]["resourceVersion"],
        cur["metadata"]["resourceVersion"]
    );

    let missing = c.get(&format!("{CMS}/nope")).await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["message"], "configmaps \"nope\" not found");
    assert_eq!(
        missing.json()["details"],
        json!({"name": "nope", "kind": "configmaps"})
    );
    let dep = c
        .get("/apis/apps/v1/namespaces/default/deployments/nope")
        .await
        .json();
    assert_eq!(dep["message"], "deployments.apps \"nope\" not found");
    assert_eq!(
        dep["details"],
        json!({"name": "nope", "group": "apps", "kind": "deployments"})
    );
    assert_eq!(
        c.put(&format!("{CMS}/nope"), &cm("nope", json!({})))
            .await
            .status,
        404
    );

    let del = c.delete(&format!("{CMS}/a"), None).await;
    assert_eq!(del.status, 200);
    assert_eq!(
        del.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": "a", "kind": "configmaps", "uid": uid}})
    );
    assert_eq!(c.delete(&format!("{CMS}/a"), None).await.status, 404);
}

#[tokio::test]
async fn names_namespaces_and_generate_name() {
    let s = server().await;
    let c = Client::new(&s);
    let r = c
        .post("/api/v1/namespaces/nope/configmaps", &cm("a", json!({})))
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["message"], "namespaces \"nope\" not found");
    let mut g = cm("", json!({}));
    g["metadata"] = json!({"generateName": "job-"});
    let r = c.post(CMS, &g).await.json();
    let name = r["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("job-") && name.len() == 9, "{name}");
    let bad = c.post(CMS, &cm("Bad_Name", json!({}))).await;
    assert_eq!(bad.status, 422);
    assert_eq!(bad.json()["reason"], "Invalid");
    assert!(bad.json()["message"].as_str().unwrap().starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"));
    assert_eq!(
        bad.json()["details"]["causes"][0]["reason"],
        "FieldValueInvalid"
    );
    assert_eq!(bad.json()["details"]["causes"][0]["field"], "metadata.name");
    let mut noname = cm("", json!({}));
    noname["metadata"] = json!({});
    let r = c.post(CMS, &noname).await.json();
    assert_eq!(r["message"], "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is required");
    let mut other_ns = cm("x", json!({}));
    other_ns["metadata"]["namespace"] = json!("kube-system");
    let r = c.post(CMS, &other_ns).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["message"],
        "the namespace of the provided object does not match the namespace sent on the request"
    );
    let r = c.put(&format!("{CMS}/y"), &cm("x", json!({}))).await;
    assert_eq!(
        r.json()["message"],
        "the name of the object (x) does not match the name on the URL (y)"
    );
    let yaml = c
        .send_raw(
            "POST",
            CMS,
            Some("application/yaml"),
            None,
            Some(b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fromyaml\n".to_vec()),
        )
        .await;
    assert_eq!(yaml.status, 201);
    let pb = c
        .send_raw(
            "POST",
            CMS,
            Some("application/vnd.kubernetes.protobuf"),
            None,
            Some(vec![0x6b, 0x38, 0x73]),
        )
        .await;
    // protobuf is accepted for built-in kinds (see protobuf.rs); a body
    // without the k8s\0 envelope is malformed
    assert_eq!(pb.status, 400);
    let dry = c
        .post(&format!("{CMS}?dryRun=All"), &cm("dry", json!({})))
        .await;
    assert_eq!(dry.status, 201);
    assert_eq!(c.get(&format!("{CMS}/dry")).await.status, 404);
}

#[tokio::test]
async fn generation_and_status_subresource() {
    let s = TestServerNoSim::start().await;
    let c = Client::new(&s);
    let path = "/apis/apps/v1/namespaces/default/deployments";
    let mut d = deployment("web", 2);
    d["status"] = json!({"replicas": 99});
    let created = c.post(path, &d).await.json();
    assert_eq!(created["metadata"]["generation"], 1);
    assert!(
        created.get("status").is_none() || created["status"].get("replicas").is_none(),
        "status is reset on create: {created}"
    );
    assert_eq!(
        created["spec"]["strategy"]["type"], "RollingUpdate",
        "defaulted"
    );
    // metadata-only change: same generation
    let mut m = created.clone();
    m["metadata"]["labels"] = json!({"tier": "web"});
    let r = c.put(&format!("{path}/web"), &m).await.json();
    assert_eq!(r["metadata"]["generation"], 1);
    // spec change: generation 2; a status in the main PUT is ignored
    let mut sp = r.clone();
    sp["spec"]["replicas"] = json!(5);
    sp["status"] = json!({"replicas": 42});
    let r = c.put(&format!("{path}/web"), &sp).await.json();
    assert_eq!(r["metadata"]["generation"], 2);
    assert!(r["status"].get("replicas").is_none());
    // PUT /status changes only the status
    let mut st = r.clone();
    st["status"] = json!({"replicas": 5, "observedGeneration": 2});
    st["spec"]["replicas"] = json!(100);
    let r = c.put(&format!("{path}/web/status"), &st).await.json();
    assert_eq!(r["status"]["replicas"], 5);
    assert_eq!(r["spec"]["replicas"], 5);
    assert_eq!(r["metadata"]["generation"], 2);
    // immutable selector
    let mut sel = r.clone();
    sel["spec"]["selector"]["matchLabels"] = json!({"app": "other"});
    sel["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    let bad = c.put(&format!("{path}/web"), &sel).await;
    assert_eq!(bad.status, 422);
    assert!(
        bad.json()["message"]
            .as_str()
            .unwrap()
            .contains("spec.selector: Invalid value"),
        "{}",
        bad.json()
    );
    assert!(bad.json()["message"]
        .as_str()
        .unwrap()
        .ends_with("field is immutable"));
}

/// A server without the Deployment simulator (status stays as written).
struct TestServerNoSim;

impl TestServerNoSim {
    async fn start() -> kcontrol_testserver::TestServer {
        kcontrol_testserver::TestServer::builder()
            .deployment_simulator(None)
            .start()
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn patches_of_every_type() {
    let s = TestServerNoSim::start().await;
    let c = Client::new(&s);
    c.post(CMS, &cm("p", json!({"a": "1"}))).await;
    let r = c
        .patch(
            &format!("{CMS}/p"),
            "application/merge-patch+json",
            r#"{"data":{"k":null,"n":"2"},"metadata":{"labels":{"a":null,"b":"2"}}}"#,
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["data"], json!({"n": "2"}));
    assert_eq!(r.json()["metadata"]["labels"], json!({"b": "2"}));
    let r = c.patch(&format!("{CMS}/p"), "application/json-patch+json", r#"[{"op":"add","path":"/data/j","value":"3"},{"op":"test","path":"/data/n","value":"2"}]"#).await;
    assert_eq!(r.json()["data"], json!({"n": "2", "j": "3"}));
    let r = c
        .patch(
            &format!("{CMS}/p"),
            "application/json-patch+json",
            r#"[{"op":"remove","path":"/data/missing"}]"#,
        )
        .await;
    assert_eq!(r.status, 422);
    let rv = r.json();
    assert_eq!(rv["reason"], "Invalid");
    let r = c
        .patch(
            &format!("{CMS}/p"),
            "application/merge-patch+json",
            r#"{"metadata":{"resourceVersion":"1"}}"#,
        )
        .await;
    assert_eq!(
        r.status, 409,
        "a patch carrying a stale resourceVersion conflicts"
    );
    let r = c.patch(&format!("{CMS}/p"), "text/plain", "x").await;
    assert_eq!(r.status, 415);
    assert_eq!(
        c.patch(
            &format!("{CMS}/missing"),
            "application/merge-patch+json",
            "{}"
        )
        .await
        .status,
        404
    );

    let path = "/apis/apps/v1/namespaces/default/deployments";
    c.post(path, &crate::deployment("web", 1)).await;
    let smp = r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox"},{"name":"nginx","image":"nginx:1.27"}]}}}}"#;
    let r = c
        .patch(
            &format!("{path}/web"),
            "application/strategic-merge-patch+json",
            smp,
        )
        .await
        .json();
    let containers = r["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(containers.len(), 2, "merged by name: {containers:?}");
    assert_eq!(
        containers.iter().find(|c| c["name"] == "nginx").unwrap()["image"],
        "nginx:1.27"
    );
    assert_eq!(r["metadata"]["generation"], 2);
    let r = c
        .patch(
            &format!("{path}/web/status"),
            "application/merge-patch+json",
            r#"{"status":{"readyReplicas":1},"spec":{"replicas":9}}"#,
        )
        .await
        .json();
    assert_eq!(r["status"]["readyReplicas"], 1);
    assert_eq!(
        r["spec"]["replicas"], 1,
        "a status patch leaves the spec alone"
    );

    // server-side apply: create, then merge; fieldManager is required
    let applied =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  x: \"1\"\n";
    let r = c
        .send_raw(
            "PATCH",
            &format!("{CMS}/applied"),
            Some("application/apply-patch+yaml"),
            None,
            Some(applied.into()),
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["message"], "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch");
    let r = c
        .send_raw(
            "PATCH",
            &format!("{CMS}/applied?fieldManager=test"),
            Some("application/apply-patch+yaml"),
            None,
            Some(applied.into()),
        )
        .await;
    assert_eq!(r.status, 201);
    let again = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  y: \"2\"\n";
    let r = c
        .send_raw(
            "PATCH",
            &format!("{CMS}/applied?fieldManager=test"),
            Some("application/apply-patch+yaml"),
            None,
            Some(again.into()),
        )
        .await;
    assert_eq!(r.status, 200);
    // the manager no longer applies x and no one else owns it: it goes
    assert_eq!(r.json()["data"], json!({"y": "2"}));
}

#[tokio::test]
async fn secrets_take_string_data() {
    let s = server().await;
    let c = Client::new(&s);
    let r = c
        .post("/api/v1/namespaces/default/secrets", &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"password": "hunter2"}}))
        .await
        .json();
    assert_eq!(r["data"]["password"], "aHVudGVyMg==");
    assert_eq!(r["type"], "Opaque");
    assert!(r.get("stringData").is_none());
}

#[tokio::test]
async fn tables_and_partial_metadata() {
    let s = server().await;
    let c = Client::new(&s);
    c.post(CMS, &cm("t", json!({}))).await;
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let t = c.get_as(CMS, accept).await.json();
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, ["Name", "Data", "Age"]);
    let row = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["cells"][0] == "t")
        .unwrap()
        .clone();
    assert_eq!(row["cells"][1], 1);
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    let one = c.get_as(&format!("{CMS}/t"), accept).await.json();
    assert_eq!(one["rows"].as_array().unwrap().len(), 1);
    let pm = c
        .get_as(
            CMS,
            "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
        )
        .await
        .json();
    assert_eq!(pm["kind"], "PartialObjectMetadataList");
    assert!(pm["items"][0].get("data").is_none());
    // built-in kinds are served as protobuf (custom resources answer 406:
    // protobuf.rs)
    let pb = c.get_as(CMS, "application/vnd.kubernetes.protobuf").await;
    assert_eq!(pb.status, 200);
    assert_eq!(
        pb.header("content-type").as_deref(),
        Some("application/vnd.kubernetes.protobuf")
    );
    assert_eq!(&pb.body[..4], b"k8s\0");
}

#[tokio::test]
async fn unknown_fields_of_builtin_kinds_are_dropped_or_refused() {
    let s = server().await;
    let c = Client::new(&s);
    let mut typo = cm("typo", json!({}));
    typo["dta"] = json!({"a": "1"});
    typo["metadata"]["lables"] = json!({"a": "1"});
    let r = c.post(CMS, &typo).await;
    assert_eq!(r.status, 201);
    assert!(r.json().get("dta").is_none() && r.json()["metadata"].get("lables").is_none());
    let warnings: Vec<String> = r
        .headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        warnings,
        [
            "299 - \"unknown field \\\"dta\\\"\"",
            "299 - \"unknown field \\\"metadata.lables\\\"\""
        ]
    );
    typo["metadata"]["name"] = json!("typo2");
    let r = c
        .post(&format!("{CMS}?fieldValidation=Strict"), &typo)
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["message"],
        "strict decoding error: unknown field \"dta\", unknown field \"metadata.lables\""
    );
    assert_eq!(
        c.post(&format!("{CMS}?fieldValidation=Ignore"), &typo)
            .await
            .status,
        201
    );
    assert_eq!(
        c.post(&format!("{CMS}?fieldValidation=Sometimes"), &typo)
            .await
            .status,
        400
    );
}

/// The typed `Objects` calls: seed a Secret as a Rust value, read it back
/// with its data decoded (no base64 by hand), list a typed resource of a
/// named group, and get a clear error for a conflicting create.
#[tokio::test]
async fn typed_objects_seed_and_read_back() {
    use kcontrol_indexer::k8s_openapi::api::apps::v1::Deployment;
    use kcontrol_indexer::k8s_openapi::api::core::v1::Secret;
    use kcontrol_indexer::k8s_openapi::ByteString;
    use kcontrol_testserver::TypedError;

    let s = server().await;
    let objects = s.objects();
    let mut secret = Secret::default();
    secret.metadata.name = Some("s".into());
    secret.data = Some([("token".to_owned(), ByteString(b"\x00hidden".to_vec()))].into());
    let stored = objects.create_typed("default", &secret).unwrap();
    assert_eq!(stored.metadata.namespace.as_deref(), Some("default"));
    assert!(stored.metadata.uid.is_some() && stored.metadata.resource_version.is_some());

    let got: Secret = objects.get_as("default", "s").unwrap().unwrap();
    assert_eq!(got.data.unwrap()["token"].0, b"\x00hidden");
    assert!(objects
        .get_as::<Secret>("default", "absent")
        .unwrap()
        .is_none());
    assert!(matches!(
        objects.create_typed("default", &secret),
        Err(TypedError::Status(e)) if e.code == 409
    ));

    objects
        .create("deployments.apps", "default", deployment("web", 2))
        .unwrap();
    let deployments: Vec<Deployment> = objects.list_as(Some("default")).unwrap();
    assert_eq!(deployments.len(), 1);
    assert_eq!(
        deployments[0].spec.as_ref().and_then(|s| s.replicas),
        Some(2)
    );
}
