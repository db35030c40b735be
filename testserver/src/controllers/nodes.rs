//! The server's Nodes: the Ready Node a test adds
//! ([`TestServer::add_node`](crate::TestServer::add_node), the builder's
//! `nodes`, `POST /__admin/nodes`), which Nodes pods may run on, the
//! choice of a Node for a pod (round robin over the Nodes its
//! `nodeSelector` admits) and pod IPs. Pods run only when the server has
//! a usable Node; without one the simulators keep today's behaviour.

use crate::meta;
use crate::rest::{Core, Subresource, WriteOptions};
use crate::status::StatusError;
use crate::store::StoredObject;
use crate::timeutil;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The kubelet version Nodes report (the API level the server serves).
const KUBELET_VERSION: &str = "v1.33.0";

/// Whether pods may run on `node`: not cordoned, and Ready (a Node
/// written without a kubelet's status is not, as kube's node lifecycle
/// controller taints it not-ready).
fn usable(node: &Value) -> bool {
    if node["spec"]["unschedulable"] == true {
        return false;
    }
    node["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .is_some_and(|c| c["status"] == "True")
}

/// The Nodes pods may run on, by name (none while
/// [`set_nodes_ready(false)`](crate::TestServer::set_nodes_ready)).
pub(crate) fn usable_nodes(core: &Core) -> Vec<Arc<StoredObject>> {
    if !core.nodes_ready.load(Ordering::SeqCst) {
        return Vec::new();
    }
    let nodes = core.resource_store(&crate::builtin::nodes());
    if nodes.len() == 0 {
        return Vec::new();
    }
    nodes
        .keys_with_prefix("")
        .into_iter()
        .filter_map(|k| nodes.get(&k))
        .filter(|n| usable(n.value()))
        .collect()
}

/// Whether the server has a Node pods may run on.
pub(crate) fn has_nodes(core: &Core) -> bool {
    !usable_nodes(core).is_empty()
}

fn selects(node: &Value, pod: &Value) -> bool {
    let labels = meta::labels(node);
    pod["spec"]["nodeSelector"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
}

/// The Nodes a pod's `nodeSelector` admits.
pub(crate) fn nodes_for(core: &Core, pod: &Value) -> Vec<Arc<StoredObject>> {
    usable_nodes(core)
        .into_iter()
        .filter(|n| selects(n.value(), pod))
        .collect()
}

/// The Node for a pod: the next in turn of those that admit it.
pub(crate) fn pick_node(core: &Core, pod: &Value) -> Option<Arc<StoredObject>> {
    let nodes = nodes_for(core, pod);
    if nodes.is_empty() {
        return None;
    }
    let turn = core.scheduler_turn.fetch_add(1, Ordering::Relaxed);
    nodes.get(turn % nodes.len()).cloned()
}

/// A Node's internal IP.
pub(crate) fn internal_ip(node: &Value) -> String {
    node["status"]["addresses"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["type"] == "InternalIP"))
        .and_then(|x| x["address"].as_str())
        .unwrap_or("")
        .to_owned()
}

/// A new pod IP from `10.244.0.0/16` (never reused while the server runs).
pub(crate) fn next_pod_ip(core: &Core) -> String {
    let n = core.pod_ips.fetch_add(1, Ordering::Relaxed);
    format!("10.244.{}.{}", (n / 254) % 256, n % 254 + 1)
}

/// The status a healthy kubelet reports for a Node.
fn node_status(name: &str, index: u32) -> Value {
    let now = timeutil::now_rfc3339();
    let condition = |t: &str, status: &str, reason: &str, message: &str| {
        json!({"type": t, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let capacity =
        json!({"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"});
    json!({
        "capacity": capacity,
        "allocatable": capacity,
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": format!("172.18.{}.{}", index / 250, index % 250 + 2)},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "architecture": "amd64", "bootID": "", "containerRuntimeVersion": "containerd://2.0.0",
            "kernelVersion": "6.1.0", "kubeProxyVersion": "", "kubeletVersion": KUBELET_VERSION,
            "machineID": "", "operatingSystem": "linux", "osImage": "kcontrol-testserver",
            "systemUUID": ""
        }
    })
}

/// Creates a Ready Node named `name`, as a kubelet registers one.
pub(crate) fn add_node(core: &Core, name: &str) -> Result<Arc<StoredObject>, StatusError> {
    let info = crate::builtin::nodes();
    let index = core.node_count.fetch_add(1, Ordering::Relaxed);
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}},
        "spec": {"podCIDR": format!("10.244.{index}.0/24"), "podCIDRs": [format!("10.244.{index}.0/24")]}
    });
    let kubelet = WriteOptions {
        field_manager: Some("kubelet".into()),
        ..WriteOptions::default()
    };
    core.create(&info, "", node, &kubelet)?;
    let status = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": node_status(name, index)});
    let r = core.update(&info, "", name, status, Subresource::Status, &kubelet)?;
    Ok(r.object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usable_and_selected_nodes() {
        let ready = json!({"metadata": {"labels": {"disk": "ssd"}}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        let cordoned = json!({"spec": {"unschedulable": true}});
        assert!(usable(&ready) && !usable(&not_ready) && !usable(&cordoned));
        assert!(!usable(&json!({})));
        let pod = json!({"spec": {"nodeSelector": {"disk": "ssd"}}});
        assert!(selects(&ready, &pod));
        assert!(!selects(&json!({}), &pod));
        assert_eq!(
            internal_ip(&json!({"status": node_status("n", 3)})),
            "172.18.0.5"
        );
    }
}
