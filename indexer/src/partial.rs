//! [`PartialObjectMetadata<K>`]: only the metadata of a `K` — what a
//! metadata-only informer caches (client-go's `metadatainformer`, kube-rs's
//! `metadata_watcher`) when a controller needs names, labels, annotations
//! and owners but not specs.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `apiVersion` of a `PartialObjectMetadata` on the wire.
pub const PARTIAL_METADATA_API_VERSION: &str = "meta.k8s.io/v1";
/// `kind` of one object on the wire.
pub const PARTIAL_METADATA_KIND: &str = "PartialObjectMetadata";

/// The metadata of an object of resource `K`, nothing else.
///
/// It is a [`TypedResource`](crate::TypedResource) at `K`'s URL (same
/// group, version, plural and scope), so `Api<PartialObjectMetadata<K>>`,
/// informers and listers work on it as on `K`; the API server sends it
/// when asked with `Accept: application/json;as=PartialObjectMetadataList;
/// g=meta.k8s.io;v=v1` (kcontrol-client's `Api::metadata`), and a full
/// object decodes into it too (every other field is skipped).
///
/// ```
/// use kcontrol_indexer::{ApiResource, Object, PartialObjectMetadata};
/// use kcontrol_indexer::k8s_openapi::api::apps::v1::Deployment;
///
/// let meta: PartialObjectMetadata<Deployment> = serde_json::from_str(
///     r#"{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata",
///         "metadata":{"name":"web","namespace":"default","labels":{"app":"web"}}}"#,
/// ).unwrap();
/// assert_eq!(meta.name(), Some("web"));
/// assert_eq!(ApiResource::of::<PartialObjectMetadata<Deployment>>().plural, "deployments");
/// ```
pub struct PartialObjectMetadata<K> {
    /// The object's metadata.
    pub metadata: ObjectMeta,
    _k: PhantomData<fn() -> K>,
}

impl<K> PartialObjectMetadata<K> {
    /// The metadata-only form of an object with `metadata`.
    pub fn new(metadata: ObjectMeta) -> Self {
        Self {
            metadata,
            _k: PhantomData,
        }
    }
}

impl<K> Clone for PartialObjectMetadata<K> {
    fn clone(&self) -> Self {
        Self::new(self.metadata.clone())
    }
}

impl<K> Default for PartialObjectMetadata<K> {
    fn default() -> Self {
        Self::new(ObjectMeta::default())
    }
}

impl<K> PartialEq for PartialObjectMetadata<K> {
    fn eq(&self, other: &Self) -> bool {
        self.metadata == other.metadata
    }
}

impl<K> fmt::Debug for PartialObjectMetadata<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartialObjectMetadata")
            .field("metadata", &self.metadata)
            .finish()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireRef<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: &'a ObjectMeta,
}

/// An object read for its `metadata` alone (every other field skipped):
/// how [`PartialObjectMetadata`] and the compact form decode.
#[derive(Deserialize)]
pub(crate) struct MetadataOnly<M> {
    #[serde(default)]
    pub(crate) metadata: M,
}

impl<K> Serialize for PartialObjectMetadata<K> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        WireRef {
            api_version: PARTIAL_METADATA_API_VERSION,
            kind: PARTIAL_METADATA_KIND,
            metadata: &self.metadata,
        }
        .serialize(serializer)
    }
}

/// [`MetadataOnly`] for k8s-openapi's `ObjectMeta`, which kcontrol-proto
/// decodes straight from protobuf (without the serde walk).
#[derive(Deserialize)]
struct ObjectMetaOnly {
    #[serde(default, deserialize_with = "kcontrol_proto::deserialize_object_meta")]
    metadata: ObjectMeta,
}

impl<'de, K> Deserialize<'de> for PartialObjectMetadata<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        ObjectMetaOnly::deserialize(deserializer).map(|w| Self::new(w.metadata))
    }
}

/// At `K`'s URL: every [`kube_core::Resource`] with a static type (k8s-openapi
/// types, `custom_resource!` and kube-derive types) has a metadata-only form.
impl<K: kube_core::Resource<DynamicType = ()>> kube_core::Resource for PartialObjectMetadata<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{ApiResource, Object};
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    #[test]
    fn a_full_object_decodes_to_its_metadata_and_writes_back_as_partial() {
        let full = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "4"},
            "data": {"big": "x".repeat(100)}});
        let meta: PartialObjectMetadata<ConfigMap> = serde_json::from_value(full).unwrap();
        assert_eq!(meta.namespace(), Some("ns"));
        assert_eq!(meta.resource_version(), Some("4"));
        assert_eq!(
            serde_json::to_value(&meta).unwrap(),
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "4"}})
        );
        assert_eq!(
            ApiResource::of::<PartialObjectMetadata<ConfigMap>>(),
            ApiResource::of::<ConfigMap>()
        );
        assert!(
            serde_json::from_value::<PartialObjectMetadata<ConfigMap>>(json!({"metadata": 3}))
                .is_err()
        );
    }
}
