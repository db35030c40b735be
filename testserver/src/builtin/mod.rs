//! The resources registered at start, with kube-apiserver's names, short
//! names, scopes, subresources, field-selector fields and printer columns.

use crate::resource::{Behavior, PrinterColumn, ResourceInfo};

fn col(
    name: &str,
    type_: &str,
    json_path: &str,
    description: &str,
    priority: i64,
) -> PrinterColumn {
    PrinterColumn {
        name: name.into(),
        type_: type_.into(),
        json_path: json_path.into(),
        description: description.into(),
        priority,
    }
}

struct Spec<'a> {
    group: &'a str,
    version: &'a str,
    resource: &'a str,
    kind: &'a str,
    namespaced: bool,
    short: &'a [&'a str],
    openapi: &'a str,
}

fn base(s: &Spec<'_>) -> ResourceInfo {
    ResourceInfo {
        group: s.group.into(),
        version: s.version.into(),
        resource: s.resource.into(),
        singular: s.kind.to_ascii_lowercase(),
        kind: s.kind.into(),
        list_kind: format!("{}List", s.kind),
        namespaced: s.namespaced,
        short_names: s.short.iter().map(|x| (*x).to_owned()).collect(),
        categories: Vec::new(),
        status_subresource: false,
        tracks_generation: false,
        allow_create_on_update: false,
        return_deleted_object: false,
        storage_version: s.version.into(),
        schema: None,
        validate_schema: false,
        printer_columns: Vec::new(),
        selectable_fields: Vec::new(),
        behavior: Behavior::Plain,
        openapi_name: s.openapi.into(),
        crd_name: None,
    }
}

/// `namespaces` (core/v1).
pub(crate) fn namespaces() -> ResourceInfo {
    let mut r = base(&Spec {
        group: "",
        version: "v1",
        resource: "namespaces",
        kind: "Namespace",
        namespaced: false,
        short: &["ns"],
        openapi: "io.k8s.api.core.v1.Namespace",
    });
    r.status_subresource = true;
    r.return_deleted_object = true;
    r.behavior = Behavior::Namespace;
    r.selectable_fields = vec!["status.phase".into()];
    r.printer_columns = vec![col(
        "Status",
        "string",
        ".status.phase",
        "The status of the namespace",
        0,
    )];
    r
}

/// `configmaps` (core/v1).
pub(crate) fn configmaps() -> ResourceInfo {
    let mut r = base(&Spec {
        group: "",
        version: "v1",
        resource: "configmaps",
        kind: "ConfigMap",
        namespaced: true,
        short: &["cm"],
        openapi: "io.k8s.api.core.v1.ConfigMap",
    });
    r.printer_columns = vec![col(
        "Data",
        "integer",
        "!datacount",
        "Number of data entries",
        0,
    )];
    r
}

/// `secrets` (core/v1).
pub(crate) fn secrets() -> ResourceInfo {
    let mut r = base(&Spec {
        group: "",
        version: "v1",
        resource: "secrets",
        kind: "Secret",
        namespaced: true,
        short: &[],
        openapi: "io.k8s.api.core.v1.Secret",
    });
    r.selectable_fields = vec!["type".into()];
    r.printer_columns = vec![
        col("Type", "string", ".type", "The type of the secret", 0),
        col("Data", "integer", "!datacount", "Number of data entries", 0),
    ];
    r
}

/// `events` (core/v1).
pub(crate) fn events() -> ResourceInfo {
    let mut r = base(&Spec {
        group: "",
        version: "v1",
        resource: "events",
        kind: "Event",
        namespaced: true,
        short: &["ev"],
        openapi: "io.k8s.api.core.v1.Event",
    });
    r.allow_create_on_update = true;
    r.selectable_fields = [
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
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    r.printer_columns = vec![
        col("Type", "string", ".type", "Type of this event", 0),
        col(
            "Reason",
            "string",
            ".reason",
            "Short, machine understandable string that gives the reason",
            0,
        ),
        col(
            "Object",
            "string",
            "!eventobject",
            "The object this Event is about",
            0,
        ),
        col(
            "Message",
            "string",
            ".message",
            "A human-readable description of the status",
            0,
        ),
    ];
    r
}

/// `events` (events.k8s.io/v1): the same objects as core/v1 `events`.
pub(crate) fn events_v1() -> ResourceInfo {
    let mut r = base(&Spec {
        group: "events.k8s.io",
        version: "v1",
        resource: "events",
        kind: "Event",
        namespaced: true,
        short: &["ev"],
        openapi: "io.k8s.api.events.v1.Event",
    });
    r.allow_create_on_update = true;
    r.behavior = Behavior::EventsV1;
    r.printer_columns = vec![
        col("Type", "string", ".type", "Type of this event", 0),
        col("Reason", "string", ".reason", "Why the action was taken", 0),
        col(
            "Object",
            "string",
            "!eventobject",
            "The object this Event is about",
            0,
        ),
        col("Note", "string", ".note", "A human-readable description", 0),
    ];
    r
}

/// `deployments` (apps/v1).
pub(crate) fn deployments() -> ResourceInfo {
    let mut r = base(&Spec {
        group: "apps",
        version: "v1",
        resource: "deployments",
        kind: "Deployment",
        namespaced: true,
        short: &["deploy"],
        openapi: "io.k8s.api.apps.v1.Deployment",
    });
    r.categories = vec!["all".into()];
    r.status_subresource = true;
    r.tracks_generation = true;
    r.behavior = Behavior::Deployment;
    r.printer_columns = vec![
        col("Ready", "string", "!ready", "Number of the pod with ready state", 0),
        col("Up-to-date", "integer", ".status.updatedReplicas", "Total number of non-terminated pods targeted by this deployment that have the desired template spec", 0),
        col("Available", "integer", ".status.availableReplicas", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment", 0),
        col("Containers", "string", "!containers", "Names of each container in the template", 1),
        col("Images", "string", "!images", "Images referenced by each container in the template", 1),
        col("Selector", "string", "!selector", "Label selector for pods", 1),
    ];
    r
}

/// `replicasets` (apps/v1): written by the Deployment simulator, one per
/// template revision, for `kubectl rollout history` and `undo`.
pub(crate) fn replicasets() -> ResourceInfo {
    let mut r = base(&Spec {
        group: "apps",
        version: "v1",
        resource: "replicasets",
        kind: "ReplicaSet",
        namespaced: true,
        short: &["rs"],
        openapi: "io.k8s.api.apps.v1.ReplicaSet",
    });
    r.categories = vec!["all".into()];
    r.status_subresource = true;
    r.tracks_generation = true;
    r.printer_columns = vec![
        col(
            "Desired",
            "integer",
            ".spec.replicas",
            "Number of desired pods",
            0,
        ),
        col(
            "Current",
            "integer",
            ".status.replicas",
            "Number of actual pods",
            0,
        ),
        col(
            "Ready",
            "integer",
            ".status.readyReplicas",
            "Number of ready pods",
            0,
        ),
    ];
    r
}

/// `leases` (coordination.k8s.io/v1).
pub(crate) fn leases() -> ResourceInfo {
    let mut r = base(&Spec {
        group: "coordination.k8s.io",
        version: "v1",
        resource: "leases",
        kind: "Lease",
        namespaced: true,
        short: &[],
        openapi: "io.k8s.api.coordination.v1.Lease",
    });
    r.allow_create_on_update = true;
    r.printer_columns = vec![col(
        "Holder",
        "string",
        ".spec.holderIdentity",
        "The holder of the lease",
        0,
    )];
    r
}

/// `customresourcedefinitions` (apiextensions.k8s.io/v1).
pub(crate) fn customresourcedefinitions() -> ResourceInfo {
    let mut r = base(&Spec {
        group: "apiextensions.k8s.io",
        version: "v1",
        resource: "customresourcedefinitions",
        kind: "CustomResourceDefinition",
        namespaced: false,
        short: &["crd", "crds"],
        openapi:
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
    });
    r.status_subresource = true;
    r.tracks_generation = true;
    r.behavior = Behavior::CustomResourceDefinition;
    r.printer_columns = vec![col(
        "Created At",
        "date",
        ".metadata.creationTimestamp",
        "",
        0,
    )];
    r
}

/// Every built-in resource, in the order discovery lists their groups.
pub(crate) fn all() -> Vec<ResourceInfo> {
    vec![
        namespaces(),
        configmaps(),
        secrets(),
        events(),
        deployments(),
        replicasets(),
        events_v1(),
        leases(),
        customresourcedefinitions(),
    ]
}
