//! The Deployment simulator: a configurable while after a Deployment's
//! spec changes, it keeps one ReplicaSet per template revision (kube's
//! names and revision annotations). When the server has Nodes, the
//! ReplicaSets' pods are real (the ReplicaSet controller's) and the
//! Deployment's status adds up its ReplicaSets'. Without Nodes, the
//! status reports every replica updated, ready and available for the new
//! generation (what a healthy cluster reports once the rollout finished);
//! with Nodes turned off
//! ([`TestServer::set_nodes_ready`](crate::TestServer::set_nodes_ready)),
//! what kube-controller-manager reports in a cluster without nodes: the
//! generation observed, every replica unavailable.

use super::pods::controlled_by;
use super::{nodes, Target};
use crate::meta;
use crate::rest::{ControllerMsg, Core, DeleteOptions, Subresource, WriteOptions};
use crate::status::StatusError;
use crate::timeutil;
use serde_json::{json, Value};
use std::sync::Arc;

/// Schedules a sync of a Deployment after the simulator's delay.
pub(crate) fn schedule(core: &Arc<Core>, namespace: String, name: String) {
    let Some(delay) = *core.deployment_sim.read() else {
        return;
    };
    let core = core.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        core.notify(ControllerMsg::Sync(Target::deployment(&namespace, &name)));
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

/// The template as a canonical string: keys sorted, nulls dropped (a
/// template sent back by `kubectl rollout undo` carries
/// `creationTimestamp: null`, and must hash as the revision it restores).
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m
                .iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, _)| k)
                .collect();
            keys.sort();
            out.push('{');
            for k in keys {
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&m[k], out);
                out.push(',');
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for x in a {
                canonical(x, out);
                out.push(',');
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// kube's `pod-template-hash` of an object's `spec.template`.
pub(crate) fn template_hash(obj: &Value) -> String {
    let mut text = String::new();
    canonical(&obj["spec"]["template"], &mut text);
    // FNV-1a: stable across runs and Rust versions
    let mut n: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        n ^= u64::from(b);
        n = n.wrapping_mul(0x0100_0000_01b3);
    }
    let alphabet = b"bcdfghjklmnpqrstvwxz2456789";
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

/// The annotation carrying a revision, on Deployments and ReplicaSets.
const REVISION: &str = "deployment.kubernetes.io/revision";
/// The label a ReplicaSet adds to its selector and template.
const HASH_LABEL: &str = "pod-template-hash";

fn revision(obj: &Value) -> i64 {
    obj["metadata"]["annotations"][REVISION]
        .as_str()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// The ReplicaSet of `d`'s current template, as kube-controller-manager
/// creates it.
fn new_replica_set(d: &Value, hash: &str, rev: i64) -> Value {
    let name = meta::name(d);
    let mut annotations: serde_json::Map<String, Value> = meta::annotations(d)
        .into_iter()
        .filter(|(k, _)| k != "kubectl.kubernetes.io/last-applied-configuration")
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    annotations.insert(REVISION.into(), json!(rev.to_string()));
    let mut template = d["spec"]["template"].clone();
    let labels = meta::ensure_object(
        meta::metadata_mut(&mut template)
            .entry("labels")
            .or_insert(Value::Null),
    );
    labels.insert(HASH_LABEL.into(), json!(hash));
    let rs_labels = labels.clone();
    let mut selector = d["spec"]["selector"].clone();
    meta::ensure_object(
        meta::ensure_object(&mut selector)
            .entry("matchLabels")
            .or_insert(Value::Null),
    )
    .insert(HASH_LABEL.into(), json!(hash));
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {
            "name": format!("{name}-{hash}"),
            "labels": rs_labels,
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                "uid": meta::meta_str(d, "uid"), "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {"replicas": d["spec"]["replicas"].clone(), "selector": selector, "template": template}
    })
}

/// Keeps one ReplicaSet per template revision, as the Deployment
/// controller does: the current template's holds the replicas and the
/// newest revision (an older one brought back by `rollout undo` gets a new
/// revision), the others are scaled to zero and pruned to
/// `revisionHistoryLimit`. Returns the current revision, which the caller
/// writes into the Deployment's annotation with its status (one write, as
/// before ReplicaSets existed, so informers see no extra event).
fn sync_replica_sets(
    core: &Core,
    namespace: &str,
    name: &str,
    with_nodes: bool,
) -> Result<Option<i64>, StatusError> {
    let d_info = crate::builtin::deployments();
    let d = core.get(&d_info, namespace, name)?;
    let d = d.value();
    if meta::is_deleting(d) {
        return Ok(None);
    }
    let mut owned = owned_replica_sets(core, d);
    owned.sort_by_key(revision);
    let hash = template_hash(d);
    let current_name = format!("{name}-{hash}");
    let opts = WriteOptions {
        field_manager: Some("kube-controller-manager".into()),
        ..WriteOptions::default()
    };
    let current_rev = sync_current_replica_set(core, namespace, d, &owned, &hash, &opts)?;
    retire_old_replica_sets(core, namespace, d, &owned, &current_name, &opts)?;
    if !with_nodes {
        // each ReplicaSet reports its replicas (ready when nodes are); with
        // nodes, the ReplicaSet controller reports what its pods do
        report_replica_sets(core, namespace, d, &opts)?;
    }
    Ok(Some(current_rev))
}

/// Creates the ReplicaSet of `d`'s current template, or gives the existing
/// one `d`'s replicas and the newest revision. `owned` is sorted by
/// revision. Returns the current revision.
fn sync_current_replica_set(
    core: &Core,
    namespace: &str,
    d: &Value,
    owned: &[Value],
    hash: &str,
    opts: &WriteOptions,
) -> Result<i64, StatusError> {
    let rs_info = crate::builtin::replicasets();
    let current_name = format!("{}-{hash}", meta::name(d));
    let max_rev = owned.iter().map(revision).max().unwrap_or(0);
    let replicas = &d["spec"]["replicas"];
    let Some(cur) = owned.iter().find(|v| meta::name(v) == current_name) else {
        core.create(
            &rs_info,
            namespace,
            new_replica_set(d, hash, max_rev + 1),
            opts,
        )?;
        return Ok(max_rev + 1);
    };
    let rev = if revision(cur) == max_rev {
        max_rev
    } else {
        max_rev + 1
    };
    if rev != revision(cur) || cur["spec"]["replicas"] != *replicas {
        let mut new = cur.clone();
        new["spec"]["replicas"] = replicas.clone();
        meta::ensure_object(
            meta::metadata_mut(&mut new)
                .entry("annotations")
                .or_insert(Value::Null),
        )
        .insert(REVISION.into(), json!(rev.to_string()));
        core.update(
            &rs_info,
            namespace,
            &current_name,
            new,
            Subresource::Main,
            opts,
        )?;
    }
    Ok(rev)
}

/// Deletes the oldest ReplicaSets beyond `revisionHistoryLimit` and scales
/// the other old ones (all but `current_name`) to zero.
fn retire_old_replica_sets(
    core: &Core,
    namespace: &str,
    d: &Value,
    owned: &[Value],
    current_name: &str,
    opts: &WriteOptions,
) -> Result<(), StatusError> {
    let rs_info = crate::builtin::replicasets();
    let limit =
        usize::try_from(d["spec"]["revisionHistoryLimit"].as_i64().unwrap_or(10)).unwrap_or(0);
    let old: Vec<&Value> = owned
        .iter()
        .filter(|v| meta::name(v) != current_name)
        .collect();
    let prune = old.len().saturating_sub(limit);
    for (i, v) in old.iter().enumerate() {
        let rs_name = meta::name(v);
        if i < prune {
            let _ = core.delete(&rs_info, namespace, rs_name, &DeleteOptions::default());
        } else if v["spec"]["replicas"] != 0 {
            let mut new = (*v).clone();
            new["spec"]["replicas"] = json!(0);
            core.update(&rs_info, namespace, rs_name, new, Subresource::Main, opts)?;
        }
    }
    Ok(())
}

/// Without Nodes: each of `d`'s ReplicaSets reports its replicas in its
/// status (ready and available when nodes are ready).
fn report_replica_sets(
    core: &Core,
    namespace: &str,
    d: &Value,
    opts: &WriteOptions,
) -> Result<(), StatusError> {
    let rs_info = crate::builtin::replicasets();
    let ready = core.nodes_ready.load(std::sync::atomic::Ordering::SeqCst);
    for v in owned_replica_sets(core, d) {
        let v = &v;
        let n = v["spec"]["replicas"].as_i64().unwrap_or(1);
        let mut status = json!({"replicas": n, "observedGeneration": meta::generation(v)});
        if n > 0 {
            status["fullyLabeledReplicas"] = json!(n);
            if ready {
                status["readyReplicas"] = json!(n);
                status["availableReplicas"] = json!(n);
            }
        }
        if v["status"] != status {
            let mut new = v.clone();
            new["status"] = status;
            core.update(
                &rs_info,
                namespace,
                meta::name(v),
                new,
                Subresource::Status,
                opts,
            )?;
        }
    }
    Ok(())
}

/// The Deployment's ReplicaSets, from the owner index (not a scan of the
/// namespace: a bench's 10,000 Deployments must not cost n²).
fn owned_replica_sets(core: &Core, d: &Value) -> Vec<Value> {
    let rs_info = crate::builtin::replicasets();
    let store = core.resource_store(&rs_info);
    let uid = meta::meta_str(d, "uid");
    let rs_key = rs_info.group_resource();
    core.store
        .dependents_of(uid)
        .into_iter()
        .filter(|(key, _)| *key == rs_key)
        .filter_map(|(_, objkey)| store.get(&objkey))
        .map(|o| o.value().clone())
        .filter(|v| controlled_by(v, uid) && !meta::is_deleting(v))
        .collect()
}

/// The status of a Deployment whose ReplicaSets run real pods: their
/// counts added up, Available when no more than `maxUnavailable` replicas
/// are missing, Progressing until the new ReplicaSet has them all.
fn status_from_replica_sets(core: &Core, d: &Value, previous: &Value) -> Value {
    let owned = owned_replica_sets(core, d);
    let current = format!("{}-{}", meta::name(d), template_hash(d));
    let sum = |f: &str| -> i64 {
        owned
            .iter()
            .map(|r| r["status"][f].as_i64().unwrap_or(0))
            .sum()
    };
    let new_rs = owned.iter().find(|r| meta::name(r) == current);
    let want = d["spec"]["replicas"].as_i64().unwrap_or(1);
    let (replicas, ready, available) = (
        sum("replicas"),
        sum("readyReplicas"),
        sum("availableReplicas"),
    );
    let updated = new_rs.map_or(0, |r| r["status"]["replicas"].as_i64().unwrap_or(0));
    let max_unavailable = resolve(
        &d["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
        want,
    );
    let now = timeutil::now_rfc3339();
    let keep_time = |t: &str, s: &str| -> Value {
        previous["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == t && c["status"] == s))
            .map_or_else(|| json!(now), |c| c["lastTransitionTime"].clone())
    };
    let (avail, reason, message) = if available >= want - max_unavailable {
        (
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        (
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    let done = updated == want && replicas == want && available == want;
    let (p_reason, p_message) = if done {
        (
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{current}\" has successfully progressed."),
        )
    } else {
        (
            "ReplicaSetUpdated",
            format!("ReplicaSet \"{current}\" is progressing."),
        )
    };
    let mut status = json!({
        "observedGeneration": meta::generation(d),
        "conditions": [
            {"type": "Available", "status": avail, "lastUpdateTime": now, "lastTransitionTime": keep_time("Available", avail),
             "reason": reason, "message": message},
            {"type": "Progressing", "status": "True", "lastUpdateTime": now, "lastTransitionTime": keep_time("Progressing", "True"),
             "reason": p_reason, "message": p_message}
        ]
    });
    for (f, n) in [
        ("replicas", replicas),
        ("updatedReplicas", updated),
        ("readyReplicas", ready),
        ("availableReplicas", available),
        ("unavailableReplicas", (want - available).max(0)),
    ] {
        if n > 0 {
            status[f] = json!(n);
        }
    }
    status
}

/// An int-or-percent of `total` (rounded down, as `maxUnavailable`).
fn resolve(v: &Value, total: i64) -> i64 {
    match v {
        Value::Number(n) => n.as_i64().unwrap_or(0),
        Value::String(s) => s
            .strip_suffix('%')
            .and_then(|p| p.parse::<i64>().ok())
            .map_or(0, |p| total * p / 100),
        _ => 0,
    }
}

/// Writes the ReplicaSets of the Deployment's revisions, and its status
/// and revision annotation if the Deployment does not show them.
pub(crate) fn sync(core: &Core, namespace: &str, name: &str) -> Result<(), StatusError> {
    let with_nodes = nodes::has_nodes(core);
    let current_rev = match sync_replica_sets(core, namespace, name, with_nodes) {
        Ok(r) => r,
        Err(e) if e.code == 404 => return Ok(()),
        Err(e) => return Err(e),
    };
    let info = crate::builtin::deployments();
    let rs = core.resource_store(&info);
    let key = format!("{namespace}/{name}");
    let mut tx = rs.write(&core.store);
    let Some(cur) = tx.get(&key) else {
        return Ok(());
    };
    if meta::is_deleting(cur.value()) {
        return Ok(());
    }
    let previous = cur.value().get("status").cloned().unwrap_or(Value::Null);
    let status = if with_nodes {
        status_from_replica_sets(core, cur.value(), &previous)
    } else if core.nodes_ready.load(std::sync::atomic::Ordering::SeqCst) {
        desired_status(cur.value(), &previous)
    } else {
        unavailable_status(cur.value())
    };
    let revision_changed = current_rev.is_some_and(|r| r != revision(cur.value()));
    if same_except_times(&status, &previous) && !revision_changed {
        return Ok(());
    }
    let mut new = cur.value().clone();
    if let Some(m) = new.as_object_mut() {
        m.insert("status".into(), status);
    }
    if let (Some(r), true) = (current_rev, revision_changed) {
        meta::ensure_object(
            meta::metadata_mut(&mut new)
                .entry("annotations")
                .or_insert(Value::Null),
        )
        .insert(REVISION.into(), json!(r.to_string()));
    }
    let writer = crate::fields::Writer {
        manager: "kube-controller-manager",
        api_version: info.api_version(),
        subresource: "status",
    };
    crate::fields::record_update(&info, Some(cur.value()), &mut new, &writer);
    tx.put(&key, new)?;
    Ok(())
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
