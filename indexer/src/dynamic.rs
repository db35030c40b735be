//! [`DynamicObject`]: an object of any kind, with its resource given at run
//! time, for custom resources without a Rust type and for untyped tools.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::object::{ApiResource, Object};

/// `apiVersion` and `kind`, as they appear at the top of every object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeMeta {
    /// `apiVersion`, e.g. `samplecontroller.k8s.io/v1alpha1`.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// `kind`, e.g. `Foo`.
    pub kind: String,
}

/// An object of any kind: typed metadata plus the rest of the body as JSON.
///
/// ```
/// use kcontrol_indexer::{ApiResource, DynamicObject, Object};
///
/// let foos = ApiResource::new("samplecontroller.k8s.io", "v1alpha1", "Foo", "foos", true);
/// let foo = DynamicObject::new("example-foo", &foos)
///     .within("default")
///     .data(serde_json::json!({ "spec": { "deploymentName": "example-foo", "replicas": 1 } }));
/// assert_eq!(foo.namespace(), Some("default"));
/// assert_eq!(foo.data["spec"]["replicas"], 1);
/// let json = serde_json::to_value(&foo).unwrap();
/// assert_eq!(json["apiVersion"], "samplecontroller.k8s.io/v1alpha1");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DynamicObject {
    /// `apiVersion` and `kind`, when the body carried them.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub types: Option<TypeMeta>,
    /// The object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Every other top-level field (`spec`, `status`, `data`, ...), as a JSON object.
    #[serde(flatten)]
    pub data: serde_json::Value,
}

impl DynamicObject {
    /// A new object of the given resource with only a name set.
    pub fn new(name: &str, resource: &ApiResource) -> Self {
        Self {
            types: Some(TypeMeta {
                api_version: resource.api_version().into_owned(),
                kind: resource.kind.to_string(),
            }),
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            data: serde_json::Value::Object(serde_json::Map::new()),
        }
    }

    /// Sets the namespace.
    #[must_use]
    pub fn within(mut self, namespace: &str) -> Self {
        self.metadata.namespace = Some(namespace.to_owned());
        self
    }

    /// Sets the body fields other than `apiVersion`, `kind` and `metadata`.
    #[must_use]
    pub fn data(mut self, data: serde_json::Value) -> Self {
        self.data = data;
        self
    }
}

impl Object for DynamicObject {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_unknown_fields() {
        let json = serde_json::json!({
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "Foo",
            "metadata": { "name": "a", "namespace": "ns", "resourceVersion": "7" },
            "spec": { "deploymentName": "a", "replicas": 2 },
            "status": { "availableReplicas": 1 }
        });
        let obj: DynamicObject = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(obj.types.as_ref().unwrap().kind, "Foo");
        assert_eq!(obj.resource_version(), Some("7"));
        assert_eq!(obj.data["spec"]["replicas"], 2);
        assert_eq!(serde_json::to_value(&obj).unwrap(), json);
    }
}
