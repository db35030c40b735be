//! The scheduler and kubelets of a healthy cluster, for pods on the
//! server's Nodes: a pod without a node is bound to one (`spec.nodeName`,
//! the `PodScheduled` condition), then its containers "start": the pod
//! reports Running and Ready with a pod IP. Pods of Jobs run to
//! completion at once (Succeeded, containers terminated with exit code 0).
//! Nothing happens without Nodes (pods stay Pending, as in a cluster
//! without kubelets).

use super::nodes;
use super::pods::{finished, ready};
use crate::meta;
use crate::rest::{Core, Subresource, WriteOptions};
use crate::status::StatusError;
use crate::timeutil;
use serde_json::{json, Value};

fn writer(manager: &str) -> WriteOptions {
    WriteOptions {
        field_manager: Some(manager.into()),
        ..WriteOptions::default()
    }
}

/// Whether the pod belongs to a Job (and so runs to completion).
fn runs_to_completion(pod: &Value) -> bool {
    meta::owner_refs(pod)
        .iter()
        .any(|r| r["kind"] == "Job" && r["controller"] == true && r["apiVersion"] == "batch/v1")
}

/// A 64-hex-digit id (container ids, image digests), stable per input.
fn hex_id(seed: &str) -> String {
    let mut out = String::with_capacity(64);
    let mut n: u64 = 0xcbf2_9ce4_8422_2325;
    while out.len() < 64 {
        for b in seed.bytes().chain(out.len().to_le_bytes()) {
            n ^= u64::from(b);
            n = n.wrapping_mul(0x0100_0000_01b3);
        }
        out.push_str(&format!("{n:016x}"));
    }
    out.truncate(64);
    out
}

fn container_status(pod: &Value, c: &Value, done: bool, now: &str) -> Value {
    let name = c["name"].as_str().unwrap_or("");
    let image = c["image"].as_str().unwrap_or("");
    let state = if done {
        json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now,
            "containerID": format!("containerd://{}", hex_id(&format!("{}/{name}", meta::meta_str(pod, "uid"))))}})
    } else {
        json!({"running": {"startedAt": now}})
    };
    json!({"name": name, "image": image, "imageID": format!("{image}@sha256:{}", hex_id(image)),
        "containerID": format!("containerd://{}", hex_id(&format!("{}/{name}", meta::meta_str(pod, "uid")))),
        "ready": !done, "started": !done, "restartCount": 0, "state": state})
}

/// The status a kubelet reports once the pod's containers started (or,
/// for a Job's pod, finished).
fn started_status(pod: &Value, node: &Value, pod_ip: &str) -> Value {
    let now = timeutil::now_rfc3339();
    let done = runs_to_completion(pod);
    let cond = |t: &str, ok: bool| {
        let mut c = json!({"type": t, "status": if ok { "True" } else { "False" }, "lastTransitionTime": now});
        if !ok {
            c["reason"] = json!("PodCompleted");
        }
        c
    };
    let statuses = |list: &str, finished_anyway: bool| -> Vec<Value> {
        pod["spec"][list]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| container_status(pod, c, done || finished_anyway, &now))
            .collect()
    };
    let host_ip = nodes::internal_ip(node);
    let mut status = json!({
        "phase": if done { "Succeeded" } else { "Running" },
        "conditions": [cond("PodReadyToStartContainers", !done), cond("Initialized", true), cond("Ready", !done),
            cond("ContainersReady", !done), cond("PodScheduled", true)],
        "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
        "startTime": now,
        "containerStatuses": statuses("containers", false),
        "qosClass": pod["status"]["qosClass"].as_str().unwrap_or("BestEffort"),
    });
    let init = statuses("initContainers", true);
    if !init.is_empty() {
        status["initContainerStatuses"] = Value::Array(init);
    }
    status
}

/// Binds an unscheduled pod to a Node and starts it; does nothing to pods
/// that run already, have finished or are terminating, or when no Node
/// admits them.
pub(super) fn sync_pod(core: &Core, namespace: &str, name: &str) -> Result<(), StatusError> {
    let info = crate::builtin::pods();
    let pod = match core.get(&info, namespace, name) {
        Ok(p) => p.value().clone(),
        Err(e) if e.code == 404 => return Ok(()),
        Err(e) => return Err(e),
    };
    if meta::is_deleting(&pod) || finished(&pod) || ready(&pod) {
        return Ok(());
    }
    let node_name = pod["spec"]["nodeName"].as_str().unwrap_or("").to_owned();
    let node = if node_name.is_empty() {
        let Some(node) = nodes::pick_node(core, &pod) else {
            return Ok(());
        };
        let mut bound = pod.clone();
        bound["spec"]["nodeName"] = json!(node.name());
        core.update(
            &info,
            namespace,
            name,
            bound,
            Subresource::Main,
            &writer("kube-scheduler"),
        )?;
        node
    } else {
        match core.get(&crate::builtin::nodes(), "", &node_name) {
            Ok(n) => n,
            Err(e) if e.code == 404 => return Ok(()),
            Err(e) => return Err(e),
        }
    };
    let pod = core.get(&info, namespace, name)?.value().clone();
    let ip = nodes::next_pod_ip(core);
    let mut new = pod.clone();
    new["status"] = started_status(&pod, node.value(), &ip);
    core.update(
        &info,
        namespace,
        name,
        new,
        Subresource::Status,
        &writer("kubelet"),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn started_pods_report_running_or_completed() {
        let node =
            json!({"status": {"addresses": [{"type": "InternalIP", "address": "172.18.0.2"}]}});
        let pod = json!({"metadata": {"uid": "u"}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}, "status": {"qosClass": "BestEffort"}});
        let s = started_status(&pod, &node, "10.244.0.1");
        assert_eq!(s["phase"], "Running");
        assert_eq!(s["hostIP"], "172.18.0.2");
        assert_eq!(s["containerStatuses"][0]["ready"], true);
        assert!(ready(&json!({"status": s})));
        let mut job_pod = pod.clone();
        job_pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j1", "controller": true}]);
        let s = started_status(&job_pod, &node, "10.244.0.2");
        assert_eq!(s["phase"], "Succeeded");
        assert_eq!(
            s["containerStatuses"][0]["state"]["terminated"]["exitCode"],
            0
        );
        assert_eq!(hex_id("x").len(), 64);
        assert_eq!(hex_id("x"), hex_id("x"));
        assert_ne!(hex_id("x"), hex_id("y"));
    }
}
