//! Compact, read-only objects for lean caches: [`CompactMeta`] (the
//! metadata controllers read), [`CompactMap`] (labels, annotations, data
//! with all their text in one allocation),
//! [`CompactConfigMap`], [`CompactPartialObjectMetadata`] (metadata-only
//! caches), and [`lean_resource!`](crate::lean_resource) to
//! define a lean type of any built-in kind with only the fields a
//! controller reads.
//!
//! They decode straight from the API server's JSON (no intermediate
//! `serde_json::Value`, managedFields skipped without allocating) and
//! implement [`KubeObject`](crate::KubeObject) and
//! [`KubeResource`](crate::KubeResource), so stores, informers and listers
//! hold them as they hold k8s-openapi types; `factory.informer::<CompactConfigMap>()`
//! instead of `factory.informer::<ConfigMap>()` is the whole change. What
//! they give up: they are not [`Object`](crate::Object)s (no
//! `meta()`/`meta_mut()`, no k8s-openapi `ObjectMeta`), they are not
//! meant to be written back (no `Serialize` of the whole object; build a
//! k8s-openapi object to write), fields outside the kept set are dropped,
//! and maps are immutable once decoded.

mod intern;
mod map;
mod meta;
mod partial;

pub use map::CompactMap;
pub use meta::CompactMeta;
pub use partial::CompactPartialObjectMetadata;

/// Defines a lean type of a resource: a struct with a [`CompactMeta`]
/// `metadata` and only the top-level fields listed (each decoded
/// with its own `Deserialize`, under the JSON name given; missing fields
/// take their `Default`), implementing [`KubeObject`](crate::KubeObject)
/// and [`KubeResource`](crate::KubeResource) so that
/// `factory.informer::<Lean>()`, `Api::<Lean>` lists and watches, stores
/// and listers take it. Every other field of the object is skipped while
/// decoding. Field types must implement `Clone`, `Debug`, `Default` and
/// `Deserialize`; `scope` is `Namespaced` or `Cluster`.
///
/// ```
/// use kcontrol_indexer::{lean_resource, ApiResource, KubeObject};
/// use serde::Deserialize;
///
/// /// The part of a Deployment's spec this controller reads.
/// #[derive(Clone, Debug, Default, Deserialize)]
/// pub struct ReplicasOnly {
///     pub replicas: Option<i32>,
/// }
///
/// lean_resource! {
///     /// A Deployment with only its metadata and `spec.replicas`.
///     pub struct LeanDeployment {
///         group: "apps",
///         version: "v1",
///         kind: "Deployment",
///         plural: "deployments",
///         scope: Namespaced,
///         fields {
///             /// `spec`, as far as read.
///             spec: ReplicasOnly = "spec",
///         }
///     }
/// }
///
/// let d: LeanDeployment = serde_json::from_str(r#"{"apiVersion":"apps/v1","kind":"Deployment",
///     "metadata":{"name":"web","namespace":"prod","labels":{"app":"web"}},
///     "spec":{"replicas":3,"template":{"spec":{"containers":[]}}},"status":{"replicas":3}}"#)?;
/// assert_eq!(d.spec.replicas, Some(3));
/// assert_eq!(d.name(), Some("web"));
/// assert_eq!(d.metadata.labels.get("app"), Some("web"));
/// assert_eq!(ApiResource::of::<LeanDeployment>().plural, "deployments");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[macro_export]
macro_rules! lean_resource {
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident {
            group: $group:literal,
            version: $version:literal,
            kind: $kind:literal,
            plural: $plural:literal,
            scope: $scope:ident,
            fields {
                $(
                    $(#[$fattr:meta])*
                    $field:ident : $fty:ty = $json:literal
                ),* $(,)?
            } $(,)?
        }
    ) => {
        $(#[$attr])*
        #[derive(Clone, Debug, Default)]
        $vis struct $name {
            /// The object's metadata, compact.
            pub metadata: $crate::compact::CompactMeta,
            $(
                $(#[$fattr])*
                pub $field: $fty,
            )*
        }

        impl $crate::KubeObject for $name {
            type Map = $crate::compact::CompactMap;

            fn namespace(&self) -> ::std::option::Option<&str> {
                self.metadata.namespace()
            }
            fn name(&self) -> ::std::option::Option<&str> {
                self.metadata.name()
            }
            fn uid(&self) -> ::std::option::Option<&str> {
                self.metadata.uid()
            }
            fn resource_version(&self) -> ::std::option::Option<&str> {
                self.metadata.resource_version()
            }
            fn generation(&self) -> ::std::option::Option<i64> {
                self.metadata.generation()
            }
            fn labels(&self) -> &$crate::compact::CompactMap {
                &self.metadata.labels
            }
            fn annotations(&self) -> &$crate::compact::CompactMap {
                &self.metadata.annotations
            }
            fn owner_references(
                &self,
            ) -> &[$crate::k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference] {
                self.metadata.owner_references()
            }
            fn deletion_timestamp(
                &self,
            ) -> ::std::option::Option<&$crate::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>
            {
                self.metadata.deletion_timestamp()
            }
        }

        impl $crate::KubeResource for $name {
            fn api_resource() -> $crate::ApiResource {
                $crate::ApiResource::new(
                    $group,
                    $version,
                    $kind,
                    $plural,
                    $crate::lean_resource!(@namespaced $scope),
                )
            }
        }

        impl<'de> $crate::__private::serde::Deserialize<'de> for $name {
            fn deserialize<D>(deserializer: D) -> ::std::result::Result<Self, D::Error>
            where
                D: $crate::__private::serde::Deserializer<'de>,
            {
                struct LeanVisitor;
                impl<'de> $crate::__private::serde::de::Visitor<'de> for LeanVisitor {
                    type Value = $name;
                    fn expecting(
                        &self,
                        f: &mut ::std::fmt::Formatter<'_>,
                    ) -> ::std::fmt::Result {
                        f.write_str(concat!("a ", $kind, " object"))
                    }
                    fn visit_map<A>(self, mut map: A) -> ::std::result::Result<$name, A::Error>
                    where
                        A: $crate::__private::serde::de::MapAccess<'de>,
                    {
                        let mut out = <$name as ::std::default::Default>::default();
                        while let ::std::option::Option::Some(key) =
                            map.next_key::<$crate::__private::Key<'de>>()?
                        {
                            match key.as_str() {
                                "metadata" => out.metadata = map.next_value()?,
                                $( $json => out.$field = map.next_value()?, )*
                                _ => {
                                    map.next_value::<$crate::__private::serde::de::IgnoredAny>()?;
                                }
                            }
                        }
                        ::std::result::Result::Ok(out)
                    }
                }
                deserializer.deserialize_map(LeanVisitor)
            }
        }
    };
    (@namespaced Namespaced) => { true };
    (@namespaced Cluster) => { false };
}

lean_resource! {
    /// A ConfigMap in compact form: [`CompactMeta`] and `data`,
    /// `binaryData` (base64 text, as on the wire) and `immutable`. About
    /// half the memory of k8s-openapi's `ConfigMap` in a store (see the
    /// BENCHMARKS.md's store benchmark); read `cm.data.get("key")`.
    ///
    /// ```
    /// use kcontrol_indexer::compact::CompactConfigMap;
    /// use kcontrol_indexer::KubeObject;
    ///
    /// let cm: CompactConfigMap = serde_json::from_str(r#"{"apiVersion":"v1","kind":"ConfigMap",
    ///     "metadata":{"name":"a","namespace":"ns","managedFields":[{"manager":"m"}]},
    ///     "data":{"k":"v"}}"#)?;
    /// assert_eq!(cm.data.get("k"), Some("v"));
    /// assert_eq!(cm.namespace(), Some("ns"));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub struct CompactConfigMap {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        scope: Namespaced,
        fields {
            /// `data`.
            data: CompactMap = "data",
            /// `binaryData`, base64 text as on the wire.
            binary_data: CompactMap = "binaryData",
            /// `immutable`.
            immutable: Option<bool> = "immutable",
        }
    }
}

/// The compact form of a k8s-openapi `ConfigMap` (the fields kept).
impl From<&k8s_openapi::api::core::v1::ConfigMap> for CompactConfigMap {
    fn from(cm: &k8s_openapi::api::core::v1::ConfigMap) -> Self {
        // ByteString serializes as its base64 text, the wire form kept here.
        let base64 = |b| match serde_json::to_value(b) {
            Ok(serde_json::Value::String(s)) => s,
            _ => String::new(),
        };
        Self {
            metadata: CompactMeta::from(&cm.metadata),
            data: cm.data.as_ref().map(CompactMap::from).unwrap_or_default(),
            binary_data: cm
                .binary_data
                .iter()
                .flatten()
                .map(|(k, v)| (k.as_str(), base64(v)))
                .collect(),
            immutable: cm.immutable,
        }
    }
}

#[cfg(test)]
mod tests;
