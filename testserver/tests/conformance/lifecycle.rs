//! Finalizers, garbage collection with propagation policies, namespace
//! termination and the Deployment status simulator.

use crate::client::{Client, WAIT};
use crate::{cm, deployment, server};
use kcontrol_testserver::eventually;
use kcontrol_testserver::TestServer;
use serde_json::{json, Value};
use std::time::Duration;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn owned(name: &str, owner: &Value, block: bool) -> Value {
    let mut d = cm(name, json!({}));
    d["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"], "blockOwnerDeletion": block, "controller": true}]);
    d
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let s = server().await;
    let c = Client::new(&s);
    let mut f = cm("held", json!({}));
    f["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let created = c.post(CMS, &f).await.json();
    let mut w = c
        .stream(&format!(
            "{CMS}?watch=true&resourceVersion={}",
            created["metadata"]["resourceVersion"].as_str().unwrap()
        ))
        .await;
    let d = c.delete(&format!("{CMS}/held"), None).await;
    assert_eq!(d.status, 200);
    let pending = d.json();
    assert!(pending["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(c.get(&format!("{CMS}/held")).await.status, 200);
    let e = w.next_event(WAIT).await.unwrap();
    assert_eq!(e["type"], "MODIFIED");
    // deletionTimestamp cannot be removed by an update
    let mut keep = pending.clone();
    keep["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("deletionTimestamp");
    keep["data"]["k"] = json!("still");
    let r = c.put(&format!("{CMS}/held"), &keep).await.json();
    assert!(r["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(w.next_event(WAIT).await.unwrap()["type"], "MODIFIED");
    let mut release = r.clone();
    release["metadata"]["finalizers"] = json!([]);
    assert_eq!(c.put(&format!("{CMS}/held"), &release).await.status, 200);
    assert_eq!(c.get(&format!("{CMS}/held")).await.status, 404);
    let e = w.next_event(WAIT).await.unwrap();
    assert_eq!(e["type"], "DELETED");
}

#[tokio::test]
async fn garbage_collection_follows_the_propagation_policy() {
    let s = server().await;
    let c = Client::new(&s);
    // background (the default): dependents go after the owner
    let owner = c.post(CMS, &cm("owner", json!({}))).await.json();
    for n in ["d1", "d2"] {
        assert_eq!(c.post(CMS, &owned(n, &owner, false)).await.status, 201);
    }
    assert_eq!(c.delete(&format!("{CMS}/owner"), None).await.status, 200);
    eventually("the dependents d1 and d2 to be collected", || async {
        c.get(&format!("{CMS}/d1")).await.status == 404
            && c.get(&format!("{CMS}/d2")).await.status == 404
    })
    .await;

    // orphan: dependents stay, without the reference
    let owner = c.post(CMS, &cm("owner2", json!({}))).await.json();
    c.post(CMS, &owned("o1", &owner, false)).await;
    let r = c.delete(&format!("{CMS}/owner2"), Some(&json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan"}))).await;
    assert_eq!(r.status, 200);
    assert!(r.json()["metadata"]["finalizers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f == "orphan"));
    eventually("owner2 to be deleted", || async {
        c.get(&format!("{CMS}/owner2")).await.status == 404
    })
    .await;
    let o1 = c.get(&format!("{CMS}/o1")).await.json();
    assert!(o1["metadata"].get("ownerReferences").is_none(), "{o1}");

    // foreground: the owner waits (foregroundDeletion) until blocking dependents are gone
    let owner = c.post(CMS, &cm("owner3", json!({}))).await.json();
    let mut blocker = owned("f1", &owner, true);
    blocker["metadata"]["finalizers"] = json!(["example.com/slow"]);
    c.post(CMS, &blocker).await;
    let r = c
        .delete(&format!("{CMS}/owner3?propagationPolicy=Foreground"), None)
        .await
        .json();
    assert!(r["metadata"]["finalizers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f == "foregroundDeletion"));
    eventually("the blocking dependent f1 to be deleting", || async {
        c.get(&format!("{CMS}/f1")).await.json()["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    // An absence cannot be waited for: the owner is checked after a short
    // window. A slow collector can only make this pass, never fail wrongly;
    // the deletion that must not happen yet is proven to come below.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        c.get(&format!("{CMS}/owner3")).await.status,
        200,
        "still waiting for f1"
    );
    let mut f1 = c.get(&format!("{CMS}/f1")).await.json();
    f1["metadata"]["finalizers"] = json!([]);
    c.put(&format!("{CMS}/f1"), &f1).await;
    eventually("owner3 to be deleted", || async {
        c.get(&format!("{CMS}/owner3")).await.status == 404
    })
    .await;
    // preconditions
    let p = c.post(CMS, &cm("pre", json!({}))).await.json();
    let r = c
        .delete(
            &format!("{CMS}/pre"),
            Some(&json!({"preconditions": {"uid": "not-the-uid"}})),
        )
        .await;
    assert_eq!(r.status, 409);
    assert_eq!(
        r.json()["message"],
        format!("Operation cannot be fulfilled on configmaps \"pre\": Precondition failed: UID in precondition: not-the-uid, UID in object meta: {}", p["metadata"]["uid"].as_str().unwrap())
    );
}

#[tokio::test]
async fn namespaces_terminate_with_their_contents() {
    let s = server().await;
    let c = Client::new(&s);
    let ns = c
        .post(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
        )
        .await
        .json();
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    c.post("/api/v1/namespaces/team/configmaps", &cm("x", json!({})))
        .await;
    let mut held = cm("held", json!({}));
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    c.post("/api/v1/namespaces/team/configmaps", &held).await;
    let d = c.delete("/api/v1/namespaces/team", None).await.json();
    assert_eq!(d["status"]["phase"], "Terminating");
    let r = c
        .post("/api/v1/namespaces/team/configmaps", &cm("late", json!({})))
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(r.json()["message"], "configmaps \"late\" is forbidden: unable to create new content in namespace team because it is being terminated");
    eventually("the namespace's ConfigMap to be deleted", || async {
        c.get("/api/v1/namespaces/team/configmaps/x").await.status == 404
    })
    .await;
    assert_eq!(
        c.get("/api/v1/namespaces/team").await.status,
        200,
        "held by the finalized object"
    );
    let mut h = c
        .get("/api/v1/namespaces/team/configmaps/held")
        .await
        .json();
    h["metadata"]["finalizers"] = json!([]);
    c.put("/api/v1/namespaces/team/configmaps/held", &h).await;
    eventually("the namespace to be deleted", || async {
        c.get("/api/v1/namespaces/team").await.status == 404
    })
    .await;
    let names: Vec<String> = c.get("/api/v1/namespaces").await.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        ["default", "kube-node-lease", "kube-public", "kube-system"]
    );
}

#[tokio::test]
async fn the_deployment_simulator_reports_rollouts() {
    let s = TestServer::builder()
        .deployment_simulator(Some(Duration::from_millis(20)))
        .start()
        .await
        .unwrap();
    let c = Client::new(&s);
    let path = "/apis/apps/v1/namespaces/default/deployments";
    c.post(path, &deployment("web", 3)).await;
    let ready = |want: i64, generation: i64| {
        let c = c.clone();
        async move {
            let d = c.get(&format!("{path}/web")).await.json();
            let st = &d["status"];
            st["availableReplicas"] == want
                && st["readyReplicas"] == want
                && st["updatedReplicas"] == want
                && st["replicas"] == want
                && st["observedGeneration"] == generation
        }
    };
    eventually("3 replicas ready at generation 1", || ready(3, 1)).await;
    let d = c.get(&format!("{path}/web")).await.json();
    assert!(d["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "Available" && c["status"] == "True"));
    c.patch(
        &format!("{path}/web"),
        "application/merge-patch+json",
        r#"{"spec":{"replicas":5}}"#,
    )
    .await;
    eventually("5 replicas ready at generation 2", || ready(5, 2)).await;
    s.set_deployment_simulator(None);
    c.patch(
        &format!("{path}/web"),
        "application/merge-patch+json",
        r#"{"spec":{"replicas":1}}"#,
    )
    .await;
    // An absence cannot be waited for: with the simulator off nothing may
    // update the status, checked after a short window (a slow server can
    // only make this pass, never fail wrongly).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let d = c.get(&format!("{path}/web")).await.json();
    assert_eq!(
        (
            d["status"]["availableReplicas"].as_i64(),
            d["status"]["observedGeneration"].as_i64()
        ),
        (Some(5), Some(2))
    );
}

#[tokio::test]
async fn dependents_of_owners_that_do_not_exist_are_collected() {
    let s = server().await;
    let c = Client::new(&s);
    let ghost =
        json!({"metadata": {"name": "ghost", "uid": "00000000-0000-0000-0000-000000000000"}});
    assert_eq!(
        c.post(CMS, &owned("orphaned", &ghost, false)).await.status,
        201
    );
    eventually("the orphaned dependent to be collected", || async {
        c.get(&format!("{CMS}/orphaned")).await.status == 404
    })
    .await;
    // with one live owner, only the dangling reference goes
    let live = c.post(CMS, &cm("live", json!({}))).await.json();
    let mut two = owned("two-owners", &live, false);
    two["metadata"]["ownerReferences"].as_array_mut().unwrap().push(json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "00000000-0000-0000-0000-000000000000"}));
    c.post(CMS, &two).await;
    eventually("only the live owner left on two-owners", || async {
        let o = c.get(&format!("{CMS}/two-owners")).await.json();
        o["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|r| r.len() == 1 && r[0]["name"] == "live")
    })
    .await;
}
