//! What a stored write or removal tells the simulators: Nodes coming and
//! going resync everything; a new namespace gets its `default`
//! ServiceAccount (again if it is deleted); and, when the server has
//! Nodes, a workload syncs itself, a pod gets scheduled and started, and
//! an object with a controller reference (a pod, a ReplicaSet) makes its
//! controller sync.

use super::{ControllerMsg, Core};
use crate::controllers::{nodes, SyncKind, Target};
use crate::meta;
use crate::resource::ResourceInfo;
use crate::store::StoredObject;
use serde_json::Value;

fn is(info: &ResourceInfo, group: &str, kind: &str) -> bool {
    info.crd_name.is_none() && info.group == group && info.kind == kind
}

impl Core {
    /// After a create or update was stored.
    pub(super) fn notify_write(&self, info: &ResourceInfo, created: bool, obj: &StoredObject) {
        if is(info, "", "Node") {
            self.notify(ControllerMsg::NodesChanged);
            return;
        }
        if created && is(info, "", "Namespace") {
            self.notify(ControllerMsg::Sync(Target::new(
                SyncKind::ServiceAccount,
                "",
                obj.name(),
            )));
        }
        if !nodes::has_nodes(self) {
            return;
        }
        let v = obj.value();
        let own =
            Target::for_kind(&info.api_version(), &info.kind).filter(|_| info.crd_name.is_none());
        if let Some(kind) = own.filter(|k| *k != SyncKind::Deployment) {
            self.notify(ControllerMsg::Sync(Target::new(
                kind,
                obj.namespace(),
                obj.name(),
            )));
        }
        if is(info, "", "Pod") && !meta::is_deleting(v) {
            self.notify(ControllerMsg::Sync(Target::new(
                SyncKind::Pod,
                obj.namespace(),
                obj.name(),
            )));
        }
        self.notify_controller(v);
    }

    /// After an object was removed.
    pub(super) fn notify_removed(&self, info: &ResourceInfo, obj: &StoredObject) {
        if is(info, "", "Node") {
            self.notify(ControllerMsg::NodesChanged);
        } else if is(info, "", "ServiceAccount") && obj.name() == "default" {
            self.notify(ControllerMsg::Sync(Target::new(
                SyncKind::ServiceAccount,
                "",
                obj.namespace(),
            )));
        } else if nodes::has_nodes(self) {
            self.notify_controller(obj.value());
        }
    }

    /// Queues the sync of `obj`'s controller (a workload of this server's).
    fn notify_controller(&self, obj: &Value) {
        for r in meta::owner_refs(obj) {
            if r["controller"] != true {
                continue;
            }
            let (Some(api_version), Some(kind), Some(name)) = (
                r["apiVersion"].as_str(),
                r["kind"].as_str(),
                r["name"].as_str(),
            ) else {
                continue;
            };
            if let Some(k) = Target::for_kind(api_version, kind) {
                self.notify(ControllerMsg::Sync(Target::new(
                    k,
                    meta::namespace(obj),
                    name,
                )));
            }
        }
    }
}
