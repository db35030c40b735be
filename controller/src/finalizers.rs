//! Finalizers, as operators use them: a reconciler wrapped in [`finalizer`]
//! puts its finalizer on every object it sees, and once the object's
//! deletion is requested it runs the cleanup, then removes its finalizer so
//! the API server can delete the object. CT14.
//!
//! ```no_run
//! use std::sync::Arc;
//! use kcontrol_client::Api;
//! use kcontrol_controller::finalizers::{finalizer, Event, FinalizerError};
//! use kcontrol_controller::{Action, Context};
//! use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
//! use kcontrol_indexer::Object;
//!
//! async fn reconcile(
//!     cm: Arc<ConfigMap>,
//!     ctx: Context<ConfigMap>,
//! ) -> Result<Action, FinalizerError<kcontrol_client::Error>> {
//!     let api = Api::<ConfigMap>::namespaced(ctx.client().clone(), cm.namespace().unwrap_or_default());
//!     finalizer(&api, "example.com/cleanup", cm, |event| async move {
//!         match event {
//!             // create or update what the object asks for
//!             Event::Apply(_cm) => Ok(Action::Done),
//!             // delete what lives outside the cluster (idempotent)
//!             Event::Cleanup(_cm) => Ok(Action::Done),
//!         }
//!     })
//!     .await
//! }
//! ```
//!
//! # Concurrent writers
//!
//! Every write is a JSON patch (RFC 6902) whose `test` operations make it
//! apply only to the state it was computed from, so that a concurrent
//! writer's change to `metadata.finalizers` (another controller adding or
//! removing its own finalizer) is never lost:
//!
//! - adding, when the object has a finalizers list: `test` that the list is
//!   still the one read, then `add` at its end. Writes to other fields
//!   (status, labels, spec) do not conflict. When it has no list: `test`
//!   the `resourceVersion` (a `test` of an absent member fails under
//!   RFC 6902, so the list's absence cannot be tested portably), then
//!   `add` the list `[name]`;
//! - removing: `test` that the entry at our index is still our name, then
//!   `remove` that index: only ours goes, whatever else the list holds;
//! - both also `test` the object's `uid`, so a deleted and re-created
//!   object of the same name is never written for the old one.
//!
//! A failed `test` is an error (422 from the API server): the reconcile is
//! retried with the next cache state. A merge patch could not do this
//! (it replaces the whole list, dropping a finalizer added meanwhile), and a
//! `resourceVersion` precondition on every write would conflict with any
//! unrelated write.
//!
//! # Re-triggering
//!
//! Adding the finalizer returns [`Action::Done`]: the watch event of that
//! write re-triggers the reconcile, which then sees the finalizer and runs
//! [`Event::Apply`]. A controller whose predicate filters metadata-only
//! updates (such as
//! [`Predicate::generation_changed`](crate::predicate::Predicate::generation_changed))
//! must let that event through, e.g. with
//! `.or(Predicate::on_update(|old, new| old.meta().finalizers != new.meta().finalizers))`.

use std::future::Future;
use std::sync::Arc;

use kcontrol_client::{Api, Error as ClientError, Patch, PatchParams};
use kcontrol_indexer::Object;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::reconciler::Action;

/// What the function given to [`finalizer`] is asked to do.
#[derive(Debug)]
pub enum Event<K> {
    /// The object is live and carries the finalizer: bring the world in
    /// line with it (the usual reconcile).
    Apply(Arc<K>),
    /// The object's deletion was requested and it still carries the
    /// finalizer: clean up what the finalizer guards. Success removes the
    /// finalizer; an error keeps it, and the reconcile is retried. Must be
    /// idempotent: it runs again when removing the finalizer fails.
    Cleanup(Arc<K>),
}

/// Why [`finalizer`] failed. Every variant leaves the object as it was
/// (the finalizer is added or removed by one write, or not at all).
#[derive(Debug, thiserror::Error)]
pub enum FinalizerError<E: std::error::Error + 'static> {
    /// [`Event::Apply`] failed.
    #[error("apply failed: {0}")]
    Apply(#[source] E),
    /// [`Event::Cleanup`] failed: the finalizer stays, the object is kept.
    #[error("cleanup failed: {0}")]
    Cleanup(#[source] E),
    /// Writing the finalizer into the object failed; a conflicting
    /// concurrent write (a failed `test`) is a 422 error.
    #[error("cannot add the finalizer {finalizer:?}: {source}")]
    AddFinalizer {
        /// The finalizer.
        finalizer: String,
        /// The API error.
        #[source]
        source: ClientError,
    },
    /// Removing the finalizer after the cleanup failed (the cleanup will
    /// run again).
    #[error("cannot remove the finalizer {finalizer:?}: {source}")]
    RemoveFinalizer {
        /// The finalizer.
        finalizer: String,
        /// The API error.
        #[source]
        source: ClientError,
    },
    /// The finalizer name is empty or holds whitespace or control
    /// characters (a finalizer is a qualified name, `example.com/cleanup`).
    #[error("invalid finalizer name {0:?}: expected a qualified name such as example.com/cleanup")]
    InvalidName(String),
    /// The object lacks metadata the write needs (it did not come from the
    /// API server or its cache).
    #[error("the object has no metadata.{0}: finalizers are managed on objects read from the API server")]
    MissingMetadata(&'static str),
    /// The `Api` would write another namespace than the object's.
    #[error("the Api is for namespace {api:?} but the object is in {object:?}: use Api::namespaced with the object's namespace")]
    NamespaceMismatch {
        /// The `Api`'s namespace (`None`: all namespaces).
        api: Option<String>,
        /// The object's namespace.
        object: Option<String>,
    },
}

/// Runs `reconcile` under the finalizer `name` (CT14):
///
/// | object                                  | finalizer | what happens                                   |
/// |-----------------------------------------|-----------|------------------------------------------------|
/// | live                                    | absent    | it is added; `Ok(Action::Done)` (the write's event reconciles again); `reconcile` not called |
/// | live                                    | present   | `reconcile(Event::Apply(obj))`                 |
/// | `deletionTimestamp` set                 | present   | `reconcile(Event::Cleanup(obj))`; on success the finalizer (only ours) is removed and its `Action` returned |
/// | `deletionTimestamp` set                 | absent    | nothing: `Ok(Action::Done)`                    |
///
/// `api` must address the object's namespace (or be cluster-wide for a
/// cluster-scoped resource). See the [module docs](self) for why the writes
/// are safe against concurrent writers. A write answered 404 (the object is
/// already gone) is not an error.
///
/// # Errors
/// [`FinalizerError::Apply`] / [`FinalizerError::Cleanup`] when `reconcile`
/// fails (a failed cleanup keeps the finalizer: the object stays until a
/// retry succeeds); [`FinalizerError::AddFinalizer`] /
/// [`FinalizerError::RemoveFinalizer`] when the write fails (a concurrent
/// change to the finalizers included); [`FinalizerError::InvalidName`],
/// [`FinalizerError::MissingMetadata`],
/// [`FinalizerError::NamespaceMismatch`] for bad input, before any write.
pub async fn finalizer<K, F, Fut, E>(
    api: &Api<K>,
    name: &str,
    obj: Arc<K>,
    reconcile: F,
) -> Result<Action, FinalizerError<E>>
where
    K: Object + Serialize + DeserializeOwned,
    F: FnOnce(Event<K>) -> Fut,
    Fut: Future<Output = Result<Action, E>>,
    E: std::error::Error + 'static,
{
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(FinalizerError::InvalidName(name.to_owned()));
    }
    let object_name = obj
        .name()
        .filter(|n| !n.is_empty())
        .ok_or(FinalizerError::MissingMetadata("name"))?
        .to_owned();
    if api.resource().namespaced && api.namespace() != obj.namespace() {
        return Err(FinalizerError::NamespaceMismatch {
            api: api.namespace().map(str::to_owned),
            object: obj.namespace().map(str::to_owned),
        });
    }
    let position = obj
        .meta()
        .finalizers
        .as_deref()
        .unwrap_or_default()
        .iter()
        .position(|f| f == name);
    match (obj.deletion_timestamp().is_some(), position) {
        (false, Some(_)) => reconcile(Event::Apply(obj))
            .await
            .map_err(FinalizerError::Apply),
        (false, None) => {
            let patch = add_patch(&*obj, name)?;
            write(api, &object_name, patch).await.map_err(|source| {
                FinalizerError::AddFinalizer {
                    finalizer: name.to_owned(),
                    source,
                }
            })?;
            tracing::debug!(object = %object_name, finalizer = name, "finalizer added");
            Ok(Action::Done)
        }
        (true, Some(index)) => {
            // built before the cleanup, so that a bad object is refused
            // before anything is cleaned up
            let patch = remove_patch(&*obj, name, index);
            let action = reconcile(Event::Cleanup(obj))
                .await
                .map_err(FinalizerError::Cleanup)?;
            write(api, &object_name, patch).await.map_err(|source| {
                FinalizerError::RemoveFinalizer {
                    finalizer: name.to_owned(),
                    source,
                }
            })?;
            tracing::debug!(object = %object_name, finalizer = name, "cleanup done, finalizer removed");
            Ok(action)
        }
        (true, None) => Ok(Action::Done),
    }
}

/// One RFC 6902 operation.
#[derive(Debug, Serialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Op {
    Test { path: String, value: Value },
    Add { path: String, value: Value },
    Remove { path: String },
}

/// The value of an operation.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Value {
    Str(String),
    List(Vec<String>),
}

/// The `test` of the object's uid, when it has one.
fn uid_test<K: Object + ?Sized>(obj: &K) -> Option<Op> {
    obj.uid().filter(|u| !u.is_empty()).map(|uid| Op::Test {
        path: "/metadata/uid".into(),
        value: Value::Str(uid.to_owned()),
    })
}

/// The patch adding `name` to `obj`'s finalizers (see the module docs).
fn add_patch<K: Object + ?Sized, E: std::error::Error + 'static>(
    obj: &K,
    name: &str,
) -> Result<Vec<Op>, FinalizerError<E>> {
    let mut ops: Vec<Op> = uid_test(obj).into_iter().collect();
    match obj.meta().finalizers.as_deref() {
        Some(list) => {
            ops.push(Op::Test {
                path: "/metadata/finalizers".into(),
                value: Value::List(list.to_vec()),
            });
            ops.push(Op::Add {
                path: "/metadata/finalizers/-".into(),
                value: Value::Str(name.to_owned()),
            });
        }
        None => {
            let rv = obj
                .resource_version()
                .filter(|rv| !rv.is_empty())
                .ok_or(FinalizerError::MissingMetadata("resourceVersion"))?;
            ops.push(Op::Test {
                path: "/metadata/resourceVersion".into(),
                value: Value::Str(rv.to_owned()),
            });
            ops.push(Op::Add {
                path: "/metadata/finalizers".into(),
                value: Value::List(vec![name.to_owned()]),
            });
        }
    }
    Ok(ops)
}

/// The patch removing the finalizer `name`, found at `index` of `obj`'s
/// finalizers (see the module docs).
fn remove_patch<K: Object + ?Sized>(obj: &K, name: &str, index: usize) -> Vec<Op> {
    let path = format!("/metadata/finalizers/{index}");
    let mut ops: Vec<Op> = uid_test(obj).into_iter().collect();
    ops.push(Op::Test {
        path: path.clone(),
        value: Value::Str(name.to_owned()),
    });
    ops.push(Op::Remove { path });
    ops
}

/// Sends a JSON patch; a 404 (the object is gone) is no error.
async fn write<K>(api: &Api<K>, name: &str, ops: Vec<Op>) -> Result<(), ClientError>
where
    K: Object + Serialize + DeserializeOwned,
{
    match api
        .patch(name, &PatchParams::default(), &Patch::Json(ops))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() => {
            tracing::debug!(object = name, "gone before its finalizers were written");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    fn cm(finalizers: Option<&[&str]>) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.uid = Some("u-1".into());
        cm.metadata.resource_version = Some("7".into());
        cm.metadata.finalizers = finalizers.map(|f| f.iter().map(|s| (*s).to_owned()).collect());
        cm
    }

    fn json_of(ops: &[Op]) -> serde_json::Value {
        serde_json::to_value(ops).unwrap_or_default()
    }

    #[test]
    fn ct14_adding_tests_the_list_or_else_the_resource_version() {
        let ops = add_patch::<_, std::io::Error>(&cm(Some(&["x"])), "a/b").unwrap_or_default();
        assert_eq!(
            json_of(&ops),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u-1"},
                {"op": "test", "path": "/metadata/finalizers", "value": ["x"]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "a/b"},
            ])
        );
        let ops = add_patch::<_, std::io::Error>(&cm(None), "a/b").unwrap_or_default();
        assert_eq!(
            json_of(&ops),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u-1"},
                {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "add", "path": "/metadata/finalizers", "value": ["a/b"]},
            ])
        );
    }

    #[test]
    fn ct14_removing_tests_our_entry_by_index() {
        let ops = remove_patch(&cm(Some(&["x", "a/b", "y"])), "a/b", 1);
        assert_eq!(
            json_of(&ops),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u-1"},
                {"op": "test", "path": "/metadata/finalizers/1", "value": "a/b"},
                {"op": "remove", "path": "/metadata/finalizers/1"},
            ])
        );
    }
}
