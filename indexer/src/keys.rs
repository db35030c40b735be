//! Object keys (`namespace/name`, or `name` for cluster-scoped objects) and
//! the tombstone a deletion carries when the final state was missed.

use std::sync::Arc;

use crate::object::KubeObject;

/// A key that cannot be built or split.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The object has no `metadata.name`.
    #[error("object has no name, so it has no key")]
    MissingName,
    /// The key is not `name` or `namespace/name` with non-empty parts.
    #[error(
        "unexpected key format {key:?}: want \"name\" or \"namespace/name\" with non-empty parts"
    )]
    Malformed {
        /// The key as given.
        key: String,
    },
}

/// The store key of an object: `namespace/name`, or `name` when it has no namespace.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcontrol_indexer::{meta_namespace_key, Object};
///
/// let mut cm = ConfigMap::default();
/// cm.meta_mut().name = Some("settings".into());
/// cm.meta_mut().namespace = Some("prod".into());
/// assert_eq!(meta_namespace_key(&cm).unwrap(), "prod/settings");
/// ```
pub fn meta_namespace_key<K: KubeObject + ?Sized>(obj: &K) -> Result<String, KeyError> {
    let name = obj.name().ok_or(KeyError::MissingName)?;
    if name.is_empty() {
        return Err(KeyError::MissingName);
    }
    Ok(match obj.namespace() {
        Some(ns) if !ns.is_empty() => {
            let mut key = String::with_capacity(ns.len() + 1 + name.len());
            key.push_str(ns);
            key.push('/');
            key.push_str(name);
            key
        }
        _ => name.to_owned(),
    })
}

/// Splits a key into `(namespace, name)`; the namespace is `None` for a
/// cluster-scoped key.
///
/// ```
/// use kcontrol_indexer::split_meta_namespace_key;
///
/// assert_eq!(split_meta_namespace_key("prod/settings").unwrap(), (Some("prod"), "settings"));
/// assert_eq!(split_meta_namespace_key("node-1").unwrap(), (None, "node-1"));
/// assert!(split_meta_namespace_key("a/b/c").is_err());
/// ```
pub fn split_meta_namespace_key(key: &str) -> Result<(Option<&str>, &str), KeyError> {
    let malformed = || KeyError::Malformed {
        key: key.to_owned(),
    };
    match key.split_once('/') {
        None if !key.is_empty() => Ok((None, key)),
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((Some(ns), name))
        }
        _ => Err(malformed()),
    }
}

/// A deletion whose final state was not observed (the watch missed it and a
/// relist found the object gone): the key and the last state that was known.
#[derive(Debug)]
pub struct DeletedFinalStateUnknown<K> {
    /// The store key of the deleted object.
    pub key: String,
    /// The last known state of the object; it may be stale.
    pub obj: Arc<K>,
}

impl<K> Clone for DeletedFinalStateUnknown<K> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            obj: Arc::clone(&self.obj),
        }
    }
}

/// An object as a deletion hands it over: the object itself, or a tombstone
/// when its final state is unknown. Matching on it needs no runtime type check.
#[derive(Debug)]
pub enum ObjectOrTombstone<K> {
    /// The object as it was when deleted.
    Object(Arc<K>),
    /// The deletion was missed; this is the last known state.
    Tombstone(DeletedFinalStateUnknown<K>),
}

impl<K> Clone for ObjectOrTombstone<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Object(obj) => Self::Object(Arc::clone(obj)),
            Self::Tombstone(t) => Self::Tombstone(t.clone()),
        }
    }
}

impl<K> ObjectOrTombstone<K> {
    /// The object, or the last known state of a tombstone.
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Object(obj) => obj,
            Self::Tombstone(t) => &t.obj,
        }
    }

    /// Whether this is a tombstone.
    pub fn is_tombstone(&self) -> bool {
        matches!(self, Self::Tombstone(_))
    }
}

/// The key of an object or tombstone: a tombstone keys to the key it carries.
pub fn deletion_handling_meta_namespace_key<K: KubeObject>(
    obj: &ObjectOrTombstone<K>,
) -> Result<String, KeyError> {
    match obj {
        ObjectOrTombstone::Object(obj) => meta_namespace_key(obj.as_ref()),
        ObjectOrTombstone::Tombstone(t) => Ok(t.key.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Object;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

    fn cm(ns: Option<&str>, name: Option<&str>) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.meta_mut().namespace = ns.map(str::to_owned);
        cm.meta_mut().name = name.map(str::to_owned);
        cm
    }

    #[test]
    fn keys_of_namespaced_and_cluster_objects() {
        assert_eq!(
            meta_namespace_key(&cm(Some("a"), Some("b"))).unwrap(),
            "a/b"
        );
        let mut ns = Namespace::default();
        ns.meta_mut().name = Some("kube-system".into());
        assert_eq!(meta_namespace_key(&ns).unwrap(), "kube-system");
        assert_eq!(
            meta_namespace_key(&cm(Some("a"), None)),
            Err(KeyError::MissingName)
        );
        assert_eq!(
            meta_namespace_key(&cm(None, Some(""))),
            Err(KeyError::MissingName)
        );
    }

    #[test]
    fn malformed_keys_are_rejected() {
        for key in ["", "/", "a/", "/b", "a/b/c", "a//b"] {
            let err = split_meta_namespace_key(key).unwrap_err();
            assert!(err.to_string().contains(&format!("{key:?}")), "{err}");
        }
    }

    #[test]
    fn tombstones_key_to_their_key() {
        let obj = Arc::new(cm(Some("a"), Some("b")));
        let t = ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
            key: "x/y".into(),
            obj: Arc::clone(&obj),
        });
        assert_eq!(deletion_handling_meta_namespace_key(&t).unwrap(), "x/y");
        assert!(Arc::ptr_eq(t.object(), &obj));
        let o = ObjectOrTombstone::Object(obj);
        assert_eq!(deletion_handling_meta_namespace_key(&o).unwrap(), "a/b");
    }

    proptest::proptest! {
        #[test]
        fn split_inverts_join(ns in "[a-z0-9-]{0,8}", name in "[a-z0-9.-]{1,12}") {
            let obj = cm((!ns.is_empty()).then_some(ns.as_str()), Some(&name));
            let key = meta_namespace_key(&obj).unwrap();
            let (got_ns, got_name) = split_meta_namespace_key(&key).unwrap();
            proptest::prop_assert_eq!(got_ns.unwrap_or(""), ns.as_str());
            proptest::prop_assert_eq!(got_name, name.as_str());
        }
    }
}
