//! The Job controller, when the server has Nodes: up to `parallelism`
//! pods at a time until `completions` succeeded (the simulated kubelet
//! runs a Job's pods to completion at once), then the `SuccessCriteriaMet`
//! and `Complete` conditions and the completion time, as kube's Job
//! controller reports them. A suspended Job gets no pods.

use super::pods::{self, finished, owned_pods, ready};
use crate::meta;
use crate::rest::Core;
use crate::status::StatusError;
use crate::timeutil;
use serde_json::{json, Map, Value};

/// Brings one Job's pods and status up to date.
pub(super) fn sync(core: &Core, namespace: &str, name: &str) -> Result<(), StatusError> {
    let info = crate::builtin::get("batch", "jobs");
    let job = match core.get(&info, namespace, name) {
        Ok(r) => r.value().clone(),
        Err(e) if e.code == 404 => return Ok(()),
        Err(e) => return Err(e),
    };
    if meta::is_deleting(&job) || complete(&job) {
        return Ok(());
    }
    let completions =
        usize::try_from(job["spec"]["completions"].as_i64().unwrap_or(1)).unwrap_or(0);
    let parallelism =
        usize::try_from(job["spec"]["parallelism"].as_i64().unwrap_or(1)).unwrap_or(0);
    let suspended = job["spec"]["suspend"] == true;
    let pods = owned_pods(core, &job);
    let succeeded = pods
        .iter()
        .filter(|p| p.value()["status"]["phase"] == "Succeeded")
        .count();
    let active = pods.iter().filter(|p| !finished(p.value())).count();
    let remaining = completions.saturating_sub(succeeded + active);
    let start = if suspended {
        0
    } else {
        parallelism.saturating_sub(active).min(remaining)
    };
    for _ in 0..start {
        let pod = pods::pod_from_template(&job, &job["spec"]["template"], None, Map::new());
        pods::create_pod(core, namespace, pod)?;
    }
    let pods = owned_pods(core, &job);
    pods::write_status(core, &info, &job, status(&job, &pods, completions))
}

fn complete(job: &Value) -> bool {
    job["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Complete" && c["status"] == "True")
    })
}

fn status(
    job: &Value,
    pods: &[std::sync::Arc<crate::store::StoredObject>],
    completions: usize,
) -> Value {
    let now = timeutil::now_rfc3339();
    let succeeded = pods
        .iter()
        .filter(|p| p.value()["status"]["phase"] == "Succeeded")
        .count();
    let failed = pods
        .iter()
        .filter(|p| p.value()["status"]["phase"] == "Failed")
        .count();
    let active = pods.iter().filter(|p| !finished(p.value())).count();
    let ready_count = pods.iter().filter(|p| ready(p.value())).count();
    let previous = &job["status"];
    let start = previous
        .get("startTime")
        .cloned()
        .unwrap_or_else(|| json!(now));
    let mut s = json!({"startTime": start, "ready": ready_count, "terminating": 0, "uncountedTerminatedPods": {}});
    for (field, n) in [
        ("active", active),
        ("succeeded", succeeded),
        ("failed", failed),
    ] {
        if n > 0 {
            s[field] = json!(n);
        }
    }
    if job["spec"]["suspend"] == true {
        s["conditions"] = json!([{"type": "Suspended", "status": "True", "reason": "JobSuspended",
            "message": "Job suspended", "lastProbeTime": now, "lastTransitionTime": now}]);
        return s;
    }
    if succeeded >= completions {
        let cond = |t: &str| {
            json!({"type": t, "status": "True", "reason": "CompletionsReached",
            "message": "Reached expected number of succeeded pods", "lastProbeTime": now, "lastTransitionTime": now})
        };
        s["conditions"] = json!([cond("SuccessCriteriaMet"), cond("Complete")]);
        s["completionTime"] = json!(now);
    } else if let Some(c) = previous.get("conditions") {
        s["conditions"] = c.clone();
    }
    s
}
