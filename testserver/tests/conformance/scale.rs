//! The `scale` subresource of Deployments, as kube-apiserver 1.36 serves it.

use crate::client::{Client, WAIT};
use crate::{deployment, server};
use serde_json::json;

const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";

#[tokio::test]
async fn deployment_scale_reads_and_writes_replicas() {
    let s = server().await;
    let c = Client::new(&s);
    let created = c.post(DEPLOYS, &deployment("web", 2)).await.json();
    let rv = created["metadata"]["resourceVersion"].clone();

    let r = c.get(&format!("{DEPLOYS}/web/scale")).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json(),
        json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": "web", "namespace": "default", "uid": created["metadata"]["uid"],
                "resourceVersion": rv, "creationTimestamp": created["metadata"]["creationTimestamp"]},
            "spec": {"replicas": 2}, "status": {"replicas": 0, "selector": "app=web"}})
    );
    assert_eq!(c.get(&format!("{DEPLOYS}/nope/scale")).await.status, 404);
    assert_eq!(
        c.get(&format!("{DEPLOYS}/nope/scale")).await.json()["message"],
        "deployments.apps \"nope\" not found"
    );

    // a watch from the create's version sees the scale write as MODIFIED
    let mut w = c
        .stream(&format!(
            "{DEPLOYS}?watch=true&resourceVersion={}",
            rv.as_str().unwrap()
        ))
        .await;

    // PUT with the current resourceVersion: replicas and generation change
    let put = json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": "web", "namespace": "default", "resourceVersion": rv}, "spec": {"replicas": 5}});
    let r = c
        .put(&format!("{DEPLOYS}/web/scale?fieldManager=scaler"), &put)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert_eq!(r.json()["spec"]["replicas"], 5);
    assert_ne!(r.json()["metadata"]["resourceVersion"], rv);
    let dep = c.get(&format!("{DEPLOYS}/web")).await.json();
    assert_eq!(dep["spec"]["replicas"], 5);
    assert_eq!(dep["metadata"]["generation"], 2);
    let scaler = dep["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "scaler")
        .cloned()
        .unwrap();
    assert_eq!(scaler["subresource"], "scale");
    assert_eq!(scaler["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
    let ev = w.next_non_bookmark(WAIT).await.unwrap();
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(ev["object"]["spec"]["replicas"], 5);

    // the same (now stale) resourceVersion: 409
    let r = c.put(&format!("{DEPLOYS}/web/scale"), &put).await;
    assert_eq!(r.status, 409);
    assert_eq!(
        r.json()["message"],
        "Operation cannot be fulfilled on deployments.apps \"web\": the object has been modified; please apply your changes to the latest version and try again"
    );
    // negative replicas: 422 on the Scale
    let r = c
        .put(
            &format!("{DEPLOYS}/web/scale"),
            &json!({"metadata": {"name": "web"}, "spec": {"replicas": -1}}),
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["message"],
        "Scale.autoscaling \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    );
    // merge patch, as kubectl scale sends it
    let r = c
        .patch(
            &format!("{DEPLOYS}/web/scale"),
            "application/merge-patch+json",
            r#"{"spec":{"replicas":0}}"#,
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["spec"], json!({}));
    let dep = c.get(&format!("{DEPLOYS}/web")).await.json();
    assert_eq!(dep["spec"]["replicas"], 0);
    assert_eq!(dep["metadata"]["generation"], 3);
    // a missing Deployment: PUT and PATCH answer 404 too
    let r = c
        .patch(
            &format!("{DEPLOYS}/nope/scale"),
            "application/merge-patch+json",
            r#"{"spec":{"replicas":1}}"#,
        )
        .await;
    assert_eq!(r.status, 404);
    // other verbs are not served on scale
    assert_eq!(
        c.delete(&format!("{DEPLOYS}/web/scale"), None).await.status,
        405
    );
}
