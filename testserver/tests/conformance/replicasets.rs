//! The Deployment simulator's ReplicaSets: one per template revision,
//! owned by the Deployment, the current one holding the replicas, a
//! restored template reusing its ReplicaSet under a new revision, pruning
//! to `revisionHistoryLimit`, and garbage collection with the Deployment.

use crate::client::Client;
use crate::server;
use kcontrol_testserver::try_eventually;
use serde_json::{json, Value};

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
const RS: &str = "/apis/apps/v1/namespaces/default/replicasets";

fn deployment(image: &str, limit: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "revisionHistoryLimit": limit,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": image}]}}}})
}

/// (revision, replicas, image) of each ReplicaSet, by revision.
async fn revisions(c: &Client) -> Vec<(i64, i64, String)> {
    let list = c.get(RS).await.json();
    let mut out: Vec<(i64, i64, String)> = list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|rs| {
            (
                rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                    .as_str()
                    .and_then(|r| r.parse().ok())
                    .unwrap_or(0),
                rs["spec"]["replicas"].as_i64().unwrap_or(-1),
                rs["spec"]["template"]["spec"]["containers"][0]["image"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

async fn set_image(c: &Client, image: &str) {
    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}});
    let r = c
        .patch(
            &format!("{DEPLOYMENTS}/web"),
            "application/strategic-merge-patch+json",
            &patch.to_string(),
        )
        .await;
    assert_eq!(r.status, 200);
}

async fn wait_for(c: &Client, want: &[(i64, i64, &str)]) {
    let want: Vec<(i64, i64, String)> = want
        .iter()
        .map(|(r, n, i)| (*r, *n, (*i).to_owned()))
        .collect();
    let ok = try_eventually("the revisions", async || revisions(c).await == want)
        .await
        .is_ok();
    assert!(ok, "wanted {want:?}, have {:?}", revisions(c).await);
}

#[tokio::test]
async fn one_replica_set_per_template_revision() {
    let srv = server().await;
    let c = Client::new(&srv);
    assert_eq!(c.post(DEPLOYMENTS, &deployment("a", 1)).await.status, 201);
    wait_for(&c, &[(1, 2, "a")]).await;
    let d = c.get(&format!("{DEPLOYMENTS}/web")).await.json();
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );
    let rs = &c.get(RS).await.json()["items"][0];
    assert_eq!(
        rs["metadata"]["ownerReferences"][0]["uid"],
        d["metadata"]["uid"]
    );
    assert_eq!(rs["metadata"]["ownerReferences"][0]["controller"], true);
    let hash = rs["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .unwrap();
    assert_eq!(rs["metadata"]["name"], format!("web-{hash}"));
    assert_eq!(
        rs["spec"]["selector"]["matchLabels"]["pod-template-hash"],
        hash
    );
    // its status reports the replicas (the cluster has ready nodes)
    let available = try_eventually("2 available replicas", async || {
        let rs = &c.get(RS).await.json()["items"][0];
        rs["status"]["replicas"] == 2 && rs["status"]["availableReplicas"] == 2
    })
    .await
    .is_ok();
    assert!(available, "{}", c.get(RS).await.json());

    set_image(&c, "b").await;
    wait_for(&c, &[(1, 0, "a"), (2, 2, "b")]).await;
    // back to a: its ReplicaSet comes back as revision 3
    set_image(&c, "a").await;
    wait_for(&c, &[(2, 0, "b"), (3, 2, "a")]).await;
    // a third template: revisionHistoryLimit 1 prunes the oldest
    set_image(&c, "c").await;
    wait_for(&c, &[(3, 0, "a"), (4, 2, "c")]).await;
    // scaling moves the replicas of the current one
    let r = c
        .patch(
            &format!("{DEPLOYMENTS}/web/scale"),
            "application/merge-patch+json",
            r#"{"spec":{"replicas":5}}"#,
        )
        .await;
    assert_eq!(r.status, 200);
    wait_for(&c, &[(3, 0, "a"), (4, 5, "c")]).await;
    // deleting the Deployment collects its ReplicaSets
    assert_eq!(
        c.delete(&format!("{DEPLOYMENTS}/web"), None).await.status,
        200
    );
    assert!(
        try_eventually("no revisions", async || revisions(&c).await.is_empty())
            .await
            .is_ok(),
        "{:?}",
        revisions(&c).await
    );
}
