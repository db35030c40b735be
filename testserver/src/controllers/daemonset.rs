//! The DaemonSet controller, when the server has Nodes: one pod per Node
//! the template's `nodeSelector` admits (bound to it by `spec.nodeName`),
//! pods of an older template generation or on Nodes no longer admitted
//! removed, and the status (desired, current, ready, up-to-date,
//! available).

use super::nodes;
use super::pods::{self, owned_pods, ready};
use crate::meta;
use crate::rest::Core;
use crate::status::StatusError;
use serde_json::{json, Map, Value};

const GENERATION_LABEL: &str = "pod-template-generation";

/// Brings one DaemonSet's pods and status up to date.
pub(super) fn sync(core: &Core, namespace: &str, name: &str) -> Result<(), StatusError> {
    let info = crate::builtin::get("apps", "daemonsets");
    let ds = match core.get(&info, namespace, name) {
        Ok(r) => r.value().clone(),
        Err(e) if e.code == 404 => return Ok(()),
        Err(e) => return Err(e),
    };
    if meta::is_deleting(&ds) {
        return Ok(());
    }
    let generation = meta::generation(&ds).to_string();
    let eligible: Vec<String> = nodes::nodes_for(core, &ds["spec"]["template"])
        .iter()
        .map(|n| n.name().to_owned())
        .collect();
    let pods = owned_pods(core, &ds);
    for p in &pods {
        let v = p.value();
        let node = v["spec"]["nodeName"].as_str().unwrap_or("");
        let outdated = v["metadata"]["labels"][GENERATION_LABEL] != generation.as_str();
        if !eligible.iter().any(|n| n == node) || outdated {
            pods::delete_pod(core, p)?;
        }
    }
    let pods = owned_pods(core, &ds);
    for node in &eligible {
        if pods
            .iter()
            .any(|p| p.value()["spec"]["nodeName"] == node.as_str())
        {
            continue;
        }
        let labels: Map<String, Value> = [
            (
                "controller-revision-hash",
                super::deployment::template_hash(&ds),
            ),
            (GENERATION_LABEL, generation.clone()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), json!(v)))
        .collect();
        let mut pod = pods::pod_from_template(&ds, &ds["spec"]["template"], None, labels);
        pod["spec"]["nodeName"] = json!(node);
        pods::create_pod(core, namespace, pod)?;
    }
    let pods = owned_pods(core, &ds);
    let ready_count = pods.iter().filter(|p| ready(p.value())).count();
    let mut status = json!({
        "currentNumberScheduled": pods.len(),
        "desiredNumberScheduled": eligible.len(),
        "numberMisscheduled": 0,
        "numberReady": ready_count,
        "observedGeneration": meta::generation(&ds),
    });
    for (field, n) in [
        ("updatedNumberScheduled", pods.len()),
        ("numberAvailable", ready_count),
        (
            "numberUnavailable",
            eligible.len().saturating_sub(ready_count),
        ),
    ] {
        if n > 0 {
            status[field] = json!(n);
        }
    }
    pods::write_status(core, &info, &ds, status)
}
