//! Writes that converge in one call and do nothing when nothing differs,
//! so a controller at steady state writes nothing (CT19, CT20):
//!
//! - [`create_or_update`] (controller-runtime's `CreateOrUpdate`): gets
//!   the object, creates it if absent, else calls `mutate` on it and
//!   updates it only if `mutate` changed something; says which it did
//!   ([`Operation`]);
//! - [`apply_owned_if_changed`] (and [`Context::apply_owned`](crate::Context::apply_owned),
//!   which reads the controller's cache): server-side apply of an object
//!   a controller owns, sent only when the live object does not already
//!   hold every field the apply sets, with the same values.
//!
//! How "already holds" is judged: the desired object, as it would be
//! applied, is compared with the live one field by field — every field it
//! sets (maps recursively, lists item by item and of the same length) must
//! be in the live object with an equal value; fields only the live object
//! has (server defaults, other managers' fields, status) are ignored. To
//! notice a field the controller *stopped* setting (an apply would remove
//! it), the desired object carries a digest of itself in the annotation
//! [`APPLIED_DIGEST_ANNOTATION`]: dropping a field changes the digest, the
//! annotation differs, and the apply is sent. Values the server rewrites
//! (a quantity `0.5` stored as `500m`) must be given in the server's form,
//! else every reconcile writes again.

use kcontrol_client::{Api, Error as ClientError, PostParams};
use kcontrol_indexer::TypedResource;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::owner::{apply_owned, with_controller_ref};

/// The annotation holding the digest of what was last applied
/// ([`apply_owned_if_changed`]).
pub const APPLIED_DIGEST_ANNOTATION: &str = "kcontrol.dev/applied-digest";

/// What a converging write did (controller-runtime's `OperationResult`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// The object did not exist and was created.
    Created,
    /// The object existed and was written.
    Updated,
    /// The object already was as wanted: nothing was written.
    Unchanged,
}

/// Gets `name`, then: absent → a default object named `name` (in `api`'s
/// namespace) is passed to `mutate` and created; present → `mutate`
/// changes it in place and it is updated (a PUT carrying the version read,
/// so a concurrent write makes it fail with 409 rather than be lost) only
/// when `mutate` changed it. Returns what was done and the object as
/// stored (as read, when unchanged). CT19.
///
/// # Errors
/// The API server's errors; [`ClientError::InvalidRequest`] when `mutate`
/// changed the name or the namespace.
pub async fn create_or_update<T, F>(
    api: &Api<T>,
    name: &str,
    mutate: F,
) -> Result<(Operation, T), ClientError>
where
    T: TypedResource + Default + Serialize + DeserializeOwned,
    F: FnOnce(&mut T),
{
    let Some(mut object) = api.get_opt(name).await? else {
        let mut object = T::default();
        object.meta_mut().name = Some(name.to_owned());
        object.meta_mut().namespace = api.namespace().map(str::to_owned);
        let key = identity(&object);
        mutate(&mut object);
        check_identity(&key, &object)?;
        let created = api.create(&PostParams::default(), &object).await?;
        return Ok((Operation::Created, created));
    };
    let before = to_value(&object)?;
    let key = identity(&object);
    mutate(&mut object);
    check_identity(&key, &object)?;
    if to_value(&object)? == before {
        return Ok((Operation::Unchanged, object));
    }
    let updated = api.replace(name, &PostParams::default(), &object).await?;
    Ok((Operation::Updated, updated))
}

fn identity<T: TypedResource>(object: &T) -> (Option<String>, Option<String>) {
    let meta = object.meta();
    (meta.name.clone(), meta.namespace.clone())
}

fn check_identity<T: TypedResource>(
    key: &(Option<String>, Option<String>),
    object: &T,
) -> Result<(), ClientError> {
    if &identity(object) == key {
        Ok(())
    } else {
        Err(ClientError::InvalidRequest(
            "create_or_update: mutate must not change the object's name or namespace".to_owned(),
        ))
    }
}

fn to_value<T: Serialize>(object: &T) -> Result<Value, ClientError> {
    serde_json::to_value(object)
        .map_err(|e| ClientError::InvalidRequest(format!("cannot serialize the object: {e}")))
}

/// Server-side apply of `object`, controlled by `owner`, as
/// [`apply_owned`] does it — unless `live` (the object as it is now,
/// typically from the controller's cache) already holds every field the
/// apply would set, with the same values: then nothing is sent and the
/// answer is [`Operation::Unchanged`]. `live` is `None` when the object
/// does not exist (it is created). CT20; see the [module docs](self) for
/// how fields are compared.
///
/// # Errors
/// When `object` has no name, or the API server refuses the apply.
pub async fn apply_owned_if_changed<O, T>(
    api: &Api<T>,
    owner: &O,
    object: T,
    field_manager: &str,
    live: Option<&T>,
) -> Result<Operation, ClientError>
where
    O: TypedResource,
    T: TypedResource + Serialize + DeserializeOwned,
{
    let mut desired = with_controller_ref(owner, object)?;
    let digest = digest(&to_value(&desired)?);
    desired
        .meta_mut()
        .annotations
        .get_or_insert_with(Default::default)
        .insert(APPLIED_DIGEST_ANNOTATION.to_owned(), digest);
    if let Some(live) = live {
        if contains(&to_value(live)?, &to_value(&desired)?) {
            return Ok(Operation::Unchanged);
        }
    }
    apply_owned(api, owner, desired, field_manager).await?;
    Ok(if live.is_some() {
        Operation::Updated
    } else {
        Operation::Created
    })
}

/// Whether `live` holds every field of `desired` with an equal value:
/// maps recursively, lists item by item (same length). An empty map or
/// list, or a null, in `desired` matches an absent field (the API server
/// drops them).
pub(crate) fn contains(live: &Value, desired: &Value) -> bool {
    match (live, desired) {
        (Value::Object(live), Value::Object(desired)) => desired
            .iter()
            .all(|(k, d)| live.get(k).map_or_else(|| is_empty(d), |l| contains(l, d))),
        (Value::Array(live), Value::Array(desired)) => {
            live.len() == desired.len() && live.iter().zip(desired).all(|(l, d)| contains(l, d))
        }
        (Value::Number(l), Value::Number(d)) => numbers_equal(l, d),
        _ => live == desired || (is_empty(desired) && is_empty(live)),
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// `1` and `1.0` are one number to the API server.
fn numbers_equal(l: &serde_json::Number, d: &serde_json::Number) -> bool {
    l == d || matches!((l.as_f64(), d.as_f64()), (Some(a), Some(b)) if a == b)
}

/// A digest of `value` that does not depend on the order of map keys nor
/// on the Rust or crate version: FNV-1a (64 bits) over a canonical text,
/// as 16 hex digits. It detects change; it is not a security measure.
pub(crate) fn digest(value: &Value) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    canonical(value, &mut feed);
    format!("{hash:016x}")
}

fn canonical(value: &Value, feed: &mut impl FnMut(&[u8])) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            feed(b"{");
            for k in keys {
                feed(Value::String(k.clone()).to_string().as_bytes());
                feed(b":");
                if let Some(v) = map.get(k) {
                    canonical(v, feed);
                }
                feed(b",");
            }
            feed(b"}");
        }
        Value::Array(items) => {
            feed(b"[");
            for v in items {
                canonical(v, feed);
                feed(b",");
            }
            feed(b"]");
        }
        other => feed(other.to_string().as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn ct20_live_holding_every_desired_field_contains_it() {
        let live = json!({"metadata": {"name": "web", "uid": "u", "labels": {"app": "web", "x": "y"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "c", "image": "nginx", "imagePullPolicy": "Always"}]}}},
            "status": {"readyReplicas": 2}});
        let desired = json!({"metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        assert!(contains(&live, &desired));
        let more = json!({"spec": {"replicas": 3}});
        assert!(!contains(&live, &more));
        let other_image =
            json!({"spec": {"template": {"spec": {"containers": [{"image": "httpd"}]}}}});
        assert!(!contains(&live, &other_image));
        let two_containers = json!({"spec": {"template": {"spec": {"containers": [{}, {}]}}}});
        assert!(!contains(&live, &two_containers));
        let absent = json!({"spec": {"paused": true}});
        assert!(!contains(&live, &absent));
        let empties =
            json!({"metadata": {"annotations": {}, "finalizers": []}, "spec": {"x": null}});
        assert!(contains(&live, &empties));
        assert!(contains(&json!({"n": 1.0}), &json!({"n": 1})));
    }

    #[test]
    fn digests_ignore_key_order_and_see_every_change() {
        let a = json!({"b": 1, "a": [1, {"y": "z", "x": null}]});
        let b: Value =
            serde_json::from_str(r#"{"a": [1, {"x": null, "y": "z"}], "b": 1}"#).unwrap();
        assert_eq!(digest(&a), digest(&b));
        assert_eq!(digest(&a).len(), 16);
        assert_ne!(digest(&a), digest(&json!({"b": 1, "a": [1, {"y": "z"}]})));
        assert_ne!(digest(&json!({"a": "1"})), digest(&json!({"a": 1})));
        // a stable value: the same text in every process and release
        assert_eq!(digest(&json!({})), "08f44b07b5901a25");
        assert_eq!(digest(&json!({"a": 1})), "4a2d2e44f6ace3c9");
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (-3i64..3).prop_map(Value::from),
            "[a-c]{0,2}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                prop::collection::btree_map("[a-d]", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Every value contains itself, and a copy with defaults added
        /// (fields only the live object has) still contains the original.
        #[test]
        fn ct20_contains_is_reflexive_and_ignores_added_fields(v in value(), extra in value()) {
            prop_assert!(contains(&v, &v));
            if let Value::Object(map) = &v {
                let mut live = map.clone();
                live.entry("zz-added").or_insert(extra);
                prop_assert!(contains(&Value::Object(live), &v));
            }
        }
    }
}
