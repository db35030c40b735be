//! The built-in resources: one table, each row a `k8s-openapi` type (group,
//! version, kind, plural, list kind, scope and OpenAPI schema come from its
//! `Resource` and `JsonSchema` impls) plus only what kube-apiserver does
//! differently per kind: short names, the `all` category, subresources,
//! generation tracking, create-on-update, field selectors and printer
//! columns. Defaults, validation and simulators per kind live in
//! `crate::kinds`; merge rules in `semantics.rs`. The table is built once
//! per process; every server registers the same `Arc`s.

mod columns;
pub(crate) mod merge_rules;
pub(crate) mod schemas;
mod semantics;

use crate::resource::{Behavior, PrinterColumn, ResourceInfo, ScaleSubresource};
use columns::Col;
use k8s_openapi::api::{
    apps::v1 as apps, autoscaling::v2 as autoscaling, batch::v1 as batch,
    coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery,
    events::v1 as events, networking::v1 as networking, policy::v1 as policy, rbac::v1 as rbac,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use std::sync::{Arc, LazyLock};

/// One row: the type's metadata plus what differs per kind.
struct Entry {
    info: fn() -> ResourceInfo,
    short: &'static [&'static str],
    /// In the `all` category (`kubectl get all`).
    all: bool,
    status: bool,
    scale: bool,
    generation: bool,
    create_on_update: bool,
    return_deleted: bool,
    /// Field-selector fields beyond `metadata.name` and `metadata.namespace`.
    selectable: &'static [&'static str],
    columns: &'static [Col],
    behavior: Behavior,
}

const PLAIN: Entry = Entry {
    info: ResourceInfo::of::<core::ConfigMap>,
    short: &[],
    all: false,
    status: false,
    scale: false,
    generation: false,
    create_on_update: false,
    return_deleted: false,
    selectable: &[],
    columns: &[],
    behavior: Behavior::Plain,
};

/// A workload with status, generation and (optionally) scale.
const WORKLOAD: Entry = Entry {
    all: true,
    status: true,
    generation: true,
    ..PLAIN
};

/// The table, in the order discovery lists groups (kube-apiserver's).
static TABLE: &[Entry] = &[
    // core/v1
    Entry {
        info: ResourceInfo::of::<core::Namespace>,
        short: &["ns"],
        status: true,
        return_deleted: true,
        selectable: &["status.phase"],
        columns: columns::NAMESPACE,
        behavior: Behavior::Namespace,
        ..PLAIN
    },
    Entry {
        info: ResourceInfo::of::<core::ConfigMap>,
        short: &["cm"],
        columns: columns::CONFIGMAP,
        ..PLAIN
    },
    Entry {
        info: ResourceInfo::of::<core::Secret>,
        selectable: &["type"],
        columns: columns::SECRET,
        ..PLAIN
    },
    Entry {
        info: ResourceInfo::of::<core::Event>,
        short: &["ev"],
        create_on_update: true,
        selectable: &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        columns: columns::EVENT,
        ..PLAIN
    },
    Entry {
        info: ResourceInfo::of::<core::Pod>,
        short: &["po"],
        selectable: &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        columns: columns::POD,
        behavior: Behavior::Pod,
        // pods track no generation at the 1.33 API level
        generation: false,
        ..WORKLOAD
    },
    Entry {
        info: ResourceInfo::of::<core::Service>,
        short: &["svc"],
        all: true,
        status: true,
        selectable: &["spec.clusterIP", "spec.type"],
        columns: columns::SERVICE,
        behavior: Behavior::Service,
        ..PLAIN
    },
    Entry {
        info: ResourceInfo::of::<core::ServiceAccount>,
        short: &["sa"],
        create_on_update: true,
        columns: columns::SERVICEACCOUNT,
        ..PLAIN
    },
    Entry {
        info: ResourceInfo::of::<core::Endpoints>,
        short: &["ep"],
        create_on_update: true,
        columns: columns::ENDPOINTS,
        ..PLAIN
    },
    Entry {
        info: ResourceInfo::of::<core::PersistentVolumeClaim>,
        short: &["pvc"],
        status: true,
        columns: columns::PVC,
        ..PLAIN
    },
    Entry {
        info: ResourceInfo::of::<core::PersistentVolume>,
        short: &["pv"],
        status: true,
        columns: columns::PV,
        ..PLAIN
    },
    Entry {
        info: ResourceInfo::of::<core::Node>,
        short: &["no"],
        status: true,
        selectable: &["spec.unschedulable"],
        columns: columns::NODE,
        ..PLAIN
    },
    // apps/v1
    Entry {
        info: ResourceInfo::of::<apps::Deployment>,
        short: &["deploy"],
        scale: true,
        columns: columns::DEPLOYMENT,
        behavior: Behavior::Deployment,
        ..WORKLOAD
    },
    Entry {
        info: ResourceInfo::of::<apps::ReplicaSet>,
        short: &["rs"],
        scale: true,
        selectable: &["status.replicas"],
        columns: columns::REPLICASET,
        behavior: Behavior::Workload,
        ..WORKLOAD
    },
    Entry {
        info: ResourceInfo::of::<apps::StatefulSet>,
        short: &["sts"],
        scale: true,
        columns: columns::STATEFULSET,
        behavior: Behavior::Workload,
        ..WORKLOAD
    },
    Entry {
        info: ResourceInfo::of::<apps::DaemonSet>,
        short: &["ds"],
        columns: columns::DAEMONSET,
        behavior: Behavior::Workload,
        ..WORKLOAD
    },
    // events.k8s.io/v1: the storage of core/v1 Events, converted
    Entry {
        info: ResourceInfo::of::<events::Event>,
        short: &["ev"],
        create_on_update: true,
        columns: columns::EVENT_V1,
        behavior: Behavior::EventsV1,
        ..PLAIN
    },
    // autoscaling/v2
    Entry {
        info: ResourceInfo::of::<autoscaling::HorizontalPodAutoscaler>,
        short: &["hpa"],
        columns: columns::HPA,
        ..WORKLOAD
    },
    // batch/v1
    Entry {
        info: ResourceInfo::of::<batch::Job>,
        columns: columns::JOB,
        behavior: Behavior::Workload,
        ..WORKLOAD
    },
    Entry {
        info: ResourceInfo::of::<batch::CronJob>,
        short: &["cj"],
        columns: columns::CRONJOB,
        behavior: Behavior::Workload,
        ..WORKLOAD
    },
    // networking.k8s.io/v1
    Entry {
        info: ResourceInfo::of::<networking::Ingress>,
        short: &["ing"],
        status: true,
        generation: true,
        columns: columns::INGRESS,
        ..PLAIN
    },
    Entry {
        info: ResourceInfo::of::<networking::NetworkPolicy>,
        short: &["netpol"],
        generation: true,
        columns: columns::NETWORKPOLICY,
        ..PLAIN
    },
    // policy/v1
    Entry {
        info: ResourceInfo::of::<policy::PodDisruptionBudget>,
        short: &["pdb"],
        status: true,
        generation: true,
        columns: columns::PDB,
        ..PLAIN
    },
    // rbac.authorization.k8s.io/v1
    Entry {
        info: ResourceInfo::of::<rbac::ClusterRole>,
        create_on_update: true,
        columns: columns::ROLE,
        ..PLAIN
    },
    Entry {
        info: ResourceInfo::of::<rbac::ClusterRoleBinding>,
        create_on_update: true,
        columns: columns::ROLEBINDING,
        ..PLAIN
    },
    Entry {
        info: ResourceInfo::of::<rbac::Role>,
        create_on_update: true,
        columns: columns::ROLE,
        ..PLAIN
    },
    Entry {
        info: ResourceInfo::of::<rbac::RoleBinding>,
        create_on_update: true,
        columns: columns::ROLEBINDING,
        ..PLAIN
    },
    // apiextensions.k8s.io/v1
    Entry {
        info: ResourceInfo::of::<apiextensions::CustomResourceDefinition>,
        short: &["crd", "crds"],
        status: true,
        generation: true,
        columns: columns::CRD,
        behavior: Behavior::CustomResourceDefinition,
        ..PLAIN
    },
    // coordination.k8s.io/v1
    Entry {
        info: ResourceInfo::of::<coordination::Lease>,
        create_on_update: true,
        columns: columns::LEASE,
        ..PLAIN
    },
    // discovery.k8s.io/v1
    Entry {
        info: ResourceInfo::of::<discovery::EndpointSlice>,
        generation: true,
        columns: columns::ENDPOINTSLICE,
        ..PLAIN
    },
];

fn build(e: &Entry) -> ResourceInfo {
    let mut r = (e.info)();
    r.short_names = e.short.iter().map(|s| (*s).to_owned()).collect();
    if e.all {
        r.categories = vec!["all".into()];
    }
    r.status_subresource = e.status;
    r.scale = e.scale.then(ScaleSubresource::replicas);
    r.tracks_generation = e.generation;
    r.allow_create_on_update = e.create_on_update;
    r.return_deleted_object = e.return_deleted;
    r.selectable_fields = e.selectable.iter().map(|s| (*s).to_owned()).collect();
    r.printer_columns = e.columns.iter().map(PrinterColumn::from).collect();
    r.behavior = e.behavior;
    r
}

static INFOS: LazyLock<Vec<Arc<ResourceInfo>>> =
    LazyLock::new(|| TABLE.iter().map(|e| Arc::new(build(e))).collect());

/// Every built-in resource, in the order discovery lists their groups.
pub(crate) fn all() -> Vec<Arc<ResourceInfo>> {
    INFOS.clone()
}

/// The built-in resource `group`/`resource` (its one served version).
///
/// # Panics
/// Never for the resources of the table; the callers name table rows.
pub(crate) fn get(group: &str, resource: &str) -> Arc<ResourceInfo> {
    find(group, resource).unwrap_or_else(|| {
        // a missing row is a bug in this crate, caught by `every_row_is_found`
        Arc::new(ResourceInfo::new(group, "v1", "Unknown", resource, true))
    })
}

/// The built-in resource `group`/`resource`, if the table has it.
pub(crate) fn find(group: &str, resource: &str) -> Option<Arc<ResourceInfo>> {
    INFOS
        .iter()
        .find(|i| i.group == group && i.resource == resource && i.behavior != Behavior::EventsV1)
        .cloned()
}

/// `namespaces` (core/v1).
pub(crate) fn namespaces() -> Arc<ResourceInfo> {
    get("", "namespaces")
}

/// `configmaps` (core/v1).
pub(crate) fn configmaps() -> Arc<ResourceInfo> {
    get("", "configmaps")
}

/// `events` (core/v1): the storage of both Event versions.
pub(crate) fn events() -> Arc<ResourceInfo> {
    get("", "events")
}

/// `deployments` (apps/v1).
pub(crate) fn deployments() -> Arc<ResourceInfo> {
    get("apps", "deployments")
}

/// `replicasets` (apps/v1).
pub(crate) fn replicasets() -> Arc<ResourceInfo> {
    get("apps", "replicasets")
}

/// `pods` (core/v1).
pub(crate) fn pods() -> Arc<ResourceInfo> {
    get("", "pods")
}

/// `nodes` (core/v1).
pub(crate) fn nodes() -> Arc<ResourceInfo> {
    get("", "nodes")
}

/// `customresourcedefinitions` (apiextensions.k8s.io/v1).
pub(crate) fn customresourcedefinitions() -> Arc<ResourceInfo> {
    get("apiextensions.k8s.io", "customresourcedefinitions")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_found_and_comes_from_k8s_openapi() {
        for info in all() {
            if info.behavior == Behavior::EventsV1 {
                continue;
            }
            let found = find(&info.group, &info.resource);
            assert_eq!(found.map(|f| f.kind.clone()), Some(info.kind.clone()));
            assert!(info.openapi_schema.is_some(), "{}", info.resource);
            assert!(
                info.openapi_name.starts_with("io.k8s."),
                "{}",
                info.openapi_name
            );
        }
        let pods = pods();
        assert_eq!(
            (
                pods.version.as_str(),
                pods.kind.as_str(),
                pods.list_kind.as_str(),
                pods.namespaced
            ),
            ("v1", "Pod", "PodList", true)
        );
        assert_eq!(pods.openapi_name, "io.k8s.api.core.v1.Pod");
        let crb = get("rbac.authorization.k8s.io", "clusterrolebindings");
        assert!(!crb.namespaced);
        assert!(crb.allow_create_on_update);
        let hpa = get("autoscaling", "horizontalpodautoscalers");
        assert_eq!(hpa.version, "v2");
        assert_eq!(hpa.short_names, ["hpa"]);
        let sts = get("apps", "statefulsets");
        assert!(sts.scale.is_some() && sts.status_subresource && sts.tracks_generation);
        assert!(get("apps", "daemonsets").scale.is_none());
    }

    #[test]
    fn the_table_is_built_once_per_process() {
        let a = all();
        let b = all();
        assert!(a.iter().zip(&b).all(|(x, y)| Arc::ptr_eq(x, y)));
    }
}
