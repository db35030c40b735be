//! The [`Object`] trait every stored Kubernetes object implements, and the
//! description of the API resource it comes from ([`ApiResource`]).
//!
//! Two traits describe objects:
//! - [`KubeObject`]: what caches need (namespace, name, uid, resourceVersion,
//!   labels and annotations as a [`StringMap`] view, owners, deletion time).
//!   Stores, DeltaFIFOs, reflectors, informers and listers ask only for it,
//!   so a type with compact metadata (a lean type, see
//!   [`CompactConfigMap`](crate::compact::CompactConfigMap)) can be cached;
//! - [`Object`]: a [`KubeObject`] whose metadata is a `k8s-openapi`
//!   [`ObjectMeta`] ([`Object::meta`], [`Object::meta_mut`]). Every
//!   [`Object`] is a [`KubeObject`] (blanket implementation).
//!
//! Every `k8s-openapi` resource type (and any type implementing
//! `k8s_openapi::Resource` + `k8s_openapi::Metadata<Ty = ObjectMeta>`, such as a
//! hand-written custom resource struct) gets [`Object`] and [`TypedResource`] through
//! blanket implementations. [`DynamicObject`](crate::DynamicObject) implements
//! [`Object`] with its resource given at run time.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

/// The labels or annotations of an object that has none.
static EMPTY_MAP: BTreeMap<String, String> = BTreeMap::new();

/// A read view of a string-to-string map (labels, annotations): what label
/// selectors match against. Implemented by `BTreeMap<String, String>`
/// (k8s-openapi's maps) and [`CompactMap`](crate::compact::CompactMap).
pub trait StringMap {
    /// The value of `key`.
    fn value_of(&self, key: &str) -> Option<&str>;

    /// Every entry, sorted by key.
    fn entries(&self) -> impl Iterator<Item = (&str, &str)> + '_;

    /// How many entries there are.
    fn entry_count(&self) -> usize;

    /// The entries as a `BTreeMap` (a copy).
    fn to_btree_map(&self) -> BTreeMap<String, String> {
        self.entries()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

impl StringMap for BTreeMap<String, String> {
    fn value_of(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }

    fn entries(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    fn entry_count(&self) -> usize {
        self.len()
    }
}

/// Any Kubernetes object a cache can hold: full `k8s-openapi` objects
/// (through [`Object`]), lean types with compact metadata, metadata only.
///
/// Stores, DeltaFIFOs, reflectors, informers and listers need only these
/// accessors. Every [`Object`] implements it; a lean type implements it by
/// hand (or through [`lean_resource!`](crate::lean_resource)).
///
/// Named apart from [`Object`] so that code calling `cm.name()` with only
/// `Object` in scope keeps compiling: import one of the two traits, not
/// both, where methods are called on a concrete type.
pub trait KubeObject: Send + Sync + 'static {
    /// The map type of labels and annotations.
    type Map: StringMap + ?Sized;

    /// `metadata.namespace`, `None` for cluster-scoped objects.
    fn namespace(&self) -> Option<&str>;

    /// `metadata.name`.
    fn name(&self) -> Option<&str>;

    /// `metadata.uid`.
    fn uid(&self) -> Option<&str>;

    /// `metadata.resourceVersion`.
    fn resource_version(&self) -> Option<&str>;

    /// `metadata.generation`.
    fn generation(&self) -> Option<i64>;

    /// `metadata.labels`, empty when absent.
    fn labels(&self) -> &Self::Map;

    /// `metadata.annotations`, empty when absent.
    fn annotations(&self) -> &Self::Map;

    /// `metadata.ownerReferences`, empty when absent.
    fn owner_references(&self) -> &[OwnerReference];

    /// The owner reference with `controller: true`, if any.
    fn controller_ref(&self) -> Option<&OwnerReference> {
        self.owner_references()
            .iter()
            .find(|r| r.controller == Some(true))
    }

    /// `metadata.deletionTimestamp`.
    fn deletion_timestamp(&self) -> Option<&Time>;

    /// Drops `metadata.managedFields` if the type keeps them (the
    /// `strip_managed_fields` transform); lean types never keep them.
    fn drop_managed_fields(&mut self) {}
}

impl<K: Object + ?Sized> KubeObject for K {
    type Map = BTreeMap<String, String>;

    fn namespace(&self) -> Option<&str> {
        Object::namespace(self)
    }

    fn name(&self) -> Option<&str> {
        Object::name(self)
    }

    fn uid(&self) -> Option<&str> {
        Object::uid(self)
    }

    fn resource_version(&self) -> Option<&str> {
        Object::resource_version(self)
    }

    fn generation(&self) -> Option<i64> {
        self.meta().generation
    }

    fn labels(&self) -> &BTreeMap<String, String> {
        Object::labels(self)
    }

    fn annotations(&self) -> &BTreeMap<String, String> {
        Object::annotations(self)
    }

    fn owner_references(&self) -> &[OwnerReference] {
        Object::owner_references(self)
    }

    fn deletion_timestamp(&self) -> Option<&Time> {
        Object::deletion_timestamp(self)
    }

    fn drop_managed_fields(&mut self) {
        self.meta_mut().managed_fields = None;
    }
}

/// A Kubernetes object whose metadata is a `k8s-openapi` [`ObjectMeta`]:
/// every `k8s-openapi` type, custom resources, [`DynamicObject`](crate::DynamicObject),
/// [`PartialObjectMetadata`](crate::PartialObjectMetadata).
///
/// The accessors are provided on top of [`Object::meta`]; every `Object`
/// is a [`KubeObject`], which is what caches require.
pub trait Object: Send + Sync + 'static {
    /// The object's metadata.
    fn meta(&self) -> &ObjectMeta;

    /// The object's metadata, mutably (used by transforms and writers).
    fn meta_mut(&mut self) -> &mut ObjectMeta;

    /// `metadata.namespace`, `None` for cluster-scoped objects.
    fn namespace(&self) -> Option<&str> {
        self.meta().namespace.as_deref()
    }

    /// `metadata.name`, `None` when the object has none yet (e.g. before a
    /// `generateName` create).
    fn name(&self) -> Option<&str> {
        self.meta().name.as_deref()
    }

    /// `metadata.uid`.
    fn uid(&self) -> Option<&str> {
        self.meta().uid.as_deref()
    }

    /// `metadata.resourceVersion`.
    fn resource_version(&self) -> Option<&str> {
        self.meta().resource_version.as_deref()
    }

    /// `metadata.labels`, empty when absent.
    fn labels(&self) -> &BTreeMap<String, String> {
        self.meta().labels.as_ref().unwrap_or(&EMPTY_MAP)
    }

    /// `metadata.annotations`, empty when absent.
    fn annotations(&self) -> &BTreeMap<String, String> {
        self.meta().annotations.as_ref().unwrap_or(&EMPTY_MAP)
    }

    /// `metadata.ownerReferences`, empty when absent.
    fn owner_references(&self) -> &[OwnerReference] {
        self.meta().owner_references.as_deref().unwrap_or(&[])
    }

    /// The owner reference with `controller: true`, if any.
    fn controller_ref(&self) -> Option<&OwnerReference> {
        self.owner_references()
            .iter()
            .find(|r| r.controller == Some(true))
    }

    /// `metadata.deletionTimestamp`: set once deletion has been requested.
    fn deletion_timestamp(&self) -> Option<&Time> {
        self.meta().deletion_timestamp.as_ref()
    }
}

/// Where an API resource lives on the server: group, version, kind, plural
/// and scope. Built at compile time for typed objects ([`TypedResource`]) and at
/// run time for [`DynamicObject`](crate::DynamicObject)s.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ApiResource {
    /// API group, empty for the core group (`""` for ConfigMaps, `"apps"` for Deployments).
    pub group: Cow<'static, str>,
    /// API version within the group (`"v1"`).
    pub version: Cow<'static, str>,
    /// The kind (`"ConfigMap"`).
    pub kind: Cow<'static, str>,
    /// The plural resource name used in URL paths (`"configmaps"`).
    pub plural: Cow<'static, str>,
    /// Whether objects of this resource live in a namespace.
    pub namespaced: bool,
}

impl ApiResource {
    /// A resource description from owned or static strings.
    pub fn new(
        group: impl Into<Cow<'static, str>>,
        version: impl Into<Cow<'static, str>>,
        kind: impl Into<Cow<'static, str>>,
        plural: impl Into<Cow<'static, str>>,
        namespaced: bool,
    ) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
        }
    }

    /// The `apiVersion` field value: `version` for the core group, else `group/version`.
    pub fn api_version(&self) -> Cow<'static, str> {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            Cow::Owned(format!("{}/{}", self.group, self.version))
        }
    }

    /// The description of a typed resource, e.g. `ApiResource::of::<ConfigMap>()`.
    pub fn of<K: KubeResource>() -> Self {
        K::api_resource()
    }
}

/// A typed object whose API resource is known at compile time.
///
/// Implemented for every type that implements `k8s_openapi::Resource` and
/// `k8s_openapi::Metadata<Ty = ObjectMeta>` with a namespace or cluster scope:
/// all `k8s-openapi` resources, and custom resource structs that implement
/// those two traits. It is derived from `k8s_openapi::Resource` (never
/// implemented by hand), and named apart from it so that `Resource` means
/// k8s-openapi's trait only.
pub trait TypedResource: Object {
    /// Where this resource lives on the server.
    fn api_resource() -> ApiResource;
}

/// A [`KubeObject`] whose API resource is known at compile time: every
/// [`TypedResource`] and every lean type. What `Api::<K>::all` and
/// `factory.informer::<K>()` require.
pub trait KubeResource: KubeObject {
    /// Where this resource lives on the server.
    fn api_resource() -> ApiResource;
}

impl<K: TypedResource> KubeResource for K {
    fn api_resource() -> ApiResource {
        <K as TypedResource>::api_resource()
    }
}

/// Whether a `k8s_openapi` resource scope is namespaced.
pub trait Scope {
    /// `true` for namespaced resources.
    const NAMESPACED: bool;
}

impl Scope for k8s_openapi::NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scope for k8s_openapi::ClusterResourceScope {
    const NAMESPACED: bool = false;
}

impl<K> Object for K
where
    K: kube_core::Resource<DynamicType = ()> + Send + Sync + 'static,
{
    fn meta(&self) -> &ObjectMeta {
        kube_core::Resource::meta(self)
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        kube_core::Resource::meta_mut(self)
    }
}

impl<K> TypedResource for K
where
    K: kube_core::Resource<DynamicType = ()> + Send + Sync + 'static,
    K::Scope: Scope,
{
    fn api_resource() -> ApiResource {
        ApiResource {
            group: K::group(&()),
            version: K::version(&()),
            kind: K::kind(&()),
            plural: K::plural(&()),
            namespaced: <K::Scope as Scope>::NAMESPACED,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ApiResource, Object, OwnerReference};
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

    #[test]
    fn typed_resources_describe_themselves() {
        let cm = ApiResource::of::<ConfigMap>();
        assert_eq!(cm.group, "");
        assert_eq!(cm.plural, "configmaps");
        assert!(cm.namespaced);
        assert_eq!(cm.api_version(), "v1");

        let deploy = ApiResource::of::<Deployment>();
        assert_eq!(deploy.api_version(), "apps/v1");
        assert_eq!(deploy.kind, "Deployment");

        assert!(!ApiResource::of::<Namespace>().namespaced);
    }

    #[test]
    fn accessors_read_metadata_and_default_to_empty() {
        let mut cm = ConfigMap::default();
        assert!(cm.labels().is_empty());
        assert!(cm.owner_references().is_empty());
        assert_eq!(cm.name(), None);
        cm.meta_mut().name = Some("a".into());
        cm.meta_mut().owner_references = Some(vec![
            OwnerReference {
                name: "x".into(),
                ..Default::default()
            },
            OwnerReference {
                name: "y".into(),
                controller: Some(true),
                ..Default::default()
            },
        ]);
        assert_eq!(cm.name(), Some("a"));
        assert_eq!(cm.controller_ref().map(|r| r.name.as_str()), Some("y"));
    }
}
