//! The Foo custom resource (`samplecontroller.k8s.io/v1alpha1`): a request
//! for a Deployment of nginx with a number of replicas, as defined by
//! `artifacts/examples/crd.yaml`.
//!
//! [`Foo`] is defined by `kcontrol_indexer::custom_resource!` from its spec
//! and status: the macro writes the struct, its wire form and the
//! `k8s_openapi` traits that give it kcontrol's `Object` and
//! `TypedResource`, so `Api<Foo>`, informers and listers work on it as on
//! any built-in type.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The API group of Foo.
pub const GROUP: &str = <Foo as k8s_openapi::Resource>::GROUP;
/// The API version of Foo within its group.
pub const VERSION: &str = <Foo as k8s_openapi::Resource>::VERSION;
/// `apiVersion` of a Foo.
pub const API_VERSION: &str = <Foo as k8s_openapi::Resource>::API_VERSION;
/// The kind.
pub const KIND: &str = <Foo as k8s_openapi::Resource>::KIND;

/// The desired state of a Foo.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FooSpec {
    /// Name of the Deployment the controller creates and owns.
    #[serde(default)]
    pub deployment_name: String,
    /// Replicas of that Deployment (1 to 10, enforced by the CRD schema).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
}

/// The observed state of a Foo.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FooStatus {
    /// Available replicas of the owned Deployment.
    #[serde(default)]
    pub available_replicas: i32,
}

kcontrol_indexer::custom_resource! {
    /// A Foo: the desired Deployment in `spec`, what the controller observed
    /// in `status`.
    #[derive(Default, PartialEq)]
    pub struct Foo {
        group: "samplecontroller.k8s.io",
        version: "v1alpha1",
        plural: "foos",
        scope: Namespaced,
        spec: FooSpec,
        status: FooStatus,
    }
}

impl Foo {
    /// A Foo named `name` in `namespace` asking for `replicas` replicas of a
    /// Deployment named `deployment_name`.
    pub fn with_deployment(
        namespace: &str,
        name: &str,
        deployment_name: &str,
        replicas: i32,
    ) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            spec: FooSpec {
                deployment_name: deployment_name.to_owned(),
                replicas: Some(replicas),
            },
            status: None,
        }
    }

    /// The replicas asked for: `spec.replicas`, or 1 (a Deployment's
    /// default) when unset.
    pub fn desired_replicas(&self) -> i32 {
        self.spec.replicas.unwrap_or(1)
    }

    /// `status.availableReplicas`, 0 when there is no status yet.
    pub fn available_replicas(&self) -> i32 {
        self.status.as_ref().map_or(0, |s| s.available_replicas)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcontrol_indexer::{ApiResource, Object};
    use serde_json::json;

    #[test]
    fn foo_is_a_kcontrol_resource() {
        let r = ApiResource::of::<Foo>();
        assert_eq!(r.api_version(), "samplecontroller.k8s.io/v1alpha1");
        assert_eq!(r.plural, "foos");
        assert_eq!(r.kind, "Foo");
        assert!(r.namespaced);
        let foo = Foo::with_deployment("ns", "a", "a-deploy", 2);
        assert_eq!(foo.name(), Some("a"));
        assert_eq!(foo.namespace(), Some("ns"));
    }

    #[test]
    fn round_trips_the_wire_form() {
        let wire = json!({
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "Foo",
            "metadata": {"name": "example-foo", "namespace": "default", "resourceVersion": "7"},
            "spec": {"deploymentName": "example-foo", "replicas": 1},
            "status": {"availableReplicas": 1}
        });
        let foo: Foo = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(foo.spec.deployment_name, "example-foo");
        assert_eq!(foo.desired_replicas(), 1);
        assert_eq!(foo.available_replicas(), 1);
        assert_eq!(serde_json::to_value(&foo).unwrap(), wire);
    }

    #[test]
    fn missing_fields_default() {
        let foo: Foo = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
        assert_eq!(foo.spec.deployment_name, "");
        assert_eq!(foo.desired_replicas(), 1);
        assert_eq!(foo.available_replicas(), 0);
        let wire = serde_json::to_value(&foo).unwrap();
        assert_eq!(wire["kind"], "Foo");
        assert!(wire.get("status").is_none());
        assert!(wire["spec"].get("replicas").is_none());
    }

    #[test]
    fn the_example_manifest_parses() {
        let foo: Foo = serde_yaml::from_str(crate::artifacts::EXAMPLE_FOO_YAML).unwrap();
        assert_eq!(foo.name(), Some("example-foo"));
        assert_eq!(foo.spec.replicas, Some(1));
    }
}
