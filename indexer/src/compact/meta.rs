//! [`CompactMeta`]: the metadata fields controllers read, decoded straight
//! from JSON into compact storage.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::intern::intern;
use super::map::CompactMap;

/// An object's metadata in compact form: name, namespace, uid,
/// resourceVersion, generation, creation and deletion timestamps, labels,
/// annotations, ownerReferences and finalizers. Everything else
/// (managedFields above all, generateName, deletionGracePeriodSeconds)
/// is skipped while decoding, without allocating.
///
/// Read it with the accessors ([`name`](Self::name),
/// [`labels`](Self::labels)…), or convert it to k8s-openapi's
/// [`ObjectMeta`] with [`to_object_meta`](Self::to_object_meta). Strings are
/// boxed (no spare capacity), the namespace interned; labels and
/// annotations are [`CompactMap`]s (their text in one allocation each).
#[derive(Clone, Default, PartialEq)]
pub struct CompactMeta {
    name: Option<Box<str>>,
    namespace: Option<Arc<str>>,
    uid: Option<Box<str>>,
    resource_version: Option<Box<str>>,
    generation: Option<i64>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    /// `metadata.labels`.
    pub labels: CompactMap,
    /// `metadata.annotations`.
    pub annotations: CompactMap,
    owner_references: Box<[OwnerReference]>,
    finalizers: Box<[Box<str>]>,
}

impl CompactMeta {
    /// `metadata.name`.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> Option<&str> {
        self.uid.as_deref()
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> Option<&str> {
        self.resource_version.as_deref()
    }

    /// `metadata.generation`.
    pub fn generation(&self) -> Option<i64> {
        self.generation
    }

    /// `metadata.creationTimestamp`.
    pub fn creation_timestamp(&self) -> Option<&Time> {
        self.creation_timestamp.as_ref()
    }

    /// `metadata.deletionTimestamp`.
    pub fn deletion_timestamp(&self) -> Option<&Time> {
        self.deletion_timestamp.as_ref()
    }

    /// `metadata.labels`.
    pub fn labels(&self) -> &CompactMap {
        &self.labels
    }

    /// `metadata.annotations`.
    pub fn annotations(&self) -> &CompactMap {
        &self.annotations
    }

    /// `metadata.ownerReferences`.
    pub fn owner_references(&self) -> &[OwnerReference] {
        &self.owner_references
    }

    /// `metadata.finalizers`.
    pub fn finalizers(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.finalizers.iter().map(|f| f.as_ref())
    }

    /// A copy as k8s-openapi's metadata (the fields kept; the rest `None`).
    pub fn to_object_meta(&self) -> ObjectMeta {
        let map = |m: &CompactMap| (!m.is_empty()).then(|| m.to_btree_map());
        ObjectMeta {
            name: self.name.as_deref().map(str::to_owned),
            namespace: self.namespace.as_deref().map(str::to_owned),
            uid: self.uid.as_deref().map(str::to_owned),
            resource_version: self.resource_version.as_deref().map(str::to_owned),
            generation: self.generation,
            creation_timestamp: self.creation_timestamp.clone(),
            deletion_timestamp: self.deletion_timestamp.clone(),
            labels: map(&self.labels),
            annotations: map(&self.annotations),
            owner_references: (!self.owner_references.is_empty())
                .then(|| self.owner_references.to_vec()),
            finalizers: (!self.finalizers.is_empty())
                .then(|| self.finalizers.iter().map(|f| f.to_string()).collect()),
            ..ObjectMeta::default()
        }
    }
}

impl From<&ObjectMeta> for CompactMeta {
    fn from(m: &ObjectMeta) -> Self {
        Self {
            name: m.name.as_deref().map(Box::from),
            namespace: m.namespace.as_deref().map(intern),
            uid: m.uid.as_deref().map(Box::from),
            resource_version: m.resource_version.as_deref().map(Box::from),
            generation: m.generation,
            creation_timestamp: m.creation_timestamp.clone(),
            deletion_timestamp: m.deletion_timestamp.clone(),
            labels: m.labels.as_ref().map(CompactMap::from).unwrap_or_default(),
            annotations: m
                .annotations
                .as_ref()
                .map(CompactMap::from)
                .unwrap_or_default(),
            owner_references: m.owner_references.clone().unwrap_or_default().into(),
            finalizers: m
                .finalizers
                .iter()
                .flatten()
                .map(|f| Box::from(f.as_str()))
                .collect(),
        }
    }
}

impl From<ObjectMeta> for CompactMeta {
    fn from(m: ObjectMeta) -> Self {
        Self::from(&m)
    }
}

impl From<&CompactMeta> for ObjectMeta {
    fn from(m: &CompactMeta) -> Self {
        m.to_object_meta()
    }
}

impl fmt::Debug for CompactMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompactMeta")
            .field("name", &self.name)
            .field("namespace", &self.namespace)
            .field("uid", &self.uid)
            .field("resource_version", &self.resource_version)
            .field("generation", &self.generation)
            .field("labels", &self.labels)
            .field("annotations", &self.annotations)
            .field("owner_references", &self.owner_references)
            .field("finalizers", &self.finalizers)
            .field("deletion_timestamp", &self.deletion_timestamp)
            .finish_non_exhaustive()
    }
}

impl serde::Serialize for CompactMeta {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_object_meta().serialize(serializer)
    }
}

/// A string decoded into a `Box<str>` without an intermediate `String`
/// when the input lends it.
struct BoxStr(Box<str>);

impl<'de> Deserialize<'de> for BoxStr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = BoxStr;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<BoxStr, E> {
                Ok(BoxStr(Box::from(v)))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<BoxStr, E> {
                Ok(BoxStr(v.into_boxed_str()))
            }
        }
        deserializer.deserialize_str(V)
    }
}

/// An interned string (the namespace).
struct Interned(Arc<str>);

impl<'de> Deserialize<'de> for Interned {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Interned;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Interned, E> {
                Ok(Interned(intern(v)))
            }
        }
        deserializer.deserialize_str(V)
    }
}

/// The metadata fields kept, by their JSON names.
enum Field {
    Name,
    Namespace,
    Uid,
    ResourceVersion,
    Generation,
    CreationTimestamp,
    DeletionTimestamp,
    Labels,
    Annotations,
    OwnerReferences,
    Finalizers,
    Other,
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Field, E> {
                Ok(match v {
                    "name" => Field::Name,
                    "namespace" => Field::Namespace,
                    "uid" => Field::Uid,
                    "resourceVersion" => Field::ResourceVersion,
                    "generation" => Field::Generation,
                    "creationTimestamp" => Field::CreationTimestamp,
                    "deletionTimestamp" => Field::DeletionTimestamp,
                    "labels" => Field::Labels,
                    "annotations" => Field::Annotations,
                    "ownerReferences" => Field::OwnerReferences,
                    "finalizers" => Field::Finalizers,
                    _ => Field::Other,
                })
            }
        }
        deserializer.deserialize_identifier(V)
    }
}

impl<'de> Deserialize<'de> for CompactMeta {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CompactMeta;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("object metadata")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CompactMeta, A::Error> {
                let mut m = CompactMeta::default();
                while let Some(field) = map.next_key::<Field>()? {
                    match field {
                        Field::Name => m.name = map.next_value::<Option<BoxStr>>()?.map(|s| s.0),
                        Field::Namespace => {
                            m.namespace = map.next_value::<Option<Interned>>()?.map(|s| s.0)
                        }
                        Field::Uid => m.uid = map.next_value::<Option<BoxStr>>()?.map(|s| s.0),
                        Field::ResourceVersion => {
                            m.resource_version = map.next_value::<Option<BoxStr>>()?.map(|s| s.0)
                        }
                        Field::Generation => m.generation = map.next_value()?,
                        Field::CreationTimestamp => m.creation_timestamp = map.next_value()?,
                        Field::DeletionTimestamp => m.deletion_timestamp = map.next_value()?,
                        Field::Labels => m.labels = map.next_value()?,
                        Field::Annotations => m.annotations = map.next_value()?,
                        Field::OwnerReferences => {
                            m.owner_references = map
                                .next_value::<Option<Vec<OwnerReference>>>()?
                                .unwrap_or_default()
                                .into()
                        }
                        Field::Finalizers => {
                            m.finalizers = map
                                .next_value::<Option<Vec<BoxStr>>>()?
                                .unwrap_or_default()
                                .into_iter()
                                .map(|s| s.0)
                                .collect()
                        }
                        Field::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(m)
            }
        }
        deserializer.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_what_controllers_read_and_skips_managed_fields() {
        let json = r#"{"name":"a","namespace":"ns","uid":"u-1","resourceVersion":"7",
            "generation":3,"creationTimestamp":"2026-11-21T23:00:00Z",
            "labels":{"app":"web"},"annotations":{"note":"n"},
            "ownerReferences":[{"apiVersion":"v1","kind":"Foo","name":"f","uid":"o","controller":true}],
            "finalizers":["x/y"],"generateName":"a-",
            "managedFields":[{"manager":"m","fieldsV1":{"f:data":{}}}]}"#;
        let m: CompactMeta = serde_json::from_str(json).unwrap();
        assert_eq!(m.name(), Some("a"));
        assert_eq!(m.namespace(), Some("ns"));
        assert_eq!(m.uid(), Some("u-1"));
        assert_eq!(m.resource_version(), Some("7"));
        assert_eq!(m.generation(), Some(3));
        assert!(m.creation_timestamp().is_some());
        assert_eq!(m.labels().get("app"), Some("web"));
        assert_eq!(m.annotations()["note"], *"n");
        assert_eq!(m.owner_references()[0].name, "f");
        assert_eq!(m.finalizers().collect::<Vec<_>>(), ["x/y"]);

        let full: ObjectMeta = serde_json::from_str(json).unwrap();
        let mut want = full.clone();
        want.managed_fields = None;
        want.generate_name = None;
        assert_eq!(m.to_object_meta(), want);
        assert_eq!(CompactMeta::from(&full), m);
    }

    #[test]
    fn wrong_types_are_errors_naming_the_problem() {
        let err = serde_json::from_str::<CompactMeta>(r#"{"name":3}"#).unwrap_err();
        assert!(err.to_string().contains("a string"), "{err}");
        assert!(serde_json::from_str::<CompactMeta>(r#"{"labels":[1]}"#).is_err());
        assert!(serde_json::from_str::<CompactMeta>("[]").is_err());
    }
}
