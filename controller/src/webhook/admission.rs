//! Typed admission handlers: [`Defaulter`] (its change to a typed object
//! becomes a JSON patch), [`Validator`] (create, update, delete; warnings;
//! a [`Denial`] with a message or field causes) and the raw
//! [`AdmissionHandler`]; and the endpoints that run them on a decoded
//! `AdmissionReview`.

use std::collections::HashSet;
use std::future::Future;
use std::marker::PhantomData;

use futures::future::BoxFuture;
use kcontrol_indexer::TypedResource;
use kube_core::admission::{AdmissionResponse, Operation};
use kube_core::response::{StatusCause, StatusDetails, StatusSummary};
use kube_core::Status;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::review::AdmissionInput;

/// An `admission.k8s.io/v1` request as a handler sees it (kube-rs's type):
/// operation, kind and resource, name and namespace, user, dry run, and the
/// object and old object as sent.
pub type AdmissionRequest = kube_core::admission::AdmissionRequest<kube_core::DynamicObject>;

/// Warnings returned to the API client beside an allowed answer (kubectl
/// prints them).
pub type Warnings = Vec<String>;

/// One field error of a [`Denial::invalid`], formatted as apimachinery's
/// `field.Error` (`spec.replicas: Invalid value: -1: must be at least 0`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldCause {
    /// The field path, e.g. `spec.replicas`.
    pub field: String,
    /// The cause's reason, e.g. `FieldValueInvalid`.
    pub reason: String,
    /// What is wrong, without the field path.
    pub message: String,
}

impl FieldCause {
    /// `Invalid value: <value>: <detail>`.
    pub fn invalid(
        field: impl Into<String>,
        value: impl Serialize,
        detail: impl std::fmt::Display,
    ) -> Self {
        let shown = serde_json::to_value(value)
            .map(|v| v.to_string())
            .unwrap_or_else(|_| "<unprintable>".to_owned());
        Self::with_label(
            field,
            "FieldValueInvalid",
            format!("Invalid value: {shown}"),
            detail,
        )
    }

    /// `Required value[: <detail>]`.
    pub fn required(field: impl Into<String>, detail: impl std::fmt::Display) -> Self {
        Self::with_label(field, "FieldValueRequired", "Required value".into(), detail)
    }

    /// `Forbidden[: <detail>]`.
    pub fn forbidden(field: impl Into<String>, detail: impl std::fmt::Display) -> Self {
        Self::with_label(field, "FieldValueForbidden", "Forbidden".into(), detail)
    }

    fn with_label(
        field: impl Into<String>,
        reason: &str,
        label: String,
        detail: impl std::fmt::Display,
    ) -> Self {
        let detail = detail.to_string();
        let message = if detail.is_empty() {
            label
        } else {
            format!("{label}: {detail}")
        };
        Self {
            field: field.into(),
            reason: reason.to_owned(),
            message,
        }
    }
}

impl std::fmt::Display for FieldCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Why a webhook refuses a request: the API server answers the client
/// with this code, reason and causes, and the message prefixed by
/// `admission webhook "<name>" denied the request: `.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    code: u16,
    reason: String,
    message: String,
    causes: Vec<FieldCause>,
}

impl Denial {
    /// 403 `Forbidden` with a message (controller-runtime's `Denied`).
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            code: 403,
            reason: "Forbidden".into(),
            message: message.into(),
            causes: Vec::new(),
        }
    }

    /// 422 `Invalid` with field causes; the message is apimachinery's
    /// (`Foo.example.com "name" is invalid: spec.replicas: Invalid value: …`),
    /// written with the request's kind and name.
    pub fn invalid(causes: impl IntoIterator<Item = FieldCause>) -> Self {
        Self {
            code: 422,
            reason: "Invalid".into(),
            message: String::new(),
            causes: causes.into_iter().collect(),
        }
    }

    /// Another code and reason (e.g. 409 `Conflict`).
    #[must_use]
    pub fn with_code(mut self, code: u16, reason: impl Into<String>) -> Self {
        self.code = code;
        self.reason = reason.into();
        self
    }

    /// Adds a field cause.
    #[must_use]
    pub fn with_cause(mut self, cause: FieldCause) -> Self {
        self.causes.push(cause);
        self
    }

    /// The code the answer carries.
    pub fn code(&self) -> u16 {
        self.code
    }

    /// The status a denial answers with, for a request of `kind`/`name`.
    fn status(&self, request: &AdmissionRequest) -> Status {
        let message = if self.message.is_empty() && !self.causes.is_empty() {
            invalid_message(request, &self.causes)
        } else {
            self.message.clone()
        };
        let mut status = Status::failure(&message, &self.reason).with_code(self.code);
        if !self.causes.is_empty() {
            status = status.with_details(StatusDetails {
                name: request.name.clone(),
                group: request.kind.group.clone(),
                kind: request.kind.kind.clone(),
                uid: String::new(),
                causes: self
                    .causes
                    .iter()
                    .map(|c| StatusCause {
                        reason: c.reason.clone(),
                        message: c.message.clone(),
                        field: c.field.clone(),
                    })
                    .collect(),
                retry_after_seconds: 0,
            });
        }
        status
    }
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.reason)?;
        for c in &self.causes {
            write!(f, "; {c}")?;
        }
        Ok(())
    }
}

/// apimachinery's `NewInvalid` message.
fn invalid_message(request: &AdmissionRequest, causes: &[FieldCause]) -> String {
    let kind = if request.kind.group.is_empty() {
        request.kind.kind.clone()
    } else {
        format!("{}.{}", request.kind.kind, request.kind.group)
    };
    let errors = match causes {
        [one] => one.to_string(),
        many => format!(
            "[{}]",
            many.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    format!("{kind} {:?} is invalid: {errors}", request.name)
}

/// Sets defaults on objects of `K` before they are stored (a mutating
/// webhook; controller-runtime's `CustomDefaulter`). Called for creates
/// and updates; the change to `object` is answered as a JSON patch.
/// Plain closures `Fn(&mut K)` are defaulters.
pub trait Defaulter<K>: Send + Sync + 'static {
    /// Changes `object` in place; an error refuses the request.
    fn default(
        &self,
        object: &mut K,
        request: &AdmissionRequest,
    ) -> impl Future<Output = Result<(), Denial>> + Send;
}

impl<K, F> Defaulter<K> for F
where
    F: Fn(&mut K) + Send + Sync + 'static,
{
    fn default(
        &self,
        object: &mut K,
        _request: &AdmissionRequest,
    ) -> impl Future<Output = Result<(), Denial>> + Send {
        self(object);
        std::future::ready(Ok(()))
    }
}

/// Allows or refuses creates, updates and deletes of `K` (a validating
/// webhook; controller-runtime's `CustomValidator`). Each method allows
/// unless overridden.
pub trait Validator<K: Sync>: Send + Sync + 'static {
    /// A create of `object`.
    fn validate_create(
        &self,
        object: &K,
        request: &AdmissionRequest,
    ) -> impl Future<Output = Result<Warnings, Denial>> + Send {
        let _ = (object, request);
        std::future::ready(Ok(Vec::new()))
    }

    /// An update from `old` to `new`.
    fn validate_update(
        &self,
        old: &K,
        new: &K,
        request: &AdmissionRequest,
    ) -> impl Future<Output = Result<Warnings, Denial>> + Send {
        let _ = (old, new, request);
        std::future::ready(Ok(Vec::new()))
    }

    /// A delete of `object` (its last state).
    fn validate_delete(
        &self,
        object: &K,
        request: &AdmissionRequest,
    ) -> impl Future<Output = Result<Warnings, Denial>> + Send {
        let _ = (object, request);
        std::future::ready(Ok(Vec::new()))
    }
}

/// An admission webhook at kube-rs's level: the request in, the response
/// out (build it with `AdmissionResponse::from(&request)`). Closures
/// `Fn(AdmissionRequest) -> impl Future<Output = AdmissionResponse>` are
/// handlers.
pub trait AdmissionHandler: Send + Sync + 'static {
    /// Answers one request.
    fn handle(&self, request: AdmissionRequest) -> impl Future<Output = AdmissionResponse> + Send;
}

impl<F, Fut> AdmissionHandler for F
where
    F: Fn(AdmissionRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = AdmissionResponse> + Send,
{
    fn handle(&self, request: AdmissionRequest) -> impl Future<Output = AdmissionResponse> + Send {
        self(request)
    }
}

/// What the server calls for a decoded review (object safe).
pub(crate) trait AdmissionEndpoint: Send + Sync {
    fn call(&self, input: AdmissionInput) -> BoxFuture<'_, AdmissionResponse>;
}

/// An allowed answer.
pub(crate) fn allowed(request: &AdmissionRequest) -> AdmissionResponse {
    AdmissionResponse::from(request)
}

/// A refusal because the request could not be handled (controller-runtime's
/// `Errored`): code 400 unless said otherwise.
pub(crate) fn errored(request: &AdmissionRequest, code: u16, message: String) -> AdmissionResponse {
    let mut r = AdmissionResponse::from(request);
    r.allowed = false;
    r.result = Status::failure(&message, "").with_code(code);
    r
}

fn denied(request: &AdmissionRequest, denial: &Denial) -> AdmissionResponse {
    let mut r = AdmissionResponse::from(request);
    r.allowed = false;
    r.result = denial.status(request);
    r
}

fn with_warnings(mut r: AdmissionResponse, warnings: Warnings) -> AdmissionResponse {
    if !warnings.is_empty() {
        r.warnings = Some(warnings);
    }
    r
}

/// The kind name used in decode errors.
fn kind_name<K: TypedResource>() -> String {
    let r = K::api_resource();
    format!("{}/{}", r.api_version(), r.kind)
}

fn decode<K: TypedResource + DeserializeOwned>(
    request: &AdmissionRequest,
    raw: Option<&Value>,
    which: &str,
) -> Result<K, Box<AdmissionResponse>> {
    let Some(raw) = raw.filter(|v| !v.is_null()) else {
        return Err(Box::new(errored(
            request,
            400,
            format!("the request has no {which} to decode"),
        )));
    };
    serde_json::from_value(raw.clone()).map_err(|e| {
        Box::new(errored(
            request,
            400,
            format!("decoding the {which} as {}: {e}", kind_name::<K>()),
        ))
    })
}

/// The patch from `raw` (as sent) to `after` (the changed typed object),
/// without the changes the typed round trip alone makes (`raw` → `before`):
/// fields the Rust type does not know are never removed
/// (controller-runtime drops such removals too).
pub(crate) fn typed_patch(raw: &Value, before: &Value, after: &Value) -> json_patch::Patch {
    let key = |op: &json_patch::PatchOperation| serde_json::to_string(op).unwrap_or_default();
    let noise: HashSet<String> = json_patch::diff(raw, before).0.iter().map(key).collect();
    let ops = json_patch::diff(raw, after)
        .0
        .into_iter()
        .filter(|op| !noise.contains(&key(op)))
        .collect();
    json_patch::Patch(ops)
}

/// A [`Defaulter`] of `K` as an endpoint.
pub(crate) struct DefaultingEndpoint<K, D> {
    pub(crate) defaulter: D,
    pub(crate) kind: PhantomData<fn() -> K>,
}

impl<K, D> AdmissionEndpoint for DefaultingEndpoint<K, D>
where
    K: TypedResource + Serialize + DeserializeOwned + Send + 'static,
    D: Defaulter<K>,
{
    fn call(&self, input: AdmissionInput) -> BoxFuture<'_, AdmissionResponse> {
        Box::pin(async move {
            let request = &input.request;
            if !matches!(request.operation, Operation::Create | Operation::Update) {
                return allowed(request);
            }
            let mut object: K = match decode(request, input.object.as_ref(), "object") {
                Ok(o) => o,
                Err(answer) => return *answer,
            };
            let (Some(raw), Ok(before)) = (input.object.as_ref(), serde_json::to_value(&object))
            else {
                return errored(request, 500, "encoding the object".into());
            };
            if let Err(denial) = self.defaulter.default(&mut object, request).await {
                return denied(request, &denial);
            }
            let after = match serde_json::to_value(&object) {
                Ok(a) => a,
                Err(e) => return errored(request, 500, format!("encoding the object: {e}")),
            };
            let patch = typed_patch(raw, &before, &after);
            if patch.0.is_empty() {
                return allowed(request);
            }
            match allowed(request).with_patch(patch) {
                Ok(r) => r,
                Err(e) => errored(request, 500, e.to_string()),
            }
        })
    }
}

/// A [`Validator`] of `K` as an endpoint.
pub(crate) struct ValidatingEndpoint<K, V> {
    pub(crate) validator: V,
    pub(crate) kind: PhantomData<fn() -> K>,
}

impl<K, V> AdmissionEndpoint for ValidatingEndpoint<K, V>
where
    K: TypedResource + DeserializeOwned + Send + Sync + 'static,
    V: Validator<K>,
{
    fn call(&self, input: AdmissionInput) -> BoxFuture<'_, AdmissionResponse> {
        Box::pin(async move {
            let request = &input.request;
            let outcome = match request.operation {
                Operation::Create => match decode::<K>(request, input.object.as_ref(), "object") {
                    Ok(new) => self.validator.validate_create(&new, request).await,
                    Err(answer) => return *answer,
                },
                Operation::Update => {
                    let new = decode::<K>(request, input.object.as_ref(), "object");
                    let old = decode::<K>(request, input.old_object.as_ref(), "old object");
                    match (old, new) {
                        (Ok(old), Ok(new)) => {
                            self.validator.validate_update(&old, &new, request).await
                        }
                        (Err(answer), _) | (_, Err(answer)) => return *answer,
                    }
                }
                Operation::Delete => {
                    match decode::<K>(request, input.old_object.as_ref(), "old object") {
                        Ok(old) => self.validator.validate_delete(&old, request).await,
                        Err(answer) => return *answer,
                    }
                }
                Operation::Connect => Ok(Vec::new()),
            };
            match outcome {
                Ok(warnings) => with_warnings(allowed(request), warnings),
                Err(denial) => denied(request, &denial),
            }
        })
    }
}

/// An [`AdmissionHandler`] as an endpoint.
pub(crate) struct RawEndpoint<H>(pub(crate) H);

impl<H: AdmissionHandler> AdmissionEndpoint for RawEndpoint<H> {
    fn call(&self, input: AdmissionInput) -> BoxFuture<'_, AdmissionResponse> {
        Box::pin(self.0.handle(input.request))
    }
}

/// Whether an answer allows, and the code it carries (200 when allowed).
pub(crate) fn outcome(r: &AdmissionResponse) -> (bool, u16) {
    if r.allowed {
        return (true, 200);
    }
    let code = match r.result.code {
        0 if r.result.status == Some(StatusSummary::Success) => 200,
        0 => 403,
        c => c,
    };
    (false, code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_typed_patch_keeps_fields_the_type_does_not_know() {
        // `extra` is unknown to the type: the round trip drops it, the
        // defaulter sets `spec.replicas`
        let raw =
            json!({"metadata": {"name": "a", "creationTimestamp": null}, "spec": {"extra": 1}});
        let before = json!({"metadata": {"name": "a"}, "spec": {}});
        let after = json!({"metadata": {"name": "a"}, "spec": {"replicas": 3}});
        let patch = typed_patch(&raw, &before, &after);
        assert_eq!(
            serde_json::to_value(&patch).unwrap_or_default(),
            json!([{"op": "add", "path": "/spec/replicas", "value": 3}])
        );
        let mut patched = raw.clone();
        assert!(json_patch::patch(&mut patched, &patch.0).is_ok());
        assert_eq!(patched["spec"], json!({"extra": 1, "replicas": 3}));
    }

    #[test]
    fn a_defaulter_removing_a_known_field_is_a_removal() {
        let raw = json!({"spec": {"a": 1, "b": 2}});
        let before = raw.clone();
        let after = json!({"spec": {"a": 1}});
        let patch = typed_patch(&raw, &before, &after);
        assert_eq!(
            serde_json::to_value(&patch).unwrap_or_default(),
            json!([{"op": "remove", "path": "/spec/b"}])
        );
    }

    #[test]
    fn field_causes_read_as_apimachinery_field_errors() {
        let c = FieldCause::invalid("spec.replicas", -1, "must be at least 0");
        assert_eq!(
            c.to_string(),
            "spec.replicas: Invalid value: -1: must be at least 0"
        );
        assert_eq!(c.reason, "FieldValueInvalid");
        let c = FieldCause::invalid("spec.image", "", "must not be empty");
        assert_eq!(c.message, "Invalid value: \"\": must not be empty");
        assert_eq!(
            FieldCause::required("spec.image", "").to_string(),
            "spec.image: Required value"
        );
    }
}
