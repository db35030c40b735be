//! Admission and conversion webhooks, as controller-runtime's `webhook`
//! package serves them: one HTTPS server (rustls) whose certificate and
//! key come from files (the cert-manager mount, `tls.crt` and `tls.key` in
//! a directory) and are reloaded when they change, answering
//! `admission.k8s.io/v1` `AdmissionReview`s and `apiextensions.k8s.io/v1`
//! `ConversionReview`s (the wire types are kube-rs's, from [`kube_core`],
//! so a handler written for kube-rs plugs in unchanged).
//!
//! - [`Defaulter`]: changes a typed object; the answer is the JSON patch
//!   from the object the API server sent to the changed one
//!   (`patchType: JSONPatch`), fields the Rust type does not know left
//!   alone (controller-runtime's `CustomDefaulter`);
//! - [`Validator`]: allows (with warnings) or denies a create, an update
//!   (old object at hand) or a delete, with a message or field causes
//!   ([`Denial`]; controller-runtime's `CustomValidator`);
//! - [`Conversion`]: a typed conversion function per version pair of a
//!   custom resource with several versions;
//! - [`AdmissionHandler`]: the raw kube-rs level, an
//!   `AdmissionRequest<DynamicObject>` in, an `AdmissionResponse` out.
//!
//! [`WebhookServer`] serves them with `/healthz` and Prometheus metrics
//! under controller-runtime's names
//! (`controller_runtime_webhook_requests_total{webhook,code}`,
//! `controller_runtime_webhook_latency_seconds{webhook}`,
//! `controller_runtime_webhook_requests_in_flight{webhook}`), plus
//! `kcontrol_webhook_responses_total{webhook,allowed,code}` for what the
//! answers said. `Manager::serve_webhooks` runs it beside the
//! controllers. A body over the size limit or one that does not decode is
//! answered with a review saying why (status code 400 or 413 in it), never
//! a panic. [`DevCertificates`] makes a CA and a serving certificate for
//! development and tests and puts the CA into webhook configurations
//! ([`patch_ca_bundle`]).
//!
//! ```no_run
//! # async fn demo(client: kcontrol_client::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use kcontrol_controller::webhook::{CertWatcher, Denial, Validator, WebhookServer};
//! use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
//!
//! struct NoEmptyData;
//! impl Validator<ConfigMap> for NoEmptyData {
//!     async fn validate_create(
//!         &self,
//!         cm: &ConfigMap,
//!         _: &kcontrol_controller::webhook::AdmissionRequest,
//!     ) -> Result<Vec<String>, Denial> {
//!         match &cm.data {
//!             Some(d) if !d.is_empty() => Ok(Vec::new()),
//!             _ => Err(Denial::new("a ConfigMap needs data")),
//!         }
//!     }
//! }
//!
//! let certs = CertWatcher::from_dir("/tmp/k8s-webhook-server/serving-certs")?;
//! let server = WebhookServer::new(certs)
//!     .defaulting("/mutate-v1-configmap", |cm: &mut ConfigMap| {
//!         cm.data.get_or_insert_with(Default::default);
//!     })
//!     .validating("/validate-v1-configmap", NoEmptyData);
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! let addr = server.serve("0.0.0.0:9443".parse()?, shutdown).await?;
//! # Ok(()) }
//! ```
//!
//! The contracts (WH1…) are in the workspace's `DESIGN.md`.

mod admission;
mod certs;
mod conversion;
mod dev_certs;
mod metrics;
mod review;
mod server;

pub use admission::{
    AdmissionHandler, AdmissionRequest, Defaulter, Denial, FieldCause, Validator, Warnings,
};
pub use certs::{CertError, CertWatcher};
pub use conversion::{Conversion, ConversionError};
pub use dev_certs::{patch_ca_bundle, DevCertificates};
pub use metrics::WebhookMetrics;
pub use server::{WebhookError, WebhookServer, DEFAULT_MAX_BODY_BYTES};

/// kube-rs's core types: the admission and conversion wire types
/// (`admission::{AdmissionReview, AdmissionResponse, Operation}`,
/// `conversion::{ConversionReview, ConversionRequest, ConversionResponse}`)
/// and the `DynamicObject` an [`AdmissionHandler`] receives.
pub use kube_core;

#[doc(hidden)]
pub mod fuzzing {
    //! The decoding entry point of the fuzz target in `fuzz/`: not part of
    //! the supported API.
    pub use super::review::fuzz_decode;
}
