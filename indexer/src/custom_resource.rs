//! [`custom_resource!`](crate::custom_resource): a custom resource type from
//! its spec (and status) struct in one macro call — the object struct
//! (`metadata`, `spec`, `status`), its wire form (`apiVersion` and `kind`
//! written first, absent parts defaulted) and the `k8s_openapi` traits
//! (`Resource`, `ListableResource`, `Metadata`) that make it an [`Object`]
//! and a [`TypedResource`], so `Api<K>`, informers and listers take it as
//! they take a built-in type.
//!
//! [`Object`]: crate::Object
//! [`TypedResource`]: crate::TypedResource

/// Defines a custom resource type: a struct with `metadata`, `spec` and
/// (optionally) `status`, its JSON form and the `k8s_openapi` traits, from
/// the resource's coordinates and its spec (and status) types — kube's
/// `#[derive(CustomResource)]` as one declarative macro, with no
/// proc-macro dependency.
///
/// The spec and status types are ordinary structs with serde derives; the
/// spec must implement `Default` (an object without `spec` decodes to the
/// default). Attributes before `struct` (docs, more derives such as
/// `PartialEq` or `Default`) go on the generated struct, which derives
/// `Clone` and `Debug`. `scope` is `Namespaced` or `Cluster`; `kind` is the
/// struct's name and the list kind `<kind>List`.
///
/// ```
/// use kcontrol_indexer::{custom_resource, ApiResource, Object};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// #[serde(rename_all = "camelCase")]
/// pub struct FooSpec {
///     pub deployment_name: String,
///     pub replicas: Option<i32>,
/// }
///
/// #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// #[serde(rename_all = "camelCase")]
/// pub struct FooStatus {
///     pub available_replicas: i32,
/// }
///
/// custom_resource! {
///     /// A Foo: a Deployment of nginx with some replicas.
///     #[derive(Default, PartialEq)]
///     pub struct Foo {
///         group: "samplecontroller.k8s.io",
///         version: "v1alpha1",
///         plural: "foos",
///         scope: Namespaced,
///         spec: FooSpec,
///         status: FooStatus,
///     }
/// }
///
/// let foo = Foo::new("example", FooSpec { deployment_name: "web".into(), replicas: Some(2) });
/// assert_eq!(foo.name(), Some("example"));
/// let wire = serde_json::to_value(&foo).unwrap();
/// assert_eq!(wire["apiVersion"], "samplecontroller.k8s.io/v1alpha1");
/// assert_eq!(wire["kind"], "Foo");
/// assert_eq!(wire["spec"]["deploymentName"], "web");
/// assert!(wire.get("status").is_none());
/// let back: Foo = serde_json::from_value(wire).unwrap();
/// assert_eq!(back, foo);
/// assert_eq!(ApiResource::of::<Foo>().plural, "foos");
/// ```
#[macro_export]
macro_rules! custom_resource {
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident {
            group: $group:literal,
            version: $version:literal,
            plural: $plural:literal,
            scope: $scope:ident,
            spec: $spec:ty,
            status: $status:ty $(,)?
        }
    ) => {
        $(#[$attr])*
        #[derive(Clone, Debug)]
        $vis struct $name {
            /// Standard object metadata.
            pub metadata: $crate::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
            /// The desired state.
            pub spec: $spec,
            /// The observed state; absent until a controller writes one.
            pub status: ::core::option::Option<$status>,
        }

        impl $name {
            /// An object named `name` with `spec` and no status.
            pub fn new(name: &str, spec: $spec) -> Self {
                Self {
                    metadata: $crate::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                        name: ::core::option::Option::Some(::std::borrow::ToOwned::to_owned(name)),
                        ..::core::default::Default::default()
                    },
                    spec,
                    status: ::core::option::Option::None,
                }
            }
        }

        impl $crate::__private::serde::Serialize for $name {
            fn serialize<S>(&self, serializer: S) -> ::core::result::Result<S::Ok, S::Error>
            where
                S: $crate::__private::serde::Serializer,
            {
                $crate::__private::serialize_custom_resource::<$name, $spec, $status, S>(
                    &self.metadata,
                    &self.spec,
                    self.status.as_ref(),
                    serializer,
                )
            }
        }

        impl<'de> $crate::__private::serde::Deserialize<'de> for $name {
            fn deserialize<D>(deserializer: D) -> ::core::result::Result<Self, D::Error>
            where
                D: $crate::__private::serde::Deserializer<'de>,
            {
                let (metadata, spec, status) =
                    $crate::__private::deserialize_custom_resource::<$spec, $status, D>(deserializer)?;
                ::core::result::Result::Ok(Self { metadata, spec, status })
            }
        }

        $crate::custom_resource!(@traits $name, $group, $version, $plural, $scope);
    };
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident {
            group: $group:literal,
            version: $version:literal,
            plural: $plural:literal,
            scope: $scope:ident,
            spec: $spec:ty $(,)?
        }
    ) => {
        $(#[$attr])*
        #[derive(Clone, Debug)]
        $vis struct $name {
            /// Standard object metadata.
            pub metadata: $crate::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
            /// The desired state.
            pub spec: $spec,
        }

        impl $name {
            /// An object named `name` with `spec`.
            pub fn new(name: &str, spec: $spec) -> Self {
                Self {
                    metadata: $crate::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                        name: ::core::option::Option::Some(::std::borrow::ToOwned::to_owned(name)),
                        ..::core::default::Default::default()
                    },
                    spec,
                }
            }
        }

        impl $crate::__private::serde::Serialize for $name {
            fn serialize<S>(&self, serializer: S) -> ::core::result::Result<S::Ok, S::Error>
            where
                S: $crate::__private::serde::Serializer,
            {
                $crate::__private::serialize_custom_resource::<$name, $spec, (), S>(
                    &self.metadata,
                    &self.spec,
                    ::core::option::Option::None,
                    serializer,
                )
            }
        }

        impl<'de> $crate::__private::serde::Deserialize<'de> for $name {
            fn deserialize<D>(deserializer: D) -> ::core::result::Result<Self, D::Error>
            where
                D: $crate::__private::serde::Deserializer<'de>,
            {
                let (metadata, spec, _) = $crate::__private::deserialize_custom_resource::<
                    $spec,
                    $crate::__private::serde::de::IgnoredAny,
                    D,
                >(deserializer)?;
                ::core::result::Result::Ok(Self { metadata, spec })
            }
        }

        $crate::custom_resource!(@traits $name, $group, $version, $plural, $scope);
    };
    (@traits $name:ident, $group:literal, $version:literal, $plural:literal, $scope:ident) => {
        impl $crate::k8s_openapi::Resource for $name {
            const API_VERSION: &'static str = ::core::concat!($group, "/", $version);
            const GROUP: &'static str = $group;
            const KIND: &'static str = ::core::stringify!($name);
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $crate::custom_resource!(@scope $scope);
        }

        impl $crate::k8s_openapi::ListableResource for $name {
            const LIST_KIND: &'static str = ::core::concat!(::core::stringify!($name), "List");
        }

        impl $crate::k8s_openapi::Metadata for $name {
            type Ty = $crate::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

            fn metadata(&self) -> &Self::Ty {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut Self::Ty {
                &mut self.metadata
            }
        }
    };
    (@scope Namespaced) => { $crate::k8s_openapi::NamespaceResourceScope };
    (@scope Cluster) => { $crate::k8s_openapi::ClusterResourceScope };
}

/// What the macro expands to calls; not part of the API.
#[doc(hidden)]
pub mod __private {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    pub use serde;

    /// A field name, borrowed from the input when it can be
    /// (`lean_resource!`'s decoder).
    pub struct Key<'de>(std::borrow::Cow<'de, str>);

    impl Key<'_> {
        /// The name.
        pub fn as_str(&self) -> &str {
            &self.0
        }
    }

    impl<'de> Deserialize<'de> for Key<'de> {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Key<'de>;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a field name")
                }
                fn visit_borrowed_str<E: serde::de::Error>(
                    self,
                    v: &'de str,
                ) -> Result<Key<'de>, E> {
                    Ok(Key(std::borrow::Cow::Borrowed(v)))
                }
                fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                    Ok(Key(std::borrow::Cow::Owned(v.to_owned())))
                }
            }
            deserializer.deserialize_identifier(V)
        }
    }
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// The wire form, `apiVersion` and `kind` first.
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct WireRef<'a, S, T> {
        api_version: &'static str,
        kind: &'static str,
        metadata: &'a ObjectMeta,
        spec: &'a S,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<&'a T>,
    }

    /// What is read: `apiVersion` and `kind` are not checked (the API
    /// server's path chose the type).
    #[derive(Deserialize)]
    struct Wire<S, T> {
        #[serde(default)]
        metadata: ObjectMeta,
        #[serde(default)]
        spec: S,
        #[serde(default = "none")]
        status: Option<T>,
    }

    fn none<T>() -> Option<T> {
        None
    }

    /// Writes a custom resource of type `K`.
    pub fn serialize_custom_resource<K, S, T, Ser>(
        metadata: &ObjectMeta,
        spec: &S,
        status: Option<&T>,
        serializer: Ser,
    ) -> Result<Ser::Ok, Ser::Error>
    where
        K: k8s_openapi::Resource,
        S: Serialize,
        T: Serialize,
        Ser: Serializer,
    {
        WireRef {
            api_version: K::API_VERSION,
            kind: K::KIND,
            metadata,
            spec,
            status,
        }
        .serialize(serializer)
    }

    /// Reads a custom resource's parts.
    pub fn deserialize_custom_resource<'de, S, T, D>(
        deserializer: D,
    ) -> Result<(ObjectMeta, S, Option<T>), D::Error>
    where
        S: Deserialize<'de> + Default,
        T: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        let wire = Wire::<S, T>::deserialize(deserializer)?;
        Ok((wire.metadata, wire.spec, wire.status))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use crate::{ApiResource, Object};
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    pub struct BarSpec {
        pub size: u32,
    }

    crate::custom_resource! {
        /// A cluster-scoped resource without status.
        #[derive(PartialEq)]
        pub struct Bar {
            group: "example.com",
            version: "v1",
            plural: "bars",
            scope: Cluster,
            spec: BarSpec,
        }
    }

    #[test]
    fn a_resource_without_status_is_cluster_scoped_and_ignores_a_status() {
        let r = ApiResource::of::<Bar>();
        assert_eq!(r.api_version(), "example.com/v1");
        assert_eq!(r.kind, "Bar");
        assert!(!r.namespaced);
        assert_eq!(<Bar as k8s_openapi::ListableResource>::LIST_KIND, "BarList");
        let bar: Bar = serde_json::from_value(json!({
            "apiVersion": "example.com/v1", "kind": "Bar",
            "metadata": {"name": "b", "resourceVersion": "3"},
            "spec": {"size": 2}, "status": {"anything": [1, 2]}
        }))
        .unwrap();
        assert_eq!(bar.name(), Some("b"));
        assert_eq!(bar.resource_version(), Some("3"));
        assert_eq!(bar.spec.size, 2);
        assert_eq!(
            serde_json::to_value(&bar).unwrap(),
            json!({"apiVersion": "example.com/v1", "kind": "Bar",
                "metadata": {"name": "b", "resourceVersion": "3"}, "spec": {"size": 2}})
        );
    }

    #[test]
    fn absent_parts_default_and_bad_input_is_an_error_not_a_panic() {
        let bar: Bar = serde_json::from_value(json!({})).unwrap();
        assert_eq!(bar.spec, BarSpec::default());
        assert_eq!(Bar::new("x", BarSpec { size: 1 }).name(), Some("x"));
        assert!(serde_json::from_value::<Bar>(json!({"spec": {"size": "two"}})).is_err());
        assert!(serde_json::from_value::<Bar>(json!([1])).is_err());
    }
}
