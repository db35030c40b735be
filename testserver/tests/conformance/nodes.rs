//! The simulators of a server with Nodes: pods scheduled and running,
//! Deployments (through ReplicaSets), StatefulSets, DaemonSets and Jobs
//! getting pods named, labelled and owned as kube's controllers make
//! them, owners' status converging, garbage collection of the pods; and
//! today's behaviour without Nodes.

use crate::client::Client;
use crate::deployment;
use kcontrol_testserver::{eventually_within, TestServer};
use serde_json::{json, Value};
use std::time::Duration;

/// A simulator converges in well under this on a loaded machine.
const CONVERGE: Duration = Duration::from_secs(45);

const PODS: &str = "/api/v1/namespaces/default/pods";

/// Polls `f` until it gives a value, within [`CONVERGE`].
async fn until(what: &str, f: impl AsyncFnMut() -> Option<Value>) -> Value {
    eventually_within(what, CONVERGE, f).await
}

async fn pods(c: &Client, selector: &str) -> Vec<Value> {
    let r = c.get(&format!("{PODS}?labelSelector={selector}")).await;
    r.json()["items"].as_array().cloned().unwrap_or_default()
}

fn running_and_ready(p: &Value) -> bool {
    p["status"]["phase"] == "Running"
        && p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

fn controller_of(p: &Value) -> (String, String) {
    let r = &p["metadata"]["ownerReferences"][0];
    assert_eq!(r["controller"], true, "{p}");
    (
        r["kind"].as_str().unwrap_or("").to_owned(),
        r["name"].as_str().unwrap_or("").to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_get_running_pods_and_converge_with_nodes() {
    let s = TestServer::builder().nodes(2).start().await.unwrap();
    let c = Client::new(&s);
    let nodes = c.get("/api/v1/nodes").await.json();
    assert_eq!(nodes["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        nodes["items"][0]["status"]["conditions"][3]["type"],
        "Ready"
    );
    let r = c
        .post(
            "/apis/apps/v1/namespaces/default/deployments",
            &deployment("web", 3),
        )
        .await;
    assert_eq!(r.status, 201);
    let d = until("the Deployment available", || async {
        let d = c
            .get("/apis/apps/v1/namespaces/default/deployments/web")
            .await
            .json();
        (d["status"]["availableReplicas"] == 3
            && d["status"]["readyReplicas"] == 3
            && d["status"]["updatedReplicas"] == 3)
            .then_some(d)
    })
    .await;
    let available = d["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Available")
        .cloned()
        .unwrap();
    assert_eq!(available["status"], "True");
    let pods_now = pods(&c, "app%3Dweb").await;
    assert_eq!(pods_now.len(), 3);
    for p in &pods_now {
        assert!(running_and_ready(p), "{p}");
        let (kind, rs) = controller_of(p);
        assert_eq!(kind, "ReplicaSet");
        let hash = p["metadata"]["labels"]["pod-template-hash"]
            .as_str()
            .unwrap();
        assert_eq!(rs, format!("web-{hash}"));
        let name = p["metadata"]["name"].as_str().unwrap();
        assert!(
            name.starts_with(&format!("{rs}-")) && name.len() == rs.len() + 6,
            "{name}"
        );
        assert!(p["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| n.starts_with("node-")));
        assert!(p["status"]["podIP"]
            .as_str()
            .is_some_and(|ip| ip.starts_with("10.244.")));
        assert_eq!(p["spec"]["restartPolicy"], "Always");
    }
    let rs_name = controller_of(&pods_now[0]).1;
    let rs = c
        .get(&format!(
            "/apis/apps/v1/namespaces/default/replicasets/{rs_name}"
        ))
        .await
        .json();
    assert_eq!(rs["status"]["readyReplicas"], 3);

    // scaled down: the surplus pods go, the status follows
    let r = c
        .patch(
            "/apis/apps/v1/namespaces/default/deployments/web/scale",
            "application/merge-patch+json",
            r#"{"spec":{"replicas":1}}"#,
        )
        .await;
    assert_eq!(r.status, 200);
    until("one pod left", || async {
        let n = pods(&c, "app%3Dweb").await.len();
        let d = c
            .get("/apis/apps/v1/namespaces/default/deployments/web")
            .await
            .json();
        (n == 1 && d["status"]["availableReplicas"] == 1 && d["status"]["replicas"] == 1)
            .then_some(d)
    })
    .await;

    // deleted: its ReplicaSet and pods are garbage collected
    assert_eq!(
        c.delete("/apis/apps/v1/namespaces/default/deployments/web", None)
            .await
            .status,
        200
    );
    until("the pods collected", || async {
        let rs = c
            .get("/apis/apps/v1/namespaces/default/replicasets")
            .await
            .json();
        (pods(&c, "app%3Dweb").await.is_empty()
            && rs["items"].as_array().is_some_and(Vec::is_empty))
        .then_some(json!(null))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulsets_daemonsets_and_jobs_get_pods_with_nodes() {
    let s = TestServer::builder().nodes(2).start().await.unwrap();
    let c = Client::new(&s);
    let tpl = |app: &str, restart: &str| {
        json!({"metadata": {"labels": {"app": app}}, "spec": {"restartPolicy": restart,
            "containers": [{"name": "c", "image": "busybox:1.36"}]}})
    };
    let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}}, "template": tpl("db", "Always")}});
    assert_eq!(
        c.post("/apis/apps/v1/namespaces/default/statefulsets", &sts)
            .await
            .status,
        201
    );
    let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": tpl("agent", "Always")}});
    assert_eq!(
        c.post("/apis/apps/v1/namespaces/default/daemonsets", &ds)
            .await
            .status,
        201
    );
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi"},
        "spec": {"completions": 2, "template": tpl("pi", "Never")}});
    assert_eq!(
        c.post("/apis/batch/v1/namespaces/default/jobs", &job)
            .await
            .status,
        201
    );

    let sts = until("the StatefulSet ready", || async {
        let v = c
            .get("/apis/apps/v1/namespaces/default/statefulsets/db")
            .await
            .json();
        (v["status"]["readyReplicas"] == 3 && v["status"]["currentReplicas"] == 3).then_some(v)
    })
    .await;
    assert_eq!(sts["status"]["observedGeneration"], 1);
    let mut names: Vec<String> = pods(&c, "app%3Ddb")
        .await
        .iter()
        .map(|p| {
            assert!(running_and_ready(p), "{p}");
            assert_eq!(p["spec"]["subdomain"], "db");
            assert_eq!(
                p["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"],
                p["metadata"]["name"]
            );
            p["metadata"]["name"].as_str().unwrap().to_owned()
        })
        .collect();
    names.sort();
    assert_eq!(names, ["db-0", "db-1", "db-2"]);

    let ds = until("one daemon pod per node", || async {
        let v = c
            .get("/apis/apps/v1/namespaces/default/daemonsets/agent")
            .await
            .json();
        (v["status"]["numberReady"] == 2 && v["status"]["desiredNumberScheduled"] == 2).then_some(v)
    })
    .await;
    assert_eq!(ds["status"]["numberAvailable"], 2);
    let mut on: Vec<String> = pods(&c, "app%3Dagent")
        .await
        .iter()
        .map(|p| p["spec"]["nodeName"].as_str().unwrap().to_owned())
        .collect();
    on.sort();
    assert_eq!(on, ["node-0", "node-1"]);

    let job = until("the Job complete", || async {
        let v = c
            .get("/apis/batch/v1/namespaces/default/jobs/pi")
            .await
            .json();
        let complete = v["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Complete" && c["status"] == "True")
        });
        complete.then_some(v)
    })
    .await;
    assert_eq!(job["status"]["succeeded"], 2);
    assert!(job["status"]["completionTime"].is_string());
    let job_pods = pods(&c, "job-name%3Dpi").await;
    assert_eq!(job_pods.len(), 2);
    assert!(job_pods.iter().all(|p| p["status"]["phase"] == "Succeeded"));

    // scaled down, highest ordinals first
    let r = c
        .patch(
            "/apis/apps/v1/namespaces/default/statefulsets/db/scale",
            "application/merge-patch+json",
            r#"{"spec":{"replicas":1}}"#,
        )
        .await;
    assert_eq!(r.status, 200);
    until("db-1 and db-2 gone", || async {
        let left: Vec<String> = pods(&c, "app%3Ddb")
            .await
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap_or("").to_owned())
            .collect();
        (left == ["db-0"]).then_some(json!(left))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_nodes_pods_wait_and_a_node_starts_them() {
    let s = TestServer::start().await.unwrap();
    let c = Client::new(&s);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lonely", "labels": {"app": "lonely"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let r = c.post(PODS, &pod).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.json()["status"]["phase"], "Pending");
    assert_eq!(
        r.json()["spec"]["containers"][0]["imagePullPolicy"],
        "Always"
    );
    // a Deployment without nodes: the simulated status, no pods
    assert_eq!(
        c.post(
            "/apis/apps/v1/namespaces/default/deployments",
            &deployment("web", 2)
        )
        .await
        .status,
        201
    );
    until("the simulated status", || async {
        let d = c
            .get("/apis/apps/v1/namespaces/default/deployments/web")
            .await
            .json();
        (d["status"]["availableReplicas"] == 2).then_some(d)
    })
    .await;
    assert!(pods(&c, "app%3Dweb").await.is_empty());
    assert!(c.get(&format!("{PODS}/lonely")).await.json()["spec"]
        .get("nodeName")
        .is_none());

    // a Node arrives: the waiting pod runs, the Deployment gets its pods
    s.add_node("late").unwrap();
    until("the pod running on the node", || async {
        let p = c.get(&format!("{PODS}/lonely")).await.json();
        (running_and_ready(&p) && p["spec"]["nodeName"] == "late").then_some(p)
    })
    .await;
    until("the Deployment's pods", || async {
        let ps = pods(&c, "app%3Dweb").await;
        (ps.len() == 2 && ps.iter().all(running_and_ready)).then_some(json!(ps.len()))
    })
    .await;
    // the admin call adds nodes too
    let r = c
        .send_raw("POST", "/__admin/nodes?name=admin-node", None, None, None)
        .await;
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        c.get("/api/v1/nodes/admin-node").await.json()["status"]["conditions"][3]["status"],
        "True"
    );
}
