//! The kcontrol object model and indexed store.
//!
//! - [`Object`]: what every stored object provides (metadata accessors), with
//!   blanket implementations for all `k8s-openapi` types (Kubernetes API
//!   version feature `v1_33`) and for custom resource structs that implement
//!   `k8s_openapi::Resource` and `k8s_openapi::Metadata`;
//! - [`ApiResource`] and [`TypedResource`]: where a resource lives on the server;
//! - [`DynamicObject`]: any kind, resource given at run time;
//! - [`PartialObjectMetadata`]: only an object's metadata (metadata-only
//!   informers);
//! - keys: [`meta_namespace_key`], [`split_meta_namespace_key`], tombstones
//!   ([`DeletedFinalStateUnknown`], [`ObjectOrTombstone`]);
//! - [`KnownObjects`]: what a DeltaFIFO reads from the store;
//! - [`ThreadSafeStore`]: objects by key with named indexes (client-go's
//!   indexer), and [`Lister`] to read it by namespace, name and label selector;
//! - [`labels`]: label selectors (parse, match, print);
//! - [`transform`]: transforms applied before storing ([`transform::strip_managed_fields`]);
//! - [`compact`]: lean types with compact metadata ([`compact::CompactConfigMap`],
//!   [`lean_resource!`]) for caches of half the memory;
//! - [`custom_resource!`]: a custom resource type from its spec (and status)
//!   struct in one macro call.

pub mod compact;
mod custom_resource;
mod dynamic;
mod keys;
mod known;
pub mod labels;
mod lister;
mod object;
mod partial;
mod store;
pub mod transform;

#[doc(hidden)]
pub use custom_resource::__private;
pub use dynamic::{DynamicObject, TypeMeta};
pub use keys::{
    deletion_handling_meta_namespace_key, meta_namespace_key, split_meta_namespace_key,
    DeletedFinalStateUnknown, KeyError, ObjectOrTombstone,
};
pub use known::KnownObjects;
pub use lister::{Lister, NamespaceLister};
pub use object::{ApiResource, KubeObject, KubeResource, Object, Scope, StringMap, TypedResource};
pub use partial::{PartialObjectMetadata, PARTIAL_METADATA_API_VERSION, PARTIAL_METADATA_KIND};
pub use store::{
    namespace_index_func, IndexFunc, Indexers, StoreError, ThreadSafeStore, NAMESPACE_INDEX,
};

/// Re-export of the `k8s-openapi` crate the object model is built on, so users
/// name the same types (`kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap`).
pub use k8s_openapi;
