//! The Deployment status simulator: a configurable while after a
//! Deployment's spec changes, its status reports every replica updated,
//! ready and available for the new generation (what a healthy cluster
//! reports once the rollout finished); in a cluster without nodes
//! ([`TestServer::set_nodes_ready`](crate::TestServer::set_nodes_ready)),
//! what kube-controller-manager reports there: the generation observed,
//! every replica unavailable.

use crate::meta;
use crate::rest::Core;
use crate::timeutil;
use serde_json::{json, Value};
use std::sync::Arc;

/// Schedules a status update for a Deployment after the simulator's delay.
pub(crate) fn schedule(core: &Arc<Core>, namespace: String, name: String) {
    let Some(delay) = *core.deployment_sim.read() else {
        return;
    };
    let core = core.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        simulate(&core, &namespace, &name);
    });
}

/// The status a cluster without nodes reports for `obj`.
fn unavailable_status(obj: &Value) -> Value {
    let replicas = obj["spec"]["replicas"].as_i64().unwrap_or(1);
    let now = timeutil::now_rfc3339();
    let mut status = json!({
        "observedGeneration": meta::generation(obj),
        "conditions": [
            {"type": "Available", "status": "False", "lastUpdateTime": now, "lastTransitionTime": now,
             "reason": "MinimumReplicasUnavailable", "message": "Deployment does not have minimum availability."}
        ]
    });
    if replicas > 0 {
        if let Some(m) = status.as_object_mut() {
            for f in ["replicas", "updatedReplicas", "unavailableReplicas"] {
                m.insert(f.into(), json!(replicas));
            }
        }
    }
    status
}

/// The status a finished rollout of `obj` reports.
pub(crate) fn desired_status(obj: &Value, previous: &Value) -> Value {
    let replicas = obj["spec"]["replicas"].as_i64().unwrap_or(1);
    let name = meta::name(obj);
    let now = timeutil::now_rfc3339();
    let keep_time = |t: &str| -> Value {
        previous["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == t && c["status"] == "True"))
            .map_or_else(|| json!(now), |c| c["lastTransitionTime"].clone())
    };
    let mut status = json!({
        "observedGeneration": meta::generation(obj),
        "conditions": [
            {"type": "Available", "status": "True", "lastUpdateTime": now, "lastTransitionTime": keep_time("Available"),
             "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."},
            {"type": "Progressing", "status": "True", "lastUpdateTime": now, "lastTransitionTime": keep_time("Progressing"),
             "reason": "NewReplicaSetAvailable", "message": format!("ReplicaSet \"{name}-{}\" has successfully progressed.", template_hash(obj))}
        ]
    });
    if replicas > 0 {
        if let Some(m) = status.as_object_mut() {
            for f in [
                "replicas",
                "updatedReplicas",
                "readyReplicas",
                "availableReplicas",
            ] {
                m.insert(f.into(), json!(replicas));
            }
        }
    }
    status
}

fn template_hash(obj: &Value) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    obj["spec"]["template"].to_string().hash(&mut h);
    let alphabet = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = h.finish();
    (0..10)
        .map(|_| {
            let i = usize::try_from(n % alphabet.len() as u64).unwrap_or(0);
            n /= alphabet.len() as u64;
            char::from(alphabet.get(i).copied().unwrap_or(b'x'))
        })
        .collect()
}

fn same_except_times(a: &Value, b: &Value) -> bool {
    fn strip(v: &Value) -> Value {
        let mut v = v.clone();
        if let Some(cs) = v.get_mut("conditions").and_then(Value::as_array_mut) {
            for c in cs {
                if let Some(m) = c.as_object_mut() {
                    m.remove("lastUpdateTime");
                    m.remove("lastTransitionTime");
                }
            }
        }
        v
    }
    strip(a) == strip(b)
}

/// Writes the finished-rollout status if the Deployment does not show it.
pub(crate) fn simulate(core: &Core, namespace: &str, name: &str) {
    let info = crate::builtin::deployments();
    let rs = core.resource_store(&info);
    let key = format!("{namespace}/{name}");
    let mut tx = rs.write(&core.store);
    let Some(cur) = tx.get(&key) else { return };
    if meta::is_deleting(cur.value()) {
        return;
    }
    let previous = cur.value().get("status").cloned().unwrap_or(Value::Null);
    let status = if core.nodes_ready.load(std::sync::atomic::Ordering::SeqCst) {
        desired_status(cur.value(), &previous)
    } else {
        unavailable_status(cur.value())
    };
    if same_except_times(&status, &previous) {
        return;
    }
    let mut new = cur.value().clone();
    if let Some(m) = new.as_object_mut() {
        m.insert("status".into(), status);
    }
    let writer = crate::fields::Writer {
        manager: "kube-controller-manager",
        api_version: info.api_version(),
        subresource: "status",
    };
    crate::fields::record_update(&info, Some(cur.value()), &mut new, &writer);
    if let Err(e) = tx.put(&key, new) {
        tracing::warn!(error = %e, "deployment simulator could not store status");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_follows_replicas() {
        let d = json!({"metadata": {"name": "web", "generation": 3}, "spec": {"replicas": 4, "template": {}}});
        let s = desired_status(&d, &Value::Null);
        assert_eq!(s["observedGeneration"], 3);
        assert_eq!(s["availableReplicas"], 4);
        assert_eq!(s["readyReplicas"], 4);
        let zero = json!({"metadata": {"name": "web", "generation": 1}, "spec": {"replicas": 0}});
        assert!(desired_status(&zero, &Value::Null)
            .get("availableReplicas")
            .is_none());
        assert!(same_except_times(&s, &desired_status(&d, &s)));
    }
}
