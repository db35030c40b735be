//! The workloads (apps/v1 Deployments, ReplicaSets, StatefulSets,
//! DaemonSets; batch/v1 Jobs and CronJobs): kube's defaults of each spec
//! and of its pod template, a Job's generated selector and labels, and
//! validation of selectors, templates and replicas.

use super::json::{default, each_item, object_at, str_of};
use super::pod::{default_template, validate_pod_spec};
use crate::meta;
use crate::status::FieldError;
use serde_json::{json, Map, Value};

/// `SetDefaults_Deployment`.
pub(crate) fn default_deployment(obj: &mut Value) {
    let spec = object_at(obj, &["spec"]);
    default(spec, "replicas", json!(1));
    default(spec, "revisionHistoryLimit", json!(10));
    default(spec, "progressDeadlineSeconds", json!(600));
    // as kube-apiserver: a strategy without a type (`{}`, which protobuf
    // clients send for an unset strategy) is a rolling update of 25 %/25 %
    let strategy = crate::meta::ensure_object(spec.entry("strategy").or_insert(Value::Null));
    default(strategy, "type", json!("RollingUpdate"));
    if strategy.get("type") == Some(&json!("RollingUpdate")) {
        let ru = crate::meta::ensure_object(strategy.entry("rollingUpdate").or_insert(Value::Null));
        default(ru, "maxUnavailable", json!("25%"));
        default(ru, "maxSurge", json!("25%"));
    }
    default_template(obj, &["spec", "template"]);
}

/// `SetDefaults_ReplicaSet`.
pub(crate) fn default_replicaset(obj: &mut Value) {
    default(object_at(obj, &["spec"]), "replicas", json!(1));
    default_template(obj, &["spec", "template"]);
}

/// `SetDefaults_StatefulSet`, and the claim templates' own defaults.
pub(crate) fn default_statefulset(obj: &mut Value) {
    let spec = object_at(obj, &["spec"]);
    default(spec, "replicas", json!(1));
    default(spec, "podManagementPolicy", json!("OrderedReady"));
    default(spec, "revisionHistoryLimit", json!(10));
    let strategy = crate::meta::ensure_object(spec.entry("updateStrategy").or_insert(Value::Null));
    if str_of(strategy, "type").is_empty() {
        strategy.insert("type".into(), json!("RollingUpdate"));
        default(strategy, "rollingUpdate", json!({}));
    }
    if str_of(strategy, "type") == "RollingUpdate" {
        if let Some(Value::Object(ru)) = strategy.get_mut("rollingUpdate") {
            default(ru, "partition", json!(0));
        }
    }
    let retention = crate::meta::ensure_object(
        spec.entry("persistentVolumeClaimRetentionPolicy")
            .or_insert(Value::Null),
    );
    default(retention, "whenDeleted", json!("Retain"));
    default(retention, "whenScaled", json!("Retain"));
    each_item(spec, "volumeClaimTemplates", |pvc| {
        default(pvc, "apiVersion", json!("v1"));
        default(pvc, "kind", json!("PersistentVolumeClaim"));
        let s = crate::meta::ensure_object(pvc.entry("spec").or_insert(Value::Null));
        default(s, "volumeMode", json!("Filesystem"));
        let st = crate::meta::ensure_object(pvc.entry("status").or_insert(Value::Null));
        default(st, "phase", json!("Pending"));
    });
    default_template(obj, &["spec", "template"]);
}

/// `SetDefaults_DaemonSet`.
pub(crate) fn default_daemonset(obj: &mut Value) {
    let spec = object_at(obj, &["spec"]);
    default(spec, "revisionHistoryLimit", json!(10));
    let strategy = crate::meta::ensure_object(spec.entry("updateStrategy").or_insert(Value::Null));
    default(strategy, "type", json!("RollingUpdate"));
    if str_of(strategy, "type") == "RollingUpdate" {
        let ru = crate::meta::ensure_object(strategy.entry("rollingUpdate").or_insert(Value::Null));
        default(ru, "maxUnavailable", json!(1));
        default(ru, "maxSurge", json!(0));
    }
    default_template(obj, &["spec", "template"]);
}

/// `SetDefaults_Job`.
pub(crate) fn default_job(obj: &mut Value) {
    let spec = object_at(obj, &["spec"]);
    if spec.get("completions").is_none_or(Value::is_null)
        && spec.get("parallelism").is_none_or(Value::is_null)
    {
        spec.insert("completions".into(), json!(1));
    }
    default(spec, "parallelism", json!(1));
    let backoff = if spec
        .get("backoffLimitPerIndex")
        .is_some_and(|v| !v.is_null())
    {
        json!(i32::MAX)
    } else {
        json!(6)
    };
    default(spec, "backoffLimit", backoff);
    default(spec, "completionMode", json!("NonIndexed"));
    default(spec, "suspend", json!(false));
    let replacement = if spec.get("podFailurePolicy").is_some_and(|v| !v.is_null()) {
        "Failed"
    } else {
        "TerminatingOrFailed"
    };
    default(spec, "podReplacementPolicy", json!(replacement));
    default_template(obj, &["spec", "template"]);
}

/// `SetDefaults_CronJob`.
pub(crate) fn default_cronjob(obj: &mut Value) {
    let spec = object_at(obj, &["spec"]);
    default(spec, "concurrencyPolicy", json!("Allow"));
    default(spec, "suspend", json!(false));
    default(spec, "successfulJobsHistoryLimit", json!(3));
    default(spec, "failedJobsHistoryLimit", json!(1));
    default_template(obj, &["spec", "jobTemplate", "spec", "template"]);
}

/// The labels a Job's pods carry and its generated selector selects.
fn job_labels(uid: &str, name: &str) -> Map<String, Value> {
    [
        ("batch.kubernetes.io/controller-uid", uid),
        ("batch.kubernetes.io/job-name", name),
        ("controller-uid", uid),
        ("job-name", name),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), json!(v)))
    .collect()
}

/// A Job without `manualSelector: true` selects its pods by its uid: the
/// template gets the labels, the Job a selector, and the template's
/// labels when it has none of its own (as kube's job strategy does).
pub(crate) fn generate_job_selector(obj: &mut Value) {
    if obj["spec"]["manualSelector"] == true {
        return;
    }
    let uid = meta::meta_str(obj, "uid").to_owned();
    let name = meta::name(obj).to_owned();
    let labels = job_labels(&uid, &name);
    let tpl_labels = object_at(obj, &["spec", "template", "metadata", "labels"]);
    tpl_labels.extend(labels);
    let all = tpl_labels.clone();
    object_at(obj, &["spec"]).insert(
        "selector".into(),
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
    );
    let own = object_at(obj, &["metadata", "labels"]);
    if own.is_empty() {
        *own = all;
    }
}

/// An update that leaves out a Job's generated selector keeps it (and
/// the generated template labels), so the immutable fields stay put.
pub(crate) fn keep_job_selector(old: &Value, new: &mut Value) {
    if old["spec"]["manualSelector"] == true || !new["spec"]["selector"].is_null() {
        return;
    }
    if let Some(sel) = old["spec"].get("selector") {
        object_at(new, &["spec"]).insert("selector".into(), sel.clone());
    }
    let old_labels = old["spec"]["template"]["metadata"]["labels"].clone();
    if let Value::Object(l) = old_labels {
        let labels = object_at(new, &["spec", "template", "metadata", "labels"]);
        for (k, v) in l {
            if k.contains("controller-uid") || k.ends_with("job-name") {
                labels.entry(k).or_insert(v);
            }
        }
    }
}

fn validate_selector(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let selector = &obj["spec"]["selector"];
    if !selector.is_object() {
        errs.push(FieldError::required("spec.selector", ""));
        return;
    }
    let template_labels = &obj["spec"]["template"]["metadata"]["labels"];
    let selects =
        |ml: &Map<String, Value>| ml.iter().all(|(k, v)| template_labels.get(k) == Some(v));
    if let Some(ml) = selector.get("matchLabels").and_then(Value::as_object) {
        if !selects(ml) {
            errs.push(FieldError::invalid(
                "spec.template.metadata.labels",
                template_labels.clone(),
                "`selector` does not match template `labels`",
            ));
        }
    }
    if let Some(old) = old {
        let old_sel = &old["spec"]["selector"];
        if old_sel.is_object() && old_sel != selector {
            errs.push(FieldError::invalid(
                "spec.selector",
                selector.clone(),
                "field is immutable",
            ));
        }
    }
}

fn validate_replicas(obj: &Value, errs: &mut Vec<FieldError>) {
    if let Some(r) = obj["spec"].get("replicas") {
        if r.as_i64().is_none_or(|n| n < 0) {
            errs.push(FieldError::invalid(
                "spec.replicas",
                r.clone(),
                "must be greater than or equal to 0",
            ));
        }
    }
}

/// Deployments, ReplicaSets, StatefulSets and DaemonSets: a selector that
/// matches the template and does not change, replicas ≥ 0, a valid pod
/// template.
pub(crate) fn validate_workload(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    validate_selector(obj, old, errs);
    validate_replicas(obj, errs);
    validate_pod_spec(&obj["spec"]["template"]["spec"], "spec.template.spec", errs);
    restart_always(&obj["spec"]["template"]["spec"], "spec.template.spec", errs);
}

fn restart_always(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let r = spec["restartPolicy"].as_str().unwrap_or("");
    if r != "Always" && !r.is_empty() {
        errs.push(FieldError::not_supported(
            format!("{path}.restartPolicy"),
            json!(r),
            &["Always".into()],
        ));
    }
}

fn restart_never_or_on_failure(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let r = spec["restartPolicy"].as_str().unwrap_or("");
    if r != "Never" && r != "OnFailure" {
        errs.push(FieldError::required(
            format!("{path}.restartPolicy"),
            "valid values: \"OnFailure\", \"Never\"",
        ));
    }
}

/// Jobs: the selector (generated or manual) matches the template, the
/// pods restart `Never` or `OnFailure`.
pub(crate) fn validate_job(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    validate_selector(obj, old, errs);
    validate_pod_spec(&obj["spec"]["template"]["spec"], "spec.template.spec", errs);
    restart_never_or_on_failure(&obj["spec"]["template"]["spec"], "spec.template.spec", errs);
    for f in ["parallelism", "completions", "backoffLimit"] {
        if let Some(v) = obj["spec"].get(f).filter(|v| !v.is_null()) {
            if v.as_i64().is_none_or(|n| n < 0) {
                errs.push(FieldError::invalid(
                    format!("spec.{f}"),
                    v.clone(),
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
}

/// CronJobs: a schedule and a job template whose pods restart `Never` or
/// `OnFailure`.
pub(crate) fn validate_cronjob(obj: &Value, errs: &mut Vec<FieldError>) {
    if obj["spec"]["schedule"].as_str().unwrap_or("").is_empty() {
        errs.push(FieldError::required("spec.schedule", ""));
    }
    let pod = &obj["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    let path = "spec.jobTemplate.spec.template.spec";
    validate_pod_spec(pod, path, errs);
    restart_never_or_on_failure(pod, path, errs);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tpl(restart: Option<&str>) -> Value {
        let mut spec = json!({"containers": [{"name": "c", "image": "busybox"}]});
        if let Some(r) = restart {
            spec["restartPolicy"] = json!(r);
        }
        json!({"metadata": {"labels": {"app": "a"}}, "spec": spec})
    }

    #[test]
    fn statefulset_and_daemonset_defaults() {
        let mut sts = json!({"kind": "StatefulSet", "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": tpl(None),
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}});
        default_statefulset(&mut sts);
        assert_eq!(sts["spec"]["replicas"], 1);
        assert_eq!(sts["spec"]["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            sts["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        );
        assert_eq!(
            sts["spec"]["volumeClaimTemplates"][0]["status"]["phase"],
            "Pending"
        );
        assert_eq!(sts["spec"]["template"]["spec"]["restartPolicy"], "Always");
        let mut errs = Vec::new();
        validate_workload(&sts, None, &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        let mut ds = json!({"kind": "DaemonSet", "spec": {"template": tpl(None)}});
        default_daemonset(&mut ds);
        assert_eq!(
            ds["spec"]["updateStrategy"]["rollingUpdate"],
            json!({"maxUnavailable": 1, "maxSurge": 0})
        );
        let mut errs = Vec::new();
        validate_workload(&ds, None, &mut errs);
        assert_eq!(
            errs.first().map(ToString::to_string).as_deref(),
            Some("spec.selector: Required value")
        );
    }

    #[test]
    fn jobs_select_their_pods_by_uid() {
        let mut job = json!({"metadata": {"name": "pi", "uid": "u-1"}, "spec": {"template": tpl(Some("Never"))}});
        generate_job_selector(&mut job);
        default_job(&mut job);
        assert_eq!(
            job["spec"]["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}})
        );
        assert_eq!(
            job["spec"]["template"]["metadata"]["labels"]["job-name"],
            "pi"
        );
        assert_eq!(job["metadata"]["labels"]["app"], "a");
        assert_eq!(
            (
                job["spec"]["completions"].clone(),
                job["spec"]["parallelism"].clone()
            ),
            (json!(1), json!(1))
        );
        assert_eq!(job["spec"]["backoffLimit"], 6);
        let mut errs = Vec::new();
        validate_job(&job, None, &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        // an update without the selector keeps it
        let mut update =
            json!({"metadata": {"name": "pi"}, "spec": {"template": tpl(Some("Never"))}});
        keep_job_selector(&job, &mut update);
        assert_eq!(update["spec"]["selector"], job["spec"]["selector"]);
        let mut errs = Vec::new();
        let mut always =
            json!({"metadata": {"name": "x", "uid": "u"}, "spec": {"template": tpl(None)}});
        generate_job_selector(&mut always);
        default_job(&mut always);
        validate_job(&always, None, &mut errs);
        assert_eq!(errs.first().map(ToString::to_string).as_deref(), Some("spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""));
    }
}
