//! The ReplicaSet controller, when the server has Nodes: it keeps
//! `spec.replicas` pods from the template (named `<replicaset>-<random>`,
//! owned by the ReplicaSet), deletes the surplus (not-ready and newest
//! first) and reports replicas, ready and available counts. Without
//! Nodes the Deployment simulator reports ReplicaSets' status instead.

use super::pods::{self, owned_pods, ready};
use crate::meta;
use crate::rest::Core;
use crate::status::StatusError;
use serde_json::{json, Map, Value};

/// Brings one ReplicaSet's pods and status up to date.
pub(super) fn sync(core: &Core, namespace: &str, name: &str) -> Result<(), StatusError> {
    let info = crate::builtin::replicasets();
    let rs = match core.get(&info, namespace, name) {
        Ok(r) => r.value().clone(),
        Err(e) if e.code == 404 => return Ok(()),
        Err(e) => return Err(e),
    };
    if meta::is_deleting(&rs) {
        return Ok(());
    }
    let want = usize::try_from(rs["spec"]["replicas"].as_i64().unwrap_or(1)).unwrap_or(0);
    let mut pods = owned_pods(core, &rs);
    for _ in pods.len()..want {
        let pod = pods::pod_from_template(&rs, &rs["spec"]["template"], None, Map::new());
        pods::create_pod(core, namespace, pod)?;
    }
    if pods.len() > want {
        // not-ready first, then the newest
        pods.sort_by_key(|p| {
            (
                ready(p.value()),
                std::cmp::Reverse(meta::meta_str(p.value(), "creationTimestamp").to_owned()),
            )
        });
        for p in pods.iter().take(pods.len() - want) {
            pods::delete_pod(core, p)?;
        }
    }
    let pods = owned_pods(core, &rs);
    pods::write_status(core, &info, &rs, status(&rs, &pods))
}

fn status(rs: &Value, pods: &[std::sync::Arc<crate::store::StoredObject>]) -> Value {
    let template_labels = rs["spec"]["template"]["metadata"]["labels"].clone();
    let labelled = pods
        .iter()
        .filter(|p| {
            let labels = &p.value()["metadata"]["labels"];
            template_labels
                .as_object()
                .into_iter()
                .flatten()
                .all(|(k, v)| labels.get(k) == Some(v))
        })
        .count();
    let ready_count = pods.iter().filter(|p| ready(p.value())).count();
    let mut s = json!({"replicas": pods.len(), "observedGeneration": meta::generation(rs)});
    for (field, n) in [
        ("fullyLabeledReplicas", labelled),
        ("readyReplicas", ready_count),
        ("availableReplicas", ready_count),
    ] {
        if n > 0 {
            s[field] = json!(n);
        }
    }
    s
}
