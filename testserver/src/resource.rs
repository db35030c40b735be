//! What the server knows about one served resource version: names, scope,
//! subresources, the strategy switches that differ between kube's
//! resources, the schema and printer columns.

use crate::status::GroupResource;
use k8s_openapi::schemars::{Schema, SchemaGenerator};
use serde_json::Value;
use std::sync::{Arc, OnceLock};

/// Writes the OpenAPI schema of a kind into a generator (k8s-openapi's
/// `JsonSchema` impl of the type), registering what it references.
pub(crate) type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// Resource-specific behaviour beyond storage with the kind's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Behavior {
    /// Stored with the kind's defaults (configmaps, secrets, events,
    /// leases, RBAC, ...).
    Plain,
    /// `namespaces`: phase, the `kubernetes` finalizer, content removal.
    Namespace,
    /// `deployments`: defaults and the status simulator.
    Deployment,
    /// `pods`: defaults, initial status, scheduling and running on the
    /// server's Nodes.
    Pod,
    /// `services`: cluster IPs and node ports allocated, released on delete.
    Service,
    /// ReplicaSets, StatefulSets, DaemonSets, Jobs, CronJobs: defaults,
    /// and Pods made for them when the server has Nodes.
    Workload,
    /// `customresourcedefinitions`: registers and removes resources.
    CustomResourceDefinition,
    /// An instance of a custom resource.
    CustomResource,
    /// `events.k8s.io/v1` Events: the storage of `core/v1` Events, converted.
    EventsV1,
}

/// One column of a `Table` (`kubectl get`).
#[derive(Clone, Debug, PartialEq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// OpenAPI type of the cells (`string`, `integer`, `date`, ...).
    pub type_: String,
    /// Simple JSONPath (`.spec.replicas`) into the object.
    pub json_path: String,
    /// Column description.
    pub description: String,
    /// 0 for default columns, higher for `-o wide`.
    pub priority: i64,
}

/// Where a `scale` subresource reads and writes the replicas of an object
/// (kube's built-in `scale` subresources and a CRD's
/// `subresources.scale`), as dotted JSON paths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaleSubresource {
    /// The desired replicas (`.spec.replicas`).
    pub spec_replicas_path: String,
    /// The observed replicas (`.status.replicas`).
    pub status_replicas_path: String,
    /// The pod selector: a label-selector object (`.spec.selector` of the
    /// built-in kinds) or a selector string (a CRD's `.status.selector`).
    pub label_selector_path: Option<String>,
}

impl ScaleSubresource {
    /// `.spec.replicas`, `.status.replicas` and `.spec.selector`, as the
    /// built-in workloads have them.
    pub fn replicas() -> Self {
        Self {
            spec_replicas_path: ".spec.replicas".into(),
            status_replicas_path: ".status.replicas".into(),
            label_selector_path: Some(".spec.selector".into()),
        }
    }
}

/// A resource as served at one group/version.
///
/// Build one with [`ResourceInfo::new`] (any group, version and kind) or
/// [`ResourceInfo::of`] (a `k8s-openapi` type: its OpenAPI schema comes
/// along), set the public fields that differ, and register it with
/// [`TestServer::register_resource`](crate::TestServer::register_resource).
#[derive(Clone, Debug)]
pub struct ResourceInfo {
    /// API group, empty for core.
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource name (the path segment).
    pub resource: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// List kind.
    pub list_kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names (`cm`, `deploy`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Has a `/status` subresource.
    pub status_subresource: bool,
    /// Sets `metadata.generation` and bumps it on spec changes.
    pub tracks_generation: bool,
    /// PUT on a missing object creates it.
    pub allow_create_on_update: bool,
    /// DELETE answers with the deleted object instead of a Success Status.
    pub return_deleted_object: bool,
    /// The version objects are stored in.
    pub storage_version: String,
    /// OpenAPI v3 schema of the whole object (CRDs; used for validation).
    pub schema: Option<Arc<Value>>,
    /// Whether schema validation and pruning apply.
    pub validate_schema: bool,
    /// Extra `kubectl get` columns.
    pub printer_columns: Vec<PrinterColumn>,
    /// Field-selector fields beyond `metadata.name` and `metadata.namespace`.
    pub selectable_fields: Vec<String>,
    /// Resource-specific behaviour.
    pub behavior: Behavior,
    /// Name of the OpenAPI component schema for this kind.
    pub openapi_name: String,
    /// The CRD this resource comes from.
    pub crd_name: Option<String>,
    /// The `scale` subresource, if served.
    pub scale: Option<ScaleSubresource>,
    /// The OpenAPI schema of a built-in kind (k8s-openapi's).
    pub(crate) openapi_schema: Option<SchemaFn>,
    /// The kind's schema with refs inlined and kube's list, map and patch
    /// semantics attached, built on first use (server-side apply, strategic
    /// merge patches and pruning of built-in kinds walk it).
    pub(crate) structural: Arc<OnceLock<Option<Arc<Value>>>>,
}

impl ResourceInfo {
    /// A resource served at `group`/`version` under `plural`, stored as
    /// given (no defaults, no subresources, no schema): singular name the
    /// lower-case kind, list kind `<Kind>List`, stored in this version.
    /// Set the public fields that differ before registering it.
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        kind: impl Into<String>,
        plural: impl Into<String>,
        namespaced: bool,
    ) -> Self {
        let (group, version, kind) = (group.into(), version.into(), kind.into());
        let openapi_name = format!(
            "{}.{version}.{kind}",
            group.split('.').rev().collect::<Vec<_>>().join(".")
        );
        Self {
            singular: kind.to_ascii_lowercase(),
            list_kind: format!("{kind}List"),
            storage_version: version.clone(),
            resource: plural.into(),
            namespaced,
            short_names: Vec::new(),
            categories: Vec::new(),
            status_subresource: false,
            tracks_generation: false,
            allow_create_on_update: false,
            return_deleted_object: false,
            schema: None,
            validate_schema: false,
            printer_columns: Vec::new(),
            selectable_fields: Vec::new(),
            behavior: Behavior::Plain,
            openapi_name,
            crd_name: None,
            scale: None,
            openapi_schema: None,
            structural: Arc::default(),
            group,
            version,
            kind,
        }
    }

    /// The resource of a `k8s-openapi` type (`ResourceInfo::of::<Pod>()`):
    /// its group, version, kind, plural, list kind and scope, and its
    /// OpenAPI schema (served in `/openapi`, and the list, map and patch
    /// semantics of its fields). Subresources, short names, columns and
    /// defaults are what the server's own table adds for the kinds it
    /// serves; set the fields that matter for another kind.
    pub fn of<K>() -> Self
    where
        K: k8s_openapi::ListableResource + k8s_openapi::schemars::JsonSchema,
        K::Scope: kcontrol_indexer::Scope,
    {
        let mut r = Self::new(
            K::GROUP,
            K::VERSION,
            K::KIND,
            K::URL_PATH_SEGMENT,
            <K::Scope as kcontrol_indexer::Scope>::NAMESPACED,
        );
        r.list_kind = K::LIST_KIND.to_owned();
        r.openapi_name = K::schema_name().into_owned();
        r.openapi_schema = Some(|g: &mut SchemaGenerator| g.subschema_for::<K>());
        r
    }

    /// The group and plural resource.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.resource)
    }

    /// Whether objects of this resource have a protobuf encoding (the
    /// built-in kinds the protobuf module maps; never a custom resource).
    pub(crate) fn protobuf(&self) -> bool {
        self.crd_name.is_none() && crate::proto::supports(&self.api_version(), &self.kind)
    }

    /// `apiVersion` of objects served at this version.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `apiVersion` of the storage version.
    pub fn storage_api_version(&self) -> String {
        if self.group.is_empty() {
            self.storage_version.clone()
        } else {
            format!("{}/{}", self.group, self.storage_version)
        }
    }

    /// Whether this served version is the storage version.
    pub fn is_storage_version(&self) -> bool {
        self.version == self.storage_version
    }

    /// Fields a field selector may use on this resource.
    pub fn field_allowed(&self, field: &str) -> bool {
        field == "metadata.name"
            || (field == "metadata.namespace" && self.namespaced)
            || self.selectable_fields.iter().any(|f| f == field)
    }
}

/// The key of a resource's storage: group and plural (shared by all
/// served versions of a CRD).
pub(crate) type StorageKey = GroupResource;
