//! Conformance tests of kcontrol-testserver over real HTTP(S), plus kubectl
//! and the Python `kubernetes` client as real clients, and a stress test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs
)]

mod apply;
mod client;
mod crds;
mod crud;
mod discovery;
mod events;
mod faults;
mod flow_control;
mod kinds;
mod kubectl;
mod lifecycle;
mod lists;
mod nodes;
mod protobuf;
mod python;
mod replicasets;
mod scale;
mod security;
mod stress;
mod watches;

use kcontrol_testserver::TestServer;
use serde_json::{json, Value};

/// A server with default options.
pub async fn server() -> TestServer {
    TestServer::start().await.expect("server starts")
}

/// A ConfigMap body.
pub fn cm(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": name}})
}

/// The Foo CRD of the sample controller, with the approval annotation.
pub fn foo_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "foos.samplecontroller.k8s.io", "annotations": {"api-approved.kubernetes.io": "unapproved, testing only"}},
        "spec": {
            "group": "samplecontroller.k8s.io",
            "scope": "Namespaced",
            "names": {"kind": "Foo", "plural": "foos", "singular": "foo", "listKind": "FooList", "shortNames": ["fo"]},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "required": ["deploymentName", "replicas"], "properties": {
                            "deploymentName": {"type": "string", "pattern": "^[a-z0-9-]+$"},
                            "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                            "mode": {"type": "string", "enum": ["fast", "safe"]}
                        }},
                        "status": {"type": "object", "properties": {"availableReplicas": {"type": "integer"}}}
                    }
                }}
            }]
        }
    })
}

/// A Foo body.
pub fn foo(name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": {"name": name},
        "spec": {"deploymentName": name, "replicas": replicas}})
}

/// A Deployment body.
pub fn deployment(name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}}}})
}
