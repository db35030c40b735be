//! An in-process Kubernetes API server for tests, demos and benchmarks.
//!
//! `kcontrol-testserver` serves, over real HTTP/1.1 and HTTP/2 on
//! 127.0.0.1 (plain or HTTPS with a CA generated at start), the part of the
//! Kubernetes API a controller touches, with kube-apiserver's semantics:
//!
//! - discovery (`/api`, `/apis`, group and resource lists, aggregated
//!   discovery `apidiscovery.k8s.io/v2`), `/openapi/v2`
//!   and `/openapi/v3` (enough for `kubectl` validation and `explain`),
//!   `/version`, `/healthz`, `/readyz`;
//! - the common built-in kinds, from one table of `k8s-openapi` types
//!   with kube's short names, columns, subresources and defaults:
//!   core/v1 namespaces, configmaps, secrets, events, pods, services,
//!   serviceaccounts, endpoints, persistentvolumeclaims,
//!   persistentvolumes, nodes; apps/v1 deployments, replicasets,
//!   statefulsets, daemonsets; batch/v1 jobs, cronjobs;
//!   networking.k8s.io/v1 ingresses, networkpolicies;
//!   rbac.authorization.k8s.io/v1 roles, rolebindings, clusterroles,
//!   clusterrolebindings; policy/v1 poddisruptionbudgets;
//!   autoscaling/v2 horizontalpodautoscalers; discovery.k8s.io/v1
//!   endpointslices; events.k8s.io/v1 events; coordination.k8s.io/v1
//!   leases; apiextensions.k8s.io/v1 customresourcedefinitions. CRDs
//!   register their resources (all served versions, scope, status and
//!   scale subresources, schema validation), and
//!   [`TestServer::register_resource`] any other ([`ResourceInfo::of`] a
//!   k8s-openapi type, or [`ResourceInfo::new`]);
//! - storage semantics: one global resourceVersion, uid, generation,
//!   generateName, 409 on stale updates, status and scale subresources,
//!   merge / JSON / strategic-merge patches and server-side apply with
//!   kube's merge keys and list types, field ownership (`managedFields`,
//!   conflicts, `force`), finalizers, garbage collection and propagation
//!   policies; Services' cluster IPs and node ports;
//! - lists (selectors, limit/continue, resourceVersion and
//!   resourceVersionMatch) and watches (bounded history with 410 Expired,
//!   bookmarks, timeouts, `sendInitialEvents`);
//! - admission webhooks (`MutatingWebhookConfiguration`,
//!   `ValidatingWebhookConfiguration`) and CRD conversion webhooks, called
//!   over HTTPS as kube-apiserver calls them;
//! - simulators: a Deployment status simulator, and with Nodes
//!   ([`TestServerBuilder::nodes`], [`TestServer::add_node`]) pods that
//!   are scheduled and run, and ReplicaSets, StatefulSets, DaemonSets and
//!   Jobs that get pods and report their status; fault injection
//!   ([`Faults`], also at `/__admin/...`), an admission limit on the
//!   requests in flight (as priority and fairness,
//!   [`TestServerBuilder::max_requests_in_flight`]), a request log and
//!   counters (requests that came sooner than their `Retry-After` too).
//!
//! ```
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use kcontrol_testserver::TestServer;
//! use serde_json::json;
//!
//! let server = TestServer::builder().tls(true).start().await?;
//! assert!(server.url().starts_with("https://127.0.0.1:"));
//! assert!(server.kubeconfig().contains("certificate-authority-data"));
//!
//! // seed an object in-process, as a POST would create it
//! let objects = server.objects();
//! let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "1"}});
//! let stored = objects.create("configmaps", "default", cm)?;
//! assert_eq!(stored.resource_version(), objects.resource_version());
//!
//! // the next list of configmaps answers 410 Expired
//! server.faults().expire_next_lists(1);
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```

mod admission;
mod builtin;
mod controllers;
mod crd;
mod events;
mod faults;
mod fields;
mod flow_control;
#[doc(hidden)]
pub mod fuzzing;
mod http;
mod kinds;
mod kubeconfig;
mod meta;
mod metrics;
mod objects;
mod patch;
mod proto;
mod registry;
mod resource;
mod rest;
mod retry_after;
mod schema;
mod selector;
mod server;
mod status;
mod store;
mod timeutil;
mod tls;
mod wait;

pub use faults::{Failure, FaultScope, Faults, Flapping, Restart};
pub use http::request::Verb;
pub use metrics::{Counters, RequestRecord};
pub use objects::{Objects, StoredList, TypedError};
pub use resource::{Behavior, PrinterColumn, ResourceInfo, ScaleSubresource};
pub use server::{BlockingTestServer, TestServer, TestServerBuilder};
pub use status::{FieldError, FieldErrorKind, GroupResource, StatusError};
pub use store::{StoredObject, WatchEventType};
pub use wait::{
    eventually, eventually_blocking, eventually_within, try_eventually, try_eventually_within,
    wait_with_output_within, Outcome, TimedOut, EVENTUALLY_DEADLINE,
};

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// TLS setup failed.
    #[error("TLS setup: {0}")]
    Tls(String),
    /// Binding or serving failed.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}
