//! What the built-in kinds do beyond storage, as kube-apiserver's
//! defaulters, admission plugins and registry strategies do it: defaults
//! applied on every write, what a create fills in (a Pod's admission
//! defaults and status, a Job's selector), what an update carries over (a
//! Service's allocated IPs), and validation. One dispatch on the kind; the
//! rules live per area (`pod`, `service`, `workloads`, `others`).

pub(crate) mod ipam;
mod json;
mod others;
mod pod;
mod service;
mod workloads;

use crate::resource::{Behavior, ResourceInfo};
use crate::status::{FieldError, StatusError};
use serde_json::Value;

/// The kind of a built-in resource (`None` for custom resources).
fn builtin_kind(info: &ResourceInfo) -> Option<(&str, &str)> {
    if info.crd_name.is_some() || info.behavior == Behavior::CustomResource {
        return None;
    }
    Some((info.group.as_str(), info.kind.as_str()))
}

/// Defaults applied on every write (create, update, patch, apply), as
/// kube's defaulting functions run on every decode.
pub(crate) fn default_object(info: &ResourceInfo, obj: &mut Value) -> Result<(), StatusError> {
    let Some(kind) = builtin_kind(info) else {
        return Ok(());
    };
    match kind {
        ("", "Pod") => pod::default_pod(obj),
        ("", "Service") => service::default_service(obj),
        ("", "Secret") => others::default_secret(obj)?,
        ("", "Namespace") => others::default_namespace(obj),
        ("", "PersistentVolume") => others::default_pv(obj),
        ("", "PersistentVolumeClaim") => others::default_pvc(obj),
        ("", "Node") => others::default_node(obj),
        ("", "Endpoints") => others::default_endpoints(obj),
        ("apps", "Deployment") => workloads::default_deployment(obj),
        ("apps", "ReplicaSet") => workloads::default_replicaset(obj),
        ("apps", "StatefulSet") => workloads::default_statefulset(obj),
        ("apps", "DaemonSet") => workloads::default_daemonset(obj),
        ("batch", "Job") => workloads::default_job(obj),
        ("batch", "CronJob") => workloads::default_cronjob(obj),
        ("networking.k8s.io", "NetworkPolicy") => others::default_network_policy(obj),
        ("autoscaling", "HorizontalPodAutoscaler") => others::default_hpa(obj),
        ("discovery.k8s.io", "EndpointSlice") => others::default_endpoint_slice(obj),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            others::default_subjects(obj)
        }
        _ => {}
    }
    Ok(())
}

/// What a create fills in before defaults and validation (the object has
/// its uid and creation time): admission defaults and the initial status
/// of a Pod, the generated selector and labels of a Job.
pub(crate) fn prepare_for_create(info: &ResourceInfo, obj: &mut Value) {
    match builtin_kind(info) {
        Some(("", "Pod")) => pod::admit_pod(obj),
        Some(("batch", "Job")) => workloads::generate_job_selector(obj),
        _ => {}
    }
}

/// What an update keeps from the stored object when the request leaves it
/// out: a Service's allocated cluster IPs and node ports, a Job's
/// generated selector and labels.
pub(crate) fn prepare_for_update(info: &ResourceInfo, old: &Value, new: &mut Value) {
    match builtin_kind(info) {
        Some(("", "Service")) => service::keep_allocated(old, new),
        Some(("batch", "Job")) => workloads::keep_job_selector(old, new),
        _ => {}
    }
}

/// Validation of a kind's fields, as its registry strategy validates.
pub(crate) fn validate(
    info: &ResourceInfo,
    obj: &Value,
    old: Option<&Value>,
    errs: &mut Vec<FieldError>,
) {
    let Some(kind) = builtin_kind(info) else {
        return;
    };
    match kind {
        ("", "Pod") => pod::validate_pod(obj, old, errs),
        ("", "Service") => service::validate_service(obj, old, errs),
        ("", "ConfigMap") => others::validate_configmap(obj, errs),
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => {
            workloads::validate_workload(obj, old, errs)
        }
        ("batch", "Job") => workloads::validate_job(obj, old, errs),
        ("batch", "CronJob") => workloads::validate_cronjob(obj, errs),
        _ => {}
    }
}
