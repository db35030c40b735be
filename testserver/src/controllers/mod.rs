//! The background loops kube-controller-manager, the scheduler,
//! kubelets and apiextensions run that a controller under test notices:
//! the garbage collector (owner references, background / foreground /
//! orphan propagation), namespace termination, CRD instance cleanup, the
//! `default` ServiceAccount of each namespace, the Deployment simulator,
//! and, when the server has Nodes, the ReplicaSet, StatefulSet, DaemonSet
//! and Job controllers and the pods' scheduling and running. Syncs of one
//! object are queued and retried on the next tick when a write conflicts.

mod daemonset;
mod deployment;
mod job;
mod kubelet;
pub(crate) mod nodes;
mod pods;
mod replicaset;
pub(crate) mod serviceaccounts;
mod statefulset;

use crate::meta;
use crate::resource::ResourceInfo;
use crate::rest::{
    ControllerInputs, ControllerMsg, Core, DeleteOptions, Propagation, Subresource, WriteOptions,
};
use crate::status::GroupResource;
use serde_json::Value;
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

const RETRY_TICK: Duration = Duration::from_millis(100);

/// What a sync brings up to date.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum SyncKind {
    /// A Deployment's ReplicaSets and status.
    Deployment,
    /// A ReplicaSet's pods and status.
    ReplicaSet,
    /// A StatefulSet's pods and status.
    StatefulSet,
    /// A DaemonSet's pods and status.
    DaemonSet,
    /// A Job's pods and status.
    Job,
    /// A pod's scheduling and start.
    Pod,
    /// A namespace's `default` ServiceAccount.
    ServiceAccount,
}

/// One object a simulator syncs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Target {
    /// What is synced.
    pub kind: SyncKind,
    /// Its namespace.
    pub namespace: String,
    /// Its name (the namespace's, for [`SyncKind::ServiceAccount`]).
    pub name: String,
}

impl Target {
    /// A target of `kind`.
    pub(crate) fn new(kind: SyncKind, namespace: &str, name: &str) -> Self {
        Self {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// A Deployment.
    pub(crate) fn deployment(namespace: &str, name: &str) -> Self {
        Self::new(SyncKind::Deployment, namespace, name)
    }

    /// The controller kind that syncs objects of `kind` (apps/v1 and
    /// batch/v1 workloads), if any.
    pub(crate) fn for_kind(api_version: &str, kind: &str) -> Option<SyncKind> {
        Some(match (api_version, kind) {
            ("apps/v1", "Deployment") => SyncKind::Deployment,
            ("apps/v1", "ReplicaSet") => SyncKind::ReplicaSet,
            ("apps/v1", "StatefulSet") => SyncKind::StatefulSet,
            ("apps/v1", "DaemonSet") => SyncKind::DaemonSet,
            ("batch/v1", "Job") => SyncKind::Job,
            _ => return None,
        })
    }
}

#[derive(Default)]
struct Pending {
    namespaces: HashSet<String>,
    crds: HashSet<String>,
    owners: bool,
    syncs: BTreeSet<Target>,
}

/// Runs the controllers until shutdown.
pub(crate) async fn run(
    core: Arc<Core>,
    mut inputs: ControllerInputs,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut pending = Pending::default();
    let mut tick = tokio::time::interval(RETRY_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            msg = inputs.rx.recv() => match msg {
                Some(m) => handle(&core, m, &mut pending),
                None => return,
            },
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        progress(&core, &mut pending);
    }
}

fn handle(core: &Arc<Core>, msg: ControllerMsg, pending: &mut Pending) {
    match msg {
        ControllerMsg::Removed { uid } => collect_dependents(core, &uid),
        ControllerMsg::OwnerDeleting => pending.owners = true,
        ControllerMsg::CheckOwners { location } => check_dependent(core, &location.0, &location.1),
        ControllerMsg::NamespaceTerminating { name } => {
            pending.namespaces.insert(name);
        }
        ControllerMsg::CrdDeleting { name } => {
            pending.crds.insert(name);
        }
        ControllerMsg::DeploymentChanged { namespace, name } => {
            deployment::schedule(core, namespace, name)
        }
        ControllerMsg::Sync(target) => {
            pending.syncs.insert(target);
        }
        ControllerMsg::NodesChanged => resync_all(core, pending),
    }
}

fn progress(core: &Arc<Core>, pending: &mut Pending) {
    if pending.owners {
        pending.owners = process_deleting_owners(core);
    }
    pending.namespaces.retain(|ns| !finish_namespace(core, ns));
    pending.crds.retain(|crd| !finish_crd(core, crd));
    let syncs = std::mem::take(&mut pending.syncs);
    for t in syncs {
        if let Err(e) = sync(core, &t) {
            // a conflict with another writer: again on the next tick
            tracing::debug!(target = ?t, error = %e, "simulator sync (will retry)");
            pending.syncs.insert(t);
        }
    }
}

fn sync(core: &Core, t: &Target) -> Result<(), crate::status::StatusError> {
    let (ns, name) = (t.namespace.as_str(), t.name.as_str());
    match t.kind {
        SyncKind::Deployment => deployment::sync(core, ns, name),
        SyncKind::ServiceAccount => serviceaccounts::ensure_default(core, name),
        _ if !nodes::has_nodes(core) => Ok(()),
        SyncKind::ReplicaSet => replicaset::sync(core, ns, name),
        SyncKind::StatefulSet => statefulset::sync(core, ns, name),
        SyncKind::DaemonSet => daemonset::sync(core, ns, name),
        SyncKind::Job => job::sync(core, ns, name),
        SyncKind::Pod => kubelet::sync_pod(core, ns, name),
    }
}

/// Queues every workload and pod (Nodes came or went).
fn resync_all(core: &Core, pending: &mut Pending) {
    let kinds = [
        ("apps", "deployments", SyncKind::Deployment),
        ("apps", "replicasets", SyncKind::ReplicaSet),
        ("apps", "statefulsets", SyncKind::StatefulSet),
        ("apps", "daemonsets", SyncKind::DaemonSet),
        ("batch", "jobs", SyncKind::Job),
        ("", "pods", SyncKind::Pod),
    ];
    for (group, resource, kind) in kinds {
        let store = core.resource_store(&crate::builtin::get(group, resource));
        for key in store.keys_with_prefix("") {
            if let Some((ns, name)) = key.split_once('/') {
                pending.syncs.insert(Target::new(kind, ns, name));
            }
        }
    }
}

fn info_for(core: &Core, key: &GroupResource) -> Option<Arc<ResourceInfo>> {
    core.registry.storage_info(&key.group, &key.resource)
}

fn background() -> DeleteOptions {
    DeleteOptions {
        propagation: Some(Propagation::Background),
        ..DeleteOptions::default()
    }
}

/// Checks every dependent of a removed owner.
fn collect_dependents(core: &Core, uid: &str) {
    for (key, objkey) in core.store.dependents_of(uid) {
        check_dependent(core, &key, &objkey);
    }
}

/// Deletes a dependent whose owners are all gone; drops references to
/// missing owners from a dependent that still has a live owner.
fn check_dependent(core: &Core, key: &GroupResource, objkey: &str) {
    let (Some(info), Some(rs)) = (info_for(core, key), core.store.resource(key)) else {
        return;
    };
    let Some(obj) = rs.get(objkey) else { return };
    let owners = meta::owner_uids(obj.value());
    if owners.is_empty() || meta::is_deleting(obj.value()) {
        return;
    }
    let live: Vec<&String> = owners
        .iter()
        .filter(|o| core.store.locate_uid(o).is_some())
        .collect();
    if live.len() == owners.len() {
        return;
    }
    if live.is_empty() {
        match core.delete(&info, obj.namespace(), obj.name(), &background()) {
            Ok(_) => tracing::debug!(resource = %key, object = %objkey, "garbage collected"),
            Err(e) if e.code == 404 => {}
            Err(e) => {
                tracing::warn!(resource = %key, object = %objkey, error = %e, "garbage collection failed")
            }
        }
    } else {
        let keep: Vec<String> = live.into_iter().cloned().collect();
        rewrite_owner_refs(core, &info, obj.value(), |r| {
            keep.iter().any(|k| r["uid"] == k.as_str())
        });
    }
}

fn rewrite_owner_refs(
    core: &Core,
    info: &ResourceInfo,
    obj: &Value,
    keep: impl Fn(&Value) -> bool,
) {
    let refs: Vec<Value> = meta::owner_refs(obj)
        .into_iter()
        .filter(|r| keep(r))
        .collect();
    let mut new = obj.clone();
    let m = meta::metadata_mut(&mut new);
    if refs.is_empty() {
        m.remove("ownerReferences");
    } else {
        m.insert("ownerReferences".into(), Value::Array(refs));
    }
    if let Err(e) = core.update(
        info,
        meta::namespace(obj),
        meta::name(obj),
        new,
        Subresource::Main,
        &WriteOptions::default(),
    ) {
        tracing::debug!(error = %e, "updating owner references (will retry)");
    }
}

fn remove_finalizer(core: &Core, info: &ResourceInfo, obj: &Value, finalizer: &str) -> bool {
    let mut new = obj.clone();
    let list: Vec<String> = meta::finalizers(obj)
        .into_iter()
        .filter(|f| f != finalizer)
        .collect();
    meta::set_finalizers(&mut new, &list);
    match core.update(
        info,
        meta::namespace(obj),
        meta::name(obj),
        new,
        Subresource::Main,
        &WriteOptions::default(),
    ) {
        Ok(_) => true,
        Err(e) if e.code == 404 => true,
        Err(e) => {
            tracing::debug!(error = %e, "removing finalizer {finalizer} (will retry)");
            false
        }
    }
}

/// Advances owners waiting on `orphan` or `foregroundDeletion`; returns
/// whether any is still waiting.
fn process_deleting_owners(core: &Core) -> bool {
    let mut waiting = false;
    for rs in core.store.all_resources() {
        let Some(info) = info_for(core, rs.key()) else {
            continue;
        };
        for key in rs.keys_with_prefix("") {
            let Some(owner) = rs.get(&key) else { continue };
            if !meta::is_deleting(owner.value()) {
                continue;
            }
            let finalizers = meta::finalizers(owner.value());
            let uid = owner.uid().to_owned();
            if finalizers.iter().any(|f| f == "orphan") {
                for (dkey, dobj) in core.store.dependents_of(&uid) {
                    let (Some(dinfo), Some(drs)) =
                        (info_for(core, &dkey), core.store.resource(&dkey))
                    else {
                        continue;
                    };
                    if let Some(d) = drs.get(&dobj) {
                        rewrite_owner_refs(core, &dinfo, d.value(), |r| r["uid"] != uid.as_str());
                    }
                }
                if core.store.dependents_of(&uid).is_empty() {
                    remove_finalizer(core, &info, owner.value(), "orphan");
                } else {
                    waiting = true;
                }
            } else if finalizers.iter().any(|f| f == "foregroundDeletion") {
                let blocking = foreground_dependents(core, &uid);
                if blocking == 0 {
                    remove_finalizer(core, &info, owner.value(), "foregroundDeletion");
                } else {
                    waiting = true;
                }
            }
        }
    }
    waiting
}

/// Deletes the dependents of a foreground-deleted owner; returns how many
/// still block it (dependents with `blockOwnerDeletion: true`).
fn foreground_dependents(core: &Core, uid: &str) -> usize {
    let mut blocking = 0;
    for (dkey, dobj) in core.store.dependents_of(uid) {
        let (Some(dinfo), Some(drs)) = (info_for(core, &dkey), core.store.resource(&dkey)) else {
            continue;
        };
        let Some(d) = drs.get(&dobj) else { continue };
        let blocks = meta::owner_refs(d.value())
            .iter()
            .any(|r| r["uid"] == uid && r["blockOwnerDeletion"].as_bool() == Some(true));
        if blocks {
            blocking += 1;
        }
        if !meta::is_deleting(d.value()) {
            let opts = DeleteOptions {
                propagation: Some(Propagation::Foreground),
                ..DeleteOptions::default()
            };
            if let Err(e) = core.delete(&dinfo, d.namespace(), d.name(), &opts) {
                tracing::debug!(error = %e, "foreground deletion of a dependent (will retry)");
            }
        }
    }
    blocking
}

/// Deletes everything in a terminating namespace, then the namespace.
/// Returns true when the namespace is gone.
fn finish_namespace(core: &Core, ns: &str) -> bool {
    let mut remaining = 0;
    for info in namespaced_storage_infos(core) {
        let rs = core.resource_store(&info);
        for key in rs.keys_with_prefix(&format!("{ns}/")) {
            remaining += 1;
            let Some(obj) = rs.get(&key) else { continue };
            if !meta::is_deleting(obj.value()) {
                if let Err(e) = core.delete(&info, ns, obj.name(), &background()) {
                    tracing::debug!(error = %e, "namespace cleanup (will retry)");
                }
            }
        }
    }
    let ns_info = crate::builtin::namespaces();
    let Ok(obj) = core.get(&ns_info, "", ns) else {
        return true;
    };
    if remaining > 0 {
        return false;
    }
    let mut new = obj.value().clone();
    if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("finalizers".into(), Value::Array(Vec::new()));
    }
    match core.update(
        &ns_info,
        "",
        ns,
        new,
        Subresource::Main,
        &WriteOptions::default(),
    ) {
        Ok(_) => core.get(&ns_info, "", ns).is_err(),
        Err(e) => e.code == 404,
    }
}

fn namespaced_storage_infos(core: &Core) -> Vec<Arc<ResourceInfo>> {
    core.registry
        .all()
        .into_iter()
        .filter(|i| {
            i.namespaced
                && i.is_storage_version()
                && i.behavior != crate::resource::Behavior::EventsV1
        })
        .collect()
}

/// Deletes a terminating CRD's objects, unregisters it, then lets it go.
/// Returns true when it is gone.
fn finish_crd(core: &Core, name: &str) -> bool {
    let crd_info = crate::builtin::customresourcedefinitions();
    let Ok(crd) = core.get(&crd_info, "", name) else {
        return true;
    };
    let infos = crate::crd::resource_infos(crd.value());
    if let Some(info) = infos
        .iter()
        .find(|i| i.is_storage_version())
        .or(infos.first())
    {
        let key = info.group_resource();
        if let Some(rs) = core.store.resource(&key) {
            let keys = rs.keys_with_prefix("");
            for k in &keys {
                if let Some(o) = rs.get(k) {
                    if !meta::is_deleting(o.value()) {
                        if let Err(e) = core.delete(info, o.namespace(), o.name(), &background()) {
                            tracing::debug!(error = %e, "CRD instance cleanup (will retry)");
                        }
                    }
                }
            }
            if rs.len() > 0 {
                return false;
            }
        }
        core.registry.unregister(&key.group, &key.resource);
        core.store.remove_resource(&key);
    }
    remove_finalizer(core, &crd_info, crd.value(), crate::crd::CLEANUP_FINALIZER)
        && core.get(&crd_info, "", name).is_err()
}
