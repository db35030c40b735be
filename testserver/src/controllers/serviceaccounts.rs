//! The service-account controller: every active namespace has a
//! `default` ServiceAccount, made when the namespace is and again if it
//! is deleted, as kube-controller-manager keeps it.

use crate::meta;
use crate::rest::{Core, WriteOptions};
use crate::status::StatusError;
use serde_json::json;

/// Creates `default` in `namespace` unless it exists or the namespace is
/// gone or terminating.
pub(crate) fn ensure_default(core: &Core, namespace: &str) -> Result<(), StatusError> {
    match core.get(&crate::builtin::namespaces(), "", namespace) {
        Ok(ns) if !meta::is_deleting(ns.value()) => {}
        Ok(_) => return Ok(()),
        Err(e) if e.code == 404 => return Ok(()),
        Err(e) => return Err(e),
    }
    let info = crate::builtin::get("", "serviceaccounts");
    if core.get(&info, namespace, "default").is_ok() {
        return Ok(());
    }
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    let opts = WriteOptions {
        field_manager: Some("kube-controller-manager".into()),
        ..WriteOptions::default()
    };
    match core.create(&info, namespace, sa, &opts) {
        Ok(_) => Ok(()),
        Err(e) if e.code == 409 || e.code == 403 || e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
