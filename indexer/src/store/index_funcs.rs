//! Index functions: what an index is computed from. The built-in
//! [`NAMESPACE_INDEX`] and any user function `Fn(&K) -> Vec<String>`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::object::KubeObject;

/// Name of the built-in index of objects by namespace (`""` for cluster-scoped objects).
pub const NAMESPACE_INDEX: &str = "namespace";

/// An index function: the index values of an object (none, one or many).
///
/// It must be a pure function of the object: the store calls it again on
/// the stored object to find the values to remove on update and delete.
pub type IndexFunc<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// Named index functions, as given to
/// [`ThreadSafeStore::with_indexers`](crate::ThreadSafeStore::with_indexers)
/// and [`ThreadSafeStore::add_indexers`](crate::ThreadSafeStore::add_indexers).
pub type Indexers<K> = BTreeMap<String, IndexFunc<K>>;

/// The namespace index function as a plain function: `[namespace]`, or
/// `[""]` for a cluster-scoped object.
pub fn namespace_index_func<K: KubeObject>(obj: &K) -> Vec<String> {
    vec![obj.namespace().unwrap_or_default().to_owned()]
}

/// How the store computes one index.
pub(crate) enum IndexFn<K> {
    /// The built-in namespace index, computed without allocating.
    Namespace,
    /// A user function.
    Custom(IndexFunc<K>),
}

impl<K> Clone for IndexFn<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Namespace => Self::Namespace,
            Self::Custom(f) => Self::Custom(Arc::clone(f)),
        }
    }
}

impl<K: KubeObject> IndexFn<K> {
    /// The index values of `obj`.
    pub(crate) fn values<'a>(&self, obj: &'a K) -> Values<'a> {
        match self {
            Self::Namespace => Values::One(obj.namespace().unwrap_or_default()),
            Self::Custom(f) => Values::Owned(f(obj)),
        }
    }
}

/// The index values of one object, borrowed when possible.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Values<'a> {
    /// One value borrowed from the object.
    One(&'a str),
    /// Values computed by a user function.
    Owned(Vec<String>),
}

impl Values<'_> {
    /// The values (possibly with repeats).
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        let (one, owned): (Option<&str>, &[String]) = match self {
            Self::One(v) => (Some(v), &[]),
            Self::Owned(vs) => (None, vs),
        };
        one.into_iter().chain(owned.iter().map(String::as_str))
    }

    /// Whether `value` is among them.
    pub(crate) fn contains(&self, value: &str) -> bool {
        self.iter().any(|v| v == value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

    #[test]
    fn namespace_values() {
        let mut cm = ConfigMap::default();
        cm.metadata.namespace = Some("prod".into());
        assert_eq!(namespace_index_func(&cm), ["prod"]);
        assert_eq!(
            IndexFn::<ConfigMap>::Namespace.values(&cm),
            Values::One("prod")
        );
        assert_eq!(namespace_index_func(&Namespace::default()), [""]);
    }

    #[test]
    fn values_of_both_forms() {
        let one = Values::One("a");
        assert!(one.contains("a"));
        assert!(Values::Owned(vec!["a".into()]).iter().eq(one.iter()));
        assert!(Values::Owned(vec!["x".into(), "y".into()]).contains("y"));
        assert!(!one.contains("b"));
    }
}
