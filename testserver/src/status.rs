//! `metav1.Status` errors exactly as kube-apiserver writes them: HTTP code,
//! `reason`, `message`, `details` (name, group, kind, causes,
//! retryAfterSeconds), and field errors formatted like apimachinery's
//! `field.Error`.

use serde_json::{json, Map, Value};
use std::fmt;

/// A resource with its API group, printed as kube prints it in messages:
/// `configmaps`, `deployments.apps`, `foos.samplecontroller.k8s.io`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    /// API group, empty for the core group.
    pub group: String,
    /// Plural resource name.
    pub resource: String,
}

impl GroupResource {
    /// A group and resource.
    pub fn new(group: &str, resource: &str) -> Self {
        Self {
            group: group.to_owned(),
            resource: resource.to_owned(),
        }
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// The kind of a field error (apimachinery `field.ErrorType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// `Required value`.
    Required,
    /// `Invalid value`.
    Invalid,
    /// `Invalid value` with reason `FieldValueTypeInvalid`.
    TypeInvalid,
    /// `Unsupported value`.
    NotSupported,
    /// `Forbidden`.
    Forbidden,
    /// `Duplicate value`.
    Duplicate,
    /// `Too long`.
    TooLong,
    /// `Too many`.
    TooMany,
}

impl FieldErrorKind {
    fn label(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Forbidden => "Forbidden",
            Self::Duplicate => "Duplicate value",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
        }
    }

    fn cause(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::TypeInvalid => "FieldValueTypeInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Forbidden => "FieldValueForbidden",
            Self::Duplicate => "FieldValueDuplicate",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
        }
    }

    /// Kinds whose message never shows the bad value.
    fn omits_value(self) -> bool {
        matches!(self, Self::Required | Self::Forbidden | Self::TooLong)
    }
}

/// One field error, as in a 422 `Invalid` Status's `details.causes`.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// The kind of error.
    pub kind: FieldErrorKind,
    /// Field path, e.g. `spec.replicas` or `metadata.name`.
    pub field: String,
    /// The offending value, where the message shows it.
    pub value: Option<Value>,
    /// Extra detail after the value.
    pub detail: String,
}

impl FieldError {
    /// A `Required value` error.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: FieldErrorKind::Required,
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }

    /// An `Invalid value` error.
    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self {
            kind: FieldErrorKind::Invalid,
            field: field.into(),
            value: Some(value),
            detail: detail.into(),
        }
    }

    /// A `Forbidden` error.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: FieldErrorKind::Forbidden,
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }

    /// An `Unsupported value` error listing the supported values.
    pub fn not_supported(field: impl Into<String>, value: Value, supported: &[String]) -> Self {
        let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        let detail = if quoted.is_empty() {
            String::new()
        } else {
            format!("supported values: {}", quoted.join(", "))
        };
        Self {
            kind: FieldErrorKind::NotSupported,
            field: field.into(),
            value: Some(value),
            detail,
        }
    }

    /// The body of the message without the field path (`ErrorBody` in Go).
    pub fn body(&self) -> String {
        let mut s = self.kind.label().to_owned();
        if !self.kind.omits_value() {
            if let Some(v) = &self.value {
                s.push_str(": ");
                s.push_str(&go_value(v));
            }
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// Go's `%q` for the strings that appear in messages.
pub(crate) fn go_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// How Go's field errors print a bad value.
fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Null => "null".to_owned(),
        Value::Number(_) | Value::Bool(_) => v.to_string(),
        other => other.to_string(),
    }
}

/// An error answered as a `metav1.Status` with `status: Failure`.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusError {
    /// HTTP status code (also `code` in the body).
    pub code: u16,
    /// `reason`, e.g. `NotFound`, `Conflict`, `Expired` (or whatever an
    /// admission webhook's denial gave).
    pub reason: std::borrow::Cow<'static, str>,
    /// Human-readable `message`.
    pub message: String,
    /// `details`, when kube sets them.
    pub details: Option<Box<Value>>,
    /// `metadata.continue` (the expired-continue error carries a fresh token).
    pub continue_token: Option<String>,
    /// Seconds for the `Retry-After` header.
    pub retry_after: Option<u64>,
}

impl StatusError {
    /// A Status error with no details.
    pub fn new(
        code: u16,
        reason: impl Into<std::borrow::Cow<'static, str>>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            code,
            reason: reason.into(),
            message: message.into(),
            details: None,
            continue_token: None,
            retry_after: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    fn name_details(gr: &GroupResource, name: &str) -> Value {
        let mut d = Map::new();
        d.insert("name".into(), json!(name));
        if !gr.group.is_empty() {
            d.insert("group".into(), json!(gr.group));
        }
        d.insert("kind".into(), json!(gr.resource));
        Value::Object(d)
    }

    /// 404 `<resource> "<name>" not found`.
    pub fn not_found(gr: &GroupResource, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{gr} {} not found", go_quote(name)),
        )
        .with_details(Self::name_details(gr, name))
    }

    /// 404 for a path that names no resource.
    pub fn route_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// 409 `<resource> "<name>" already exists`.
    pub fn already_exists(gr: &GroupResource, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{gr} {} already exists", go_quote(name)),
        )
        .with_details(Self::name_details(gr, name))
    }

    /// 409 `Operation cannot be fulfilled on <resource> "<name>": <why>`.
    pub fn conflict(gr: &GroupResource, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {gr} {}: {why}",
                go_quote(name)
            ),
        )
        .with_details(Self::name_details(gr, name))
    }

    /// 409 for a stale resourceVersion on update.
    pub fn stale(gr: &GroupResource, name: &str) -> Self {
        Self::conflict(
            gr,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 `<Kind>.<group> "<name>" is invalid: ...` with one cause per field error.
    pub fn invalid(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Self {
        let qualified = if group.is_empty() {
            kind.to_owned()
        } else {
            format!("{kind}.{group}")
        };
        let joined = match errors {
            [one] => one.to_string(),
            many => format!(
                "[{}]",
                many.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| json!({"reason": e.kind.cause(), "message": e.body(), "field": e.field}))
            .collect();
        let mut d = Map::new();
        d.insert("name".into(), json!(name));
        if !group.is_empty() {
            d.insert("group".into(), json!(group));
        }
        d.insert("kind".into(), json!(kind));
        d.insert("causes".into(), Value::Array(causes));
        Self::new(
            422,
            "Invalid",
            format!("{qualified} {} is invalid: {joined}", go_quote(name)),
        )
        .with_details(Value::Object(d))
    }

    /// 410 `Expired` with the given message.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 410 for a watch or exact list older than the retained history:
    /// `too old resource version: <asked> (<oldest kept>)`.
    pub fn too_old_resource_version(asked: u64, oldest: u64) -> Self {
        Self::expired(format!("too old resource version: {asked} ({oldest})"))
    }

    /// 410 for a list at a resourceVersion that was compacted away.
    pub fn list_too_old() -> Self {
        Self::expired("The resourceVersion for the provided list is too old.")
    }

    /// 410 for a continue token older than the retained history; carries a
    /// fresh token that continues at the latest version.
    pub fn continue_expired(new_token: Option<String>) -> Self {
        let mut e = Self::expired(
            "The provided continue parameter is too old to display a consistent list result. \
             You can start a new list without the continue parameter, or use the continue token \
             in this response to retrieve the remainder of the results. Continuing with the \
             provided token results in an inconsistent list - objects that were created, \
             modified, or deleted between the time the first chunk was returned and now may \
             show up in the list.",
        );
        e.continue_token = new_token;
        e
    }

    /// 400 `BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 `Unauthorized`.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 `Forbidden` on a resource.
    pub fn forbidden(gr: &GroupResource, name: &str, why: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!("{gr} {} is forbidden: {why}", go_quote(name)),
        )
        .with_details(Self::name_details(gr, name))
    }

    /// 405 `MethodNotAllowed`.
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    /// 406 `NotAcceptable`.
    pub fn not_acceptable() -> Self {
        Self::new(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, application/yaml, application/json;stream=watch",
        )
    }

    /// 415 `UnsupportedMediaType`.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml ({content_type} is not supported)"
            ),
        )
    }

    /// 429 for a watch whose watch cache is still initializing (as
    /// kube-apiserver answers right after a CRD is established).
    pub fn storage_initializing() -> Self {
        let mut e = Self::new(429, "TooManyRequests", "storage is (re)initializing")
            .with_details(json!({"retryAfterSeconds": 1}));
        e.retry_after = Some(1);
        e
    }

    /// 429 `TooManyRequests` with `Retry-After`.
    pub fn too_many_requests(retry_after: u64) -> Self {
        let mut e = Self::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
        )
        .with_details(json!({"retryAfterSeconds": retry_after}));
        e.retry_after = Some(retry_after);
        e
    }

    /// 500 `InternalError`.
    pub fn internal(message: &str) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {message}"),
        )
        .with_details(json!({"causes": [{"message": message}]}))
    }

    /// 503 `ServiceUnavailable`.
    pub fn service_unavailable(message: &str) -> Self {
        let mut e = Self::new(503, "ServiceUnavailable", message.to_owned());
        e.retry_after = Some(1);
        e
    }

    /// 504 `Timeout` for a resourceVersion newer than anything stored.
    pub fn too_large_resource_version(asked: u64, current: u64) -> Self {
        let mut e = Self::new(
            504,
            "Timeout",
            format!("Too large resource version: {asked}, current: {current}"),
        )
        .with_details(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1
        }));
        e.retry_after = Some(1);
        e
    }

    /// The `Status` object as JSON.
    pub fn to_json(&self) -> Value {
        let mut meta = Map::new();
        if let Some(c) = &self.continue_token {
            meta.insert("continue".into(), json!(c));
        }
        let mut m = Map::new();
        m.insert("kind".into(), json!("Status"));
        m.insert("apiVersion".into(), json!("v1"));
        m.insert("metadata".into(), Value::Object(meta));
        m.insert("status".into(), json!("Failure"));
        m.insert("message".into(), json!(self.message));
        m.insert("reason".into(), json!(self.reason));
        if let Some(d) = &self.details {
            m.insert("details".into(), (**d).clone());
        }
        m.insert("code".into(), json!(self.code));
        Value::Object(m)
    }
}

impl fmt::Display for StatusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for StatusError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_kube_apiserver() {
        let cm = GroupResource::new("", "configmaps");
        let dep = GroupResource::new("apps", "deployments");
        assert_eq!(
            StatusError::not_found(&cm, "x").message,
            "configmaps \"x\" not found"
        );
        assert_eq!(
            StatusError::not_found(&dep, "x").message,
            "deployments.apps \"x\" not found"
        );
        assert_eq!(
            StatusError::stale(&cm, "x").message,
            "Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again"
        );
        let j = StatusError::not_found(&dep, "x").to_json();
        assert_eq!(
            j["details"],
            json!({"name": "x", "group": "apps", "kind": "deployments"})
        );
        assert_eq!(j["code"], 404);
        assert_eq!(
            StatusError::too_old_resource_version(3, 10).message,
            "too old resource version: 3 (10)"
        );
    }

    #[test]
    fn invalid_lists_causes() {
        let errs = vec![
            FieldError::invalid(
                "spec.replicas",
                json!(20),
                "spec.replicas in body should be less than or equal to 10",
            ),
            FieldError::required("spec.deploymentName", ""),
        ];
        let e = StatusError::invalid("samplecontroller.k8s.io", "Foo", "x", &errs);
        assert_eq!(
            e.message,
            "Foo.samplecontroller.k8s.io \"x\" is invalid: [spec.replicas: Invalid value: 20: spec.replicas in body should be less than or equal to 10, spec.deploymentName: Required value]"
        );
        let j = e.to_json();
        assert_eq!(
            j["details"]["causes"][1],
            json!({"reason": "FieldValueRequired", "message": "Required value", "field": "spec.deploymentName"})
        );
        let one = StatusError::invalid("", "ConfigMap", "y", &errs[1..]);
        assert_eq!(
            one.message,
            "ConfigMap \"y\" is invalid: spec.deploymentName: Required value"
        );
    }

    #[test]
    fn not_supported_quotes_values() {
        let e = FieldError::not_supported("spec.mode", json!("c"), &["a".into(), "b".into()]);
        assert_eq!(
            e.to_string(),
            "spec.mode: Unsupported value: \"c\": supported values: \"a\", \"b\""
        );
    }
}
