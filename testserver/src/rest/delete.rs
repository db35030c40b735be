//! DELETE and DELETE-collection: preconditions, finalizers and
//! `deletionTimestamp`, propagation policies (the `orphan` and
//! `foregroundDeletion` finalizers), namespaces and CRDs that empty
//! themselves before they go.

use super::{object_key, ControllerMsg, Core};
use crate::meta;
use crate::resource::{Behavior, ResourceInfo};
use crate::selector::Filter;
use crate::status::StatusError;
use crate::store::StoredObject;
use crate::timeutil;
use serde_json::{json, Value};
use std::sync::Arc;

/// `propagationPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Propagation {
    /// Dependents keep living; their owner references are removed.
    Orphan,
    /// The owner goes now; the garbage collector removes dependents.
    Background,
    /// Dependents go first, then the owner.
    Foreground,
}

impl Propagation {
    /// Parses kube's spelling.
    pub(crate) fn parse(s: &str) -> Result<Self, StatusError> {
        match s {
            "Orphan" => Ok(Self::Orphan),
            "Background" => Ok(Self::Background),
            "Foreground" => Ok(Self::Foreground),
            other => Err(StatusError::invalid(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                &[crate::status::FieldError::not_supported(
                    "propagationPolicy",
                    json!(other),
                    &[
                        "Foreground".into(),
                        "Background".into(),
                        "Orphan".into(),
                        "nil".into(),
                    ],
                )],
            )),
        }
    }
}

/// `DeleteOptions`.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeleteOptions {
    pub propagation: Option<Propagation>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    pub dry_run: bool,
}

impl DeleteOptions {
    /// Reads a `DeleteOptions` body (JSON); query parameters may override.
    pub(crate) fn from_body(body: &Value) -> Result<Self, StatusError> {
        let mut o = Self::default();
        if let Some(p) = body.get("propagationPolicy").and_then(Value::as_str) {
            o.propagation = Some(Propagation::parse(p)?);
        } else if let Some(orphan) = body.get("orphanDependents").and_then(Value::as_bool) {
            o.propagation = Some(if orphan {
                Propagation::Orphan
            } else {
                Propagation::Background
            });
        }
        o.precondition_uid = body["preconditions"]["uid"].as_str().map(str::to_owned);
        o.precondition_rv = body["preconditions"]["resourceVersion"]
            .as_str()
            .map(str::to_owned);
        o.dry_run = body["dryRun"]
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v == "All"));
        Ok(o)
    }
}

/// What a delete did.
#[derive(Debug)]
pub(crate) enum DeleteOutcome {
    /// The object is gone (carries its last state).
    Deleted(Arc<StoredObject>),
    /// The object waits for finalizers (carries it with deletionTimestamp).
    Pending(Arc<StoredObject>),
}

/// Whether a terminating object has nothing left that holds it.
pub(crate) fn can_remove(info: &ResourceInfo, obj: &Value) -> bool {
    if !meta::finalizers(obj).is_empty() {
        return false;
    }
    if info.behavior == Behavior::Namespace {
        return obj["spec"]["finalizers"]
            .as_array()
            .is_none_or(Vec::is_empty);
    }
    true
}

impl Core {
    /// DELETE of one object.
    pub(crate) fn delete(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<DeleteOutcome, StatusError> {
        let key = object_key(info, namespace, name);
        let rs = self.resource_store(info);
        let mut tx = rs.write(&self.store);
        let Some(old) = tx.get(&key) else {
            return Err(StatusError::not_found(&info.group_resource(), name));
        };
        check_preconditions(info, name, &old, opts)?;
        let mut finalizers = meta::finalizers(old.value());
        let add = match opts.propagation {
            Some(Propagation::Orphan) => Some("orphan"),
            Some(Propagation::Foreground) => Some("foregroundDeletion"),
            _ => None,
        };
        if let Some(f) = add {
            if !finalizers.iter().any(|x| x == f) {
                finalizers.push(f.to_owned());
            }
        }
        let special = matches!(
            info.behavior,
            Behavior::Namespace | Behavior::CustomResourceDefinition
        );
        if meta::is_deleting(old.value())
            && (finalizers == meta::finalizers(old.value()) || special)
        {
            return Ok(DeleteOutcome::Pending(old));
        }
        if info.behavior == Behavior::CustomResourceDefinition
            && !finalizers
                .iter()
                .any(|f| f == crate::crd::CLEANUP_FINALIZER)
        {
            finalizers.push(crate::crd::CLEANUP_FINALIZER.to_owned());
        }
        let mut new = old.value().clone();
        meta::set_finalizers(&mut new, &finalizers);
        if special || !can_remove(info, &new) {
            if opts.dry_run {
                return Ok(DeleteOutcome::Pending(old));
            }
            if !meta::is_deleting(&new) {
                mark_deleting(info, &mut new);
            }
            let ev = tx.put(&key, new)?;
            drop(tx);
            match info.behavior {
                Behavior::Namespace => self.notify(ControllerMsg::NamespaceTerminating {
                    name: name.to_owned(),
                }),
                Behavior::CustomResourceDefinition => self.notify(ControllerMsg::CrdDeleting {
                    name: name.to_owned(),
                }),
                _ => {}
            }
            if add.is_some() {
                self.notify(ControllerMsg::OwnerDeleting);
            }
            return Ok(DeleteOutcome::Pending(ev.object.clone()));
        }
        if opts.dry_run {
            return Ok(DeleteOutcome::Deleted(old));
        }
        match tx.delete(&key)? {
            Some(ev) => {
                drop(tx);
                self.after_remove(info, &ev.object);
                Ok(DeleteOutcome::Deleted(ev.object.clone()))
            }
            None => Err(StatusError::not_found(&info.group_resource(), name)),
        }
    }

    /// Work that follows the removal of an object.
    pub(crate) fn after_remove(&self, info: &ResourceInfo, obj: &StoredObject) {
        self.release(info, obj.value(), None);
        self.notify_removed(info, obj);
        if !obj.uid().is_empty() {
            self.notify(ControllerMsg::Removed {
                uid: obj.uid().to_owned(),
            });
        }
    }

    /// DELETE on a collection: deletes every object the filter selects.
    pub(crate) fn delete_collection(
        &self,
        info: &ResourceInfo,
        namespace: Option<&str>,
        filter: &Filter,
        opts: &DeleteOptions,
    ) -> Result<Vec<Arc<StoredObject>>, StatusError> {
        let rs = self.resource_store(info);
        let prefix = namespace
            .filter(|_| info.namespaced)
            .map(|n| format!("{n}/"))
            .unwrap_or_default();
        let mut out = Vec::new();
        for key in rs.keys_with_prefix(&prefix) {
            let Some(obj) = rs.get(&key) else { continue };
            if !filter.matches(&obj) {
                continue;
            }
            match self.delete(info, obj.namespace(), obj.name(), opts) {
                Ok(DeleteOutcome::Deleted(o) | DeleteOutcome::Pending(o)) => out.push(o),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

fn mark_deleting(info: &ResourceInfo, obj: &mut Value) {
    let now = timeutil::now_rfc3339();
    let gen = meta::generation(obj);
    let m = meta::metadata_mut(obj);
    m.insert("deletionTimestamp".into(), json!(now));
    m.insert("deletionGracePeriodSeconds".into(), json!(0));
    if gen > 0 {
        m.insert("generation".into(), json!(gen + 1));
    }
    match info.behavior {
        Behavior::Namespace => {
            if let Some(root) = obj.as_object_mut() {
                root.insert("status".into(), json!({"phase": "Terminating"}));
            }
        }
        Behavior::CustomResourceDefinition => {
            let cond = json!({"type": "Terminating", "status": "True", "lastTransitionTime": now,
                "reason": "InstanceDeletionPending", "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"});
            if let Some(Value::Array(conds)) =
                obj.get_mut("status").and_then(|s| s.get_mut("conditions"))
            {
                conds.retain(|c| c["type"] != "Terminating");
                conds.push(cond);
            }
        }
        _ => {}
    }
}

fn check_preconditions(
    info: &ResourceInfo,
    name: &str,
    old: &StoredObject,
    opts: &DeleteOptions,
) -> Result<(), StatusError> {
    if let Some(uid) = opts.precondition_uid.as_deref().filter(|u| !u.is_empty()) {
        if uid != old.uid() {
            return Err(StatusError::conflict(
                &info.group_resource(),
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    old.uid()
                ),
            ));
        }
    }
    if let Some(rv) = opts.precondition_rv.as_deref().filter(|r| !r.is_empty()) {
        if rv != old.resource_version().to_string() {
            return Err(StatusError::conflict(
                &info.group_resource(),
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    old.resource_version()
                ),
            ));
        }
    }
    Ok(())
}
