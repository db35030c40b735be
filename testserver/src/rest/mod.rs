//! The REST storage layer: get, create, update (main resource and
//! `/status`), patch, delete and delete-collection with kube-apiserver's
//! semantics, on top of the store. HTTP handlers, the in-process API and
//! the background controllers all write through here.

mod allocate;
mod delete;
mod notify;
mod scale;
pub(crate) mod strategy;
mod write;

pub(crate) use write::{applied, patched};

pub(crate) use delete::{DeleteOptions, DeleteOutcome, Propagation};
pub(crate) use strategy::FieldValidation;

use crate::registry::Registry;
use crate::resource::ResourceInfo;
use crate::status::{GroupResource, StatusError};
use crate::store::{ResourceStore, Store, StoreError, StoredObject};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// The `/status` subresource or the main resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Subresource {
    /// The object itself.
    Main,
    /// `/status`.
    Status,
    /// `/scale`: writes the main resource's replicas.
    Scale,
}

/// Options of create, update and patch.
#[derive(Clone, Debug, Default)]
pub(crate) struct WriteOptions {
    /// `dryRun=All`: validate and answer, store nothing.
    pub dry_run: bool,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
    /// `fieldManager`.
    pub field_manager: Option<String>,
    /// The manager of a non-apply write without `fieldManager` (kube derives
    /// it from the User-Agent); `None` for the server's own writes.
    pub default_manager: Option<String>,
    /// `force=true` (apply only).
    pub force: bool,
    /// `managedFields` are already computed (by apply): record nothing.
    pub(crate) fields_recorded: bool,
    /// The body is the object a dry run of the same write returned
    /// (admission computed it, then called the validating webhooks): it
    /// is stored as it is, an update only if the object is still at the
    /// resourceVersion it carries.
    pub(crate) prepared: bool,
}

/// The manager the server's own writes are recorded as.
pub(crate) const SERVER_MANAGER: &str = "kcontrol-testserver";

impl WriteOptions {
    /// The manager a non-apply write is recorded as.
    pub(crate) fn update_manager(&self) -> &str {
        match (&self.field_manager, &self.default_manager) {
            (Some(m), _) if !m.is_empty() => m,
            (_, Some(d)) => d,
            _ => SERVER_MANAGER,
        }
    }
}

/// The result of a write.
#[derive(Debug)]
pub(crate) struct WriteResult {
    pub object: Arc<StoredObject>,
    pub created: bool,
    pub warnings: Vec<String>,
}

/// Work for the background controllers.
#[derive(Debug)]
pub(crate) enum ControllerMsg {
    /// An object is gone: collect its dependents.
    Removed { uid: String },
    /// An owner waits for foreground deletion or orphaning.
    OwnerDeleting,
    /// An object was written with owner references: collect it if its
    /// owners do not exist.
    CheckOwners {
        location: crate::store::ObjectLocation,
    },
    /// A namespace is terminating.
    NamespaceTerminating { name: String },
    /// A CRD is being deleted.
    CrdDeleting { name: String },
    /// A deployment's spec changed.
    DeploymentChanged { namespace: String, name: String },
    /// An object a simulator brings up to date changed.
    Sync(crate::controllers::Target),
    /// A Node was added, changed or removed: every workload and pod again.
    NodesChanged,
}

/// Receivers the controllers drain.
pub(crate) struct ControllerInputs {
    pub rx: mpsc::UnboundedReceiver<ControllerMsg>,
}

/// The API server's state and write logic.
pub(crate) struct Core {
    pub store: Store,
    pub registry: Registry,
    controllers: mpsc::UnboundedSender<ControllerMsg>,
    /// Delay before the Deployment simulator writes status; `None` = off.
    pub deployment_sim: parking_lot::RwLock<Option<Duration>>,
    /// Whether Pods can run: false plays a cluster without nodes, where
    /// the simulator reports Deployments observed but nothing available.
    pub nodes_ready: std::sync::atomic::AtomicBool,
    /// Services' cluster IPs and node ports.
    pub(crate) ipam: parking_lot::Mutex<crate::kinds::ipam::Ipam>,
    /// The scheduler's round-robin turn.
    pub(crate) scheduler_turn: std::sync::atomic::AtomicUsize,
    /// Pod IPs handed out.
    pub(crate) pod_ips: std::sync::atomic::AtomicU32,
    /// Nodes added through the API (their addresses and pod CIDRs).
    pub(crate) node_count: std::sync::atomic::AtomicU32,
}

/// Storage key of an object.
pub(crate) fn object_key(info: &ResourceInfo, namespace: &str, name: &str) -> String {
    if info.namespaced {
        format!("{namespace}/{name}")
    } else {
        name.to_owned()
    }
}

impl From<StoreError> for StatusError {
    fn from(e: StoreError) -> Self {
        StatusError::internal(&e.to_string())
    }
}

impl Core {
    /// A core with the built-in resources; the `default`, `kube-system`,
    /// `kube-public` and `kube-node-lease` namespaces with their `default`
    /// ServiceAccounts; and the `kubernetes` Service (`10.96.0.1:443` to
    /// `api_port`), as kube-apiserver and its controllers make them.
    pub(crate) fn new(
        history: usize,
        deployment_sim: Option<Duration>,
        api_port: u16,
    ) -> (Arc<Self>, ControllerInputs) {
        let (tx, rx) = mpsc::unbounded_channel();
        let core = Arc::new(Self {
            store: Store::new(history),
            registry: Registry::default(),
            controllers: tx,
            deployment_sim: parking_lot::RwLock::new(deployment_sim),
            nodes_ready: std::sync::atomic::AtomicBool::new(true),
            ipam: parking_lot::Mutex::default(),
            scheduler_turn: std::sync::atomic::AtomicUsize::new(0),
            pod_ips: std::sync::atomic::AtomicU32::new(0),
            node_count: std::sync::atomic::AtomicU32::new(0),
        });
        core.registry.register_shared(crate::builtin::all());
        core.registry.register(crate::admission::resources());
        for info in core.registry.all() {
            core.resource_store(&info);
        }
        let ns = crate::builtin::namespaces();
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let obj = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            if let Err(e) = core.create(&ns, "", obj, &WriteOptions::default()) {
                tracing::error!(namespace = name, error = %e, "creating a start-up namespace");
            }
            if let Err(e) = crate::controllers::serviceaccounts::ensure_default(&core, name) {
                tracing::error!(namespace = name, error = %e, "creating a default service account");
            }
        }
        let kubernetes = serde_json::json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"clusterIP": crate::kinds::ipam::KUBERNETES_SERVICE_IP.to_string(),
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": api_port}]}});
        let svc = crate::builtin::get("", "services");
        if let Err(e) = core.create(&svc, "default", kubernetes, &WriteOptions::default()) {
            tracing::error!(error = %e, "creating the kubernetes service");
        }
        (core, ControllerInputs { rx })
    }

    pub(crate) fn notify(&self, msg: ControllerMsg) {
        // the receiver lives as long as the server; after shutdown nothing listens
        let _ = self.controllers.send(msg);
    }

    /// The storage of a resource.
    pub(crate) fn resource_store(&self, info: &ResourceInfo) -> Arc<ResourceStore> {
        if info.behavior == crate::resource::Behavior::EventsV1 {
            return self
                .store
                .ensure_resource(&GroupResource::new("", "events"));
        }
        self.store.ensure_resource(&info.group_resource())
    }

    /// GET of one object.
    pub(crate) fn get(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<StoredObject>, StatusError> {
        self.resource_store(info)
            .get(&object_key(info, namespace, name))
            .ok_or_else(|| StatusError::not_found(&info.group_resource(), name))
    }

    /// A namespace that exists and is not terminating, for creates in it.
    pub(crate) fn check_namespace(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        name: &str,
    ) -> Result<(), StatusError> {
        if !info.namespaced {
            return Ok(());
        }
        let ns = self
            .store
            .ensure_resource(&GroupResource::new("", "namespaces"))
            .get(namespace)
            .ok_or_else(|| {
                StatusError::not_found(&GroupResource::new("", "namespaces"), namespace)
            })?;
        if crate::meta::is_deleting(ns.value()) {
            let mut e = StatusError::forbidden(
                &info.group_resource(),
                name,
                &format!("unable to create new content in namespace {namespace} because it is being terminated"),
            );
            if let Some(serde_json::Value::Object(d)) = e.details.as_deref_mut() {
                d.insert(
                    "causes".into(),
                    serde_json::json!([{"reason": "NamespaceTerminating", "message": format!("namespace {namespace} is being terminated"), "field": "metadata.namespace"}]),
                );
            }
            return Err(e);
        }
        Ok(())
    }
}
