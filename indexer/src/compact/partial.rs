//! [`CompactPartialObjectMetadata<K>`]: a metadata-only object of resource
//! `K` with [`CompactMeta`], for metadata caches of many objects (a
//! sharder's, a garbage collector's) where k8s-openapi's `ObjectMeta` (a
//! `BTreeMap` node per label map, every field inline) would cost more than
//! the objects' names and labels.

use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use serde::{Deserialize, Deserializer};

use super::map::CompactMap;
use super::meta::CompactMeta;
use crate::partial::MetadataOnly;
use crate::{ApiResource, KubeObject, KubeResource};

/// The metadata of an object of resource `K` in compact form: what
/// [`PartialObjectMetadata<K>`](crate::PartialObjectMetadata) holds, as a
/// [`CompactMeta`]. A [`KubeResource`] at `K`'s URL, so
/// `Api::<K>::compact_metadata()` (kcontrol-client) lists and watches it as
/// `PartialObjectMetadata` and informers and stores hold it; it decodes a
/// full object too (every field but `metadata` skipped).
///
/// ```
/// use kcontrol_indexer::compact::{CompactMeta, CompactPartialObjectMetadata};
/// use kcontrol_indexer::k8s_openapi::api::apps::v1::Deployment;
/// use kcontrol_indexer::{ApiResource, KubeObject, KubeResource};
///
/// let meta: CompactPartialObjectMetadata<Deployment> = serde_json::from_str(
///     r#"{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata",
///         "metadata":{"name":"web","namespace":"default","labels":{"app":"web"}}}"#,
/// )?;
/// assert_eq!(meta.name(), Some("web"));
/// assert_eq!(meta.labels().get("app"), Some("web"));
/// assert_eq!(
///     <CompactPartialObjectMetadata<Deployment> as KubeResource>::api_resource(),
///     ApiResource::of::<Deployment>()
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
pub struct CompactPartialObjectMetadata<K> {
    /// The object's metadata.
    pub metadata: CompactMeta,
    _k: PhantomData<fn() -> K>,
}

impl<K> CompactPartialObjectMetadata<K> {
    /// The metadata-only form of an object with `metadata`.
    pub fn new(metadata: CompactMeta) -> Self {
        Self {
            metadata,
            _k: PhantomData,
        }
    }
}

impl<K> Clone for CompactPartialObjectMetadata<K> {
    fn clone(&self) -> Self {
        Self::new(self.metadata.clone())
    }
}

impl<K> Default for CompactPartialObjectMetadata<K> {
    fn default() -> Self {
        Self::new(CompactMeta::default())
    }
}

impl<K> PartialEq for CompactPartialObjectMetadata<K> {
    fn eq(&self, other: &Self) -> bool {
        self.metadata == other.metadata
    }
}

impl<K> fmt::Debug for CompactPartialObjectMetadata<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompactPartialObjectMetadata")
            .field("metadata", &self.metadata)
            .finish()
    }
}

impl<K: 'static> KubeObject for CompactPartialObjectMetadata<K> {
    type Map = CompactMap;

    fn namespace(&self) -> Option<&str> {
        self.metadata.namespace()
    }
    fn name(&self) -> Option<&str> {
        self.metadata.name()
    }
    fn uid(&self) -> Option<&str> {
        self.metadata.uid()
    }
    fn resource_version(&self) -> Option<&str> {
        self.metadata.resource_version()
    }
    fn generation(&self) -> Option<i64> {
        self.metadata.generation()
    }
    fn labels(&self) -> &CompactMap {
        &self.metadata.labels
    }
    fn annotations(&self) -> &CompactMap {
        &self.metadata.annotations
    }
    fn owner_references(&self) -> &[OwnerReference] {
        self.metadata.owner_references()
    }
    fn deletion_timestamp(&self) -> Option<&Time> {
        self.metadata.deletion_timestamp()
    }
}

impl<K: KubeResource> KubeResource for CompactPartialObjectMetadata<K> {
    fn api_resource() -> ApiResource {
        K::api_resource()
    }
}

impl<'de, K> Deserialize<'de> for CompactPartialObjectMetadata<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        MetadataOnly::<CompactMeta>::deserialize(deserializer).map(|w| Self::new(w.metadata))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::PartialObjectMetadata;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    #[test]
    fn it_holds_what_the_partial_object_metadata_holds() {
        let full = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "4",
                "labels": {"app": "web"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Foo", "name": "f",
                    "uid": "u", "controller": true}]},
            "data": {"big": "x".repeat(100)}});
        let compact: CompactPartialObjectMetadata<ConfigMap> =
            serde_json::from_value(full.clone()).unwrap();
        let partial: PartialObjectMetadata<ConfigMap> = serde_json::from_value(full).unwrap();
        assert_eq!(compact.metadata.to_object_meta(), partial.metadata);
        assert_eq!(compact.controller_ref().map(|r| r.name.as_str()), Some("f"));
        assert_eq!(
            <CompactPartialObjectMetadata<ConfigMap> as KubeResource>::api_resource(),
            ApiResource::of::<ConfigMap>()
        );
        assert!(
            serde_json::from_value::<CompactPartialObjectMetadata<ConfigMap>>(
                json!({"metadata": 3})
            )
            .is_err()
        );
    }
}
