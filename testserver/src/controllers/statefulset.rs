//! The StatefulSet controller, when the server has Nodes: pods
//! `<set>-0` … `<set>-(n-1)` from the template, with kube's identity
//! labels (`statefulset.kubernetes.io/pod-name`,
//! `apps.kubernetes.io/pod-index`, `controller-revision-hash`) and
//! hostname/subdomain; under `OrderedReady` one pod at a time, each after
//! the lower ordinals are Ready, removed highest ordinal first; pods of an
//! older template replaced highest ordinal first; and the status
//! (replicas, ready, current/updated, revisions). Not simulated: the
//! claims of `volumeClaimTemplates` and ControllerRevisions.

use super::deployment::template_hash;
use super::pods::{self, owned_pods, ready};
use crate::meta;
use crate::rest::Core;
use crate::status::StatusError;
use crate::store::StoredObject;
use serde_json::{json, Map, Value};
use std::sync::Arc;

const REVISION_LABEL: &str = "controller-revision-hash";

fn ordinal(set: &str, pod: &str) -> Option<usize> {
    pod.strip_prefix(set)?.strip_prefix('-')?.parse().ok()
}

fn new_pod(sts: &Value, i: usize, revision: &str) -> Value {
    let name = format!("{}-{i}", meta::name(sts));
    let labels: Map<String, Value> = [
        (REVISION_LABEL, revision.to_owned()),
        ("statefulset.kubernetes.io/pod-name", name.clone()),
        ("apps.kubernetes.io/pod-index", i.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), json!(v)))
    .collect();
    let mut pod = pods::pod_from_template(sts, &sts["spec"]["template"], Some(&name), labels);
    pod["spec"]["hostname"] = json!(name);
    if let Some(svc) = sts["spec"]["serviceName"]
        .as_str()
        .filter(|s| !s.is_empty())
    {
        pod["spec"]["subdomain"] = json!(svc);
    }
    pod
}

/// Brings one StatefulSet's pods and status up to date.
pub(super) fn sync(core: &Core, namespace: &str, name: &str) -> Result<(), StatusError> {
    let info = crate::builtin::get("apps", "statefulsets");
    let sts = match core.get(&info, namespace, name) {
        Ok(r) => r.value().clone(),
        Err(e) if e.code == 404 => return Ok(()),
        Err(e) => return Err(e),
    };
    if meta::is_deleting(&sts) {
        return Ok(());
    }
    let revision = format!("{name}-{}", template_hash(&sts));
    let want = usize::try_from(sts["spec"]["replicas"].as_i64().unwrap_or(1)).unwrap_or(0);
    let ordered = sts["spec"]["podManagementPolicy"] != "Parallel";
    let mut pods: Vec<(usize, Arc<StoredObject>)> = owned_pods(core, &sts)
        .into_iter()
        .filter_map(|p| ordinal(name, p.name()).map(|i| (i, p)))
        .collect();
    pods.sort_by_key(|(i, _)| *i);
    step(core, &sts, &pods, want, ordered, &revision)?;
    let pods = owned_pods(core, &sts);
    pods::write_status(core, &info, &sts, status(&sts, &pods, &revision))
}

/// One step of the controller: create missing ordinals, remove surplus
/// ones, replace outdated ones.
fn step(
    core: &Core,
    sts: &Value,
    pods: &[(usize, Arc<StoredObject>)],
    want: usize,
    ordered: bool,
    revision: &str,
) -> Result<(), StatusError> {
    let ns = meta::namespace(sts);
    let all_ready = pods.iter().all(|(_, p)| ready(p.value()));
    for i in 0..want {
        if pods.iter().any(|(j, _)| *j == i) {
            continue;
        }
        let lower_ready = pods
            .iter()
            .filter(|(j, _)| *j < i)
            .all(|(_, p)| ready(p.value()));
        if ordered && !lower_ready {
            return Ok(());
        }
        pods::create_pod(core, ns, new_pod(sts, i, revision))?;
        if ordered {
            return Ok(());
        }
    }
    let surplus: Vec<&Arc<StoredObject>> = pods
        .iter()
        .rev()
        .filter(|(i, _)| *i >= want)
        .map(|(_, p)| p)
        .collect();
    for p in &surplus {
        if ordered && !all_ready {
            return Ok(());
        }
        pods::delete_pod(core, p)?;
        if ordered {
            return Ok(());
        }
    }
    // a rolling update replaces the highest outdated ordinal once all are Ready
    let outdated = pods
        .iter()
        .rev()
        .find(|(_, p)| p.value()["metadata"]["labels"][REVISION_LABEL] != revision);
    if let (Some((_, p)), true) = (outdated, all_ready) {
        pods::delete_pod(core, p)?;
    }
    Ok(())
}

fn status(sts: &Value, pods: &[Arc<StoredObject>], revision: &str) -> Value {
    let ready_count = pods.iter().filter(|p| ready(p.value())).count();
    let updated = pods
        .iter()
        .filter(|p| p.value()["metadata"]["labels"][REVISION_LABEL] == revision)
        .count();
    let mut s = json!({
        "observedGeneration": meta::generation(sts),
        "replicas": pods.len(),
        "availableReplicas": ready_count,
        "currentRevision": revision,
        "updateRevision": revision,
        "collisionCount": 0,
    });
    for (field, n) in [
        ("readyReplicas", ready_count),
        ("currentReplicas", updated),
        ("updatedReplicas", updated),
    ] {
        if n > 0 {
            s[field] = json!(n);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_and_identity() {
        assert_eq!(ordinal("web", "web-3"), Some(3));
        assert_eq!(ordinal("web", "web-x"), None);
        assert_eq!(ordinal("web", "webby-1"), None);
        let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "uid": "u"},
            "spec": {"serviceName": "db", "template": {"metadata": {"labels": {"app": "db"}}, "spec": {}}}});
        let p = new_pod(&sts, 2, "db-abc");
        assert_eq!(p["metadata"]["name"], "db-2");
        assert_eq!(p["metadata"]["labels"]["apps.kubernetes.io/pod-index"], "2");
        assert_eq!(p["spec"]["hostname"], "db-2");
        assert_eq!(p["spec"]["subdomain"], "db");
    }
}
