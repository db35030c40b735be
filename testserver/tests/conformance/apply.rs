//! Server-side apply with field ownership, replayed as kube-apiserver 1.36
//! answers it: `managedFields` on every write, conflicts between appliers,
//! `force`, shared ownership, pruning, and updates taking ownership.

use crate::client::Client;
use crate::server;
use serde_json::{json, Value};

const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
const APPLY: &str = "application/apply-patch+yaml";

fn web(replicas: i64) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: nginx\n        image: nginx\n"
    )
}

fn managers(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or("").to_owned(),
                e["operation"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn pair(m: &str, op: &str) -> (String, String) {
    (m.to_owned(), op.to_owned())
}

async fn apply(c: &Client, query: &str, body: &str) -> crate::client::Resp {
    c.patch(&format!("{DEPLOYS}/web?{query}"), APPLY, body)
        .await
}

#[tokio::test]
async fn the_issue_sequence_conflict_then_force() {
    let s = server().await;
    let c = Client::new(&s);
    // mgr-a applies: created, managedFields [mgr-a, Apply]
    let r = apply(&c, "fieldManager=mgr-a", &web(2)).await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    let obj = r.json();
    assert_eq!(managers(&obj), vec![pair("mgr-a", "Apply")]);
    let entry = &obj["metadata"]["managedFields"][0];
    assert_eq!(entry["apiVersion"], "apps/v1");
    assert_eq!(entry["fieldsType"], "FieldsV1");
    assert!(entry["time"].as_str().unwrap().ends_with('Z'));
    let c0 = "k:{\"name\":\"nginx\"}";
    assert_eq!(
        entry["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:containers": {c0: {".": {}, "f:image": {}, "f:name": {}}}}}}})
    );
    // defaults belong to no one, and GET returns what was stored
    assert_eq!(obj["spec"]["revisionHistoryLimit"], 10);
    let got = c.get(&format!("{DEPLOYS}/web")).await.json();
    assert_eq!(
        got["metadata"]["managedFields"],
        obj["metadata"]["managedFields"]
    );

    // mgr-b applies another replicas: 409 naming the field and the owner
    let r = apply(&c, "fieldManager=mgr-b", &web(5)).await;
    assert_eq!(r.status, 409);
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Apply failed with 1 conflict: conflict with \"mgr-a\": .spec.replicas",
            "reason": "Conflict",
            "details": {"causes": [{"reason": "FieldManagerConflict", "message": "conflict with \"mgr-a\"", "field": ".spec.replicas"}]},
            "code": 409})
    );
    let unchanged = c.get(&format!("{DEPLOYS}/web")).await.json();
    assert_eq!(unchanged["spec"]["replicas"], 2);
    assert_eq!(
        unchanged["metadata"]["resourceVersion"],
        obj["metadata"]["resourceVersion"]
    );

    // forced: 200, replicas moves to mgr-b; the rest stays shared
    let r = apply(&c, "fieldManager=mgr-b&force=true", &web(5)).await;
    assert_eq!(r.status, 200);
    let forced = r.json();
    assert_eq!(forced["spec"]["replicas"], 5);
    assert_eq!(forced["metadata"]["generation"], 2);
    assert_eq!(
        managers(&forced),
        vec![pair("mgr-a", "Apply"), pair("mgr-b", "Apply")]
    );
    let mf = forced["metadata"]["managedFields"].as_array().unwrap();
    let a = mf.iter().find(|e| e["manager"] == "mgr-a").unwrap();
    let b = mf.iter().find(|e| e["manager"] == "mgr-b").unwrap();
    assert!(a["fieldsV1"]["f:spec"].get("f:replicas").is_none());
    assert_eq!(b["fieldsV1"]["f:spec"]["f:replicas"], json!({}));
    // mgr-b applying only replicas: the rest is mgr-a's alone, and stays
    let only =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 5\n";
    let r = apply(&c, "fieldManager=mgr-b", only).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json()["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx"
    );
    // mgr-a's old replicas is a conflict again (mgr-b owns it now)
    let r = apply(&c, "fieldManager=mgr-a", &web(2)).await;
    assert_eq!(r.status, 409);
    assert_eq!(
        r.json()["details"]["causes"][0]["message"],
        "conflict with \"mgr-b\""
    );
}

#[tokio::test]
async fn every_write_path_records_update_managers() {
    let s = server().await;
    let c = Client::new(&s);
    let cms = "/api/v1/namespaces/default/configmaps";
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m", "labels": {"app": "x"}}, "data": {"a": "1"}});
    let created = c.post(&format!("{cms}?fieldManager=creator"), &cm).await;
    assert_eq!(created.status, 201);
    let created = created.json();
    assert_eq!(managers(&created), vec![pair("creator", "Update")]);
    assert_eq!(
        created["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
    );
    // an applier shares a field with the same value: no conflict
    let same = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m\ndata:\n  a: \"1\"\n";
    let r = c
        .patch(&format!("{cms}/m?fieldManager=applier"), APPLY, same)
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        managers(&r.json()),
        vec![pair("applier", "Apply"), pair("creator", "Update")]
    );
    // a PUT by another manager changes a: it takes a from both, no conflict
    let mut upd = r.json();
    upd["data"]["a"] = json!("2");
    let r = c.put(&format!("{cms}/m?fieldManager=editor"), &upd).await;
    assert_eq!(r.status, 200);
    let after_put = r.json();
    assert_eq!(
        managers(&after_put),
        vec![pair("creator", "Update"), pair("editor", "Update")]
    );
    // merge, JSON and strategic merge patches record their managers too
    for (mgr, ct, body) in [
        (
            "merger",
            "application/merge-patch+json",
            r#"{"data":{"b":"1"}}"#,
        ),
        (
            "jsonpatcher",
            "application/json-patch+json",
            r#"[{"op":"add","path":"/data/c","value":"1"}]"#,
        ),
        (
            "smp",
            "application/strategic-merge-patch+json",
            r#"{"data":{"d":"1"}}"#,
        ),
    ] {
        let r = c
            .patch(&format!("{cms}/m?fieldManager={mgr}"), ct, body)
            .await;
        assert_eq!(r.status, 200, "{mgr}");
        let mf = r.json()["metadata"]["managedFields"].clone();
        let e = mf
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["manager"] == mgr)
            .cloned()
            .unwrap_or_else(|| panic!("{mgr} in {mf}"));
        assert_eq!(e["operation"], "Update");
        assert_eq!(e["fieldsV1"]["f:data"].as_object().unwrap().len(), 1);
    }
    // the applier re-applying a: 409 against the editor's Update entry
    let r = c
        .patch(&format!("{cms}/m?fieldManager=applier"), APPLY, same)
        .await;
    assert_eq!(r.status, 409);
    assert_eq!(
        r.json()["message"],
        "Apply failed with 1 conflict: conflict with \"editor\" using v1: .data.a"
    );
    // status writes are recorded with their subresource
    let d = crate::deployment("d", 1);
    assert_eq!(
        c.post(&format!("{DEPLOYS}?fieldManager=me"), &d)
            .await
            .status,
        201
    );
    let r = c
        .patch(
            &format!("{DEPLOYS}/d/status?fieldManager=st"),
            "application/merge-patch+json",
            r#"{"status":{"readyReplicas":1}}"#,
        )
        .await;
    assert_eq!(r.status, 200);
    let mf = r.json()["metadata"]["managedFields"].clone();
    let st = mf
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "st")
        .cloned()
        .unwrap();
    assert_eq!(st["subresource"], "status");
    assert_eq!(st["fieldsV1"], json!({"f:status": {"f:readyReplicas": {}}}));
}

#[tokio::test]
async fn apply_options_are_validated() {
    let s = server().await;
    let c = Client::new(&s);
    let long = "x".repeat(129);
    let r = apply(&c, &format!("fieldManager={long}"), &web(1)).await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be more than 128 bytes"
    );
    let r = c
        .patch(
            &format!("{DEPLOYS}/web?fieldManager=a&force=true"),
            "application/merge-patch+json",
            "{}",
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
    );
    // a list item without its key cannot be tracked
    let bad = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - image: nginx\n";
    let r = apply(&c, "fieldManager=a", bad).await;
    assert_eq!(r.status, 500);
    assert!(r.json()["message"]
        .as_str()
        .unwrap()
        .contains("omits key field \"name\""));
}
