//! What the server knows about one served resource version: names, scope,
//! subresources, the strategy switches that differ between kube's
//! resources, the schema and printer columns.

use crate::status::GroupResource;
use serde_json::Value;
use std::sync::Arc;

/// Resource-specific behaviour beyond plain storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behavior {
    /// Stored as given (configmaps, secrets, events, leases).
    Plain,
    /// `namespaces`: phase, the `kubernetes` finalizer, content removal.
    Namespace,
    /// `deployments`: defaults and the status simulator.
    Deployment,
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

/// A resource as served at one group/version.
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
}

impl ResourceInfo {
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
