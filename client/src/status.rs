//! The Kubernetes `Status` object: what the API server sends for a failed
//! request (and in a watch `ERROR` event), with the predicates callers use to
//! decide what to do about it (`is_not_found`, `is_conflict`, `is_expired`...).

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `meta/v1 Status`: the result of an API call that did not return an object.
///
/// Decoding is lenient: every field is optional, so a `Status` embedded in a
/// watch `ERROR` event without `apiVersion`/`kind` still decodes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// `"Success"` or `"Failure"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Suggested HTTP code (0 or absent when unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    /// Machine-readable reason: `NotFound`, `Conflict`, `Expired`, `Gone`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Extended data for the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
}

/// `meta/v1 StatusDetails`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// Name of the object the status is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// API group of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Kind (or resource) of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// UID of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Individual causes (field errors and such).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// Seconds the client should wait before retrying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u32>,
}

/// `meta/v1 StatusCause`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCause {
    /// Machine-readable cause (`FieldValueInvalid`, `ResourceVersionTooLarge`, ...).
    #[serde(default, rename = "reason", skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The field the cause is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// The `Status` of a `410 Gone` answer to a watch or a list with a
/// resourceVersion the server no longer keeps, as kube-apiserver words it.
const TOO_OLD_RESOURCE_VERSION: &str = "too old resource version";

impl Status {
    /// A `Failure` status with a code, a reason and a message.
    pub fn failure(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            status: Some("Failure".to_owned()),
            code: Some(code),
            reason: Some(reason.to_owned()),
            message: Some(message.into()),
            details: None,
        }
    }

    /// The code, 0 when absent.
    pub fn code(&self) -> u16 {
        self.code.unwrap_or(0)
    }

    /// The reason, `""` when absent.
    pub fn reason(&self) -> &str {
        self.reason.as_deref().unwrap_or("")
    }

    /// The message, `""` when absent.
    pub fn message(&self) -> &str {
        self.message.as_deref().unwrap_or("")
    }

    /// 404 / `NotFound`.
    pub fn is_not_found(&self) -> bool {
        self.code() == 404 || self.reason() == "NotFound"
    }

    /// 409 / `Conflict` (a stale resourceVersion on update) or `AlreadyExists`.
    ///
    /// Use [`Status::is_already_exists`] to tell a create of an existing name
    /// apart from an optimistic-concurrency conflict.
    pub fn is_conflict(&self) -> bool {
        self.code() == 409 || self.reason() == "Conflict"
    }

    /// 409 with reason `AlreadyExists`: a create of a name that exists.
    pub fn is_already_exists(&self) -> bool {
        self.reason() == "AlreadyExists"
    }

    /// 410 / `Gone`: HTTP 410 or reason `Gone` (client-go `IsGone`).
    pub fn is_gone(&self) -> bool {
        self.code() == 410 || self.reason() == "Gone"
    }

    /// Whether the resourceVersion or continue token the request carried is
    /// no longer served, so the caller must relist: 410, reason `Gone` or
    /// `Expired`, or the message forms `too old resource version` and
    /// `... continue ... expired`. This is what a reflector checks, for list
    /// errors and for a watch `ERROR` event alike.
    pub fn is_expired(&self) -> bool {
        if self.is_gone() || self.reason() == "Expired" {
            return true;
        }
        let message = self.message();
        message.contains(TOO_OLD_RESOURCE_VERSION)
            || (message.contains("continue") && message.contains("expired"))
    }

    /// 504 with cause `ResourceVersionTooLarge` (or the message "Too large
    /// resource version"): the server has not caught up with the requested
    /// version yet; a reflector falls back to a consistent read.
    pub fn is_too_large_resource_version(&self) -> bool {
        let by_cause = self.details.as_ref().is_some_and(|d| {
            d.causes
                .iter()
                .any(|c| c.reason.as_deref() == Some("ResourceVersionTooLarge"))
        });
        by_cause || self.message().contains("Too large resource version")
    }

    /// 429 / `TooManyRequests`.
    pub fn is_too_many_requests(&self) -> bool {
        self.code() == 429 || self.reason() == "TooManyRequests"
    }

    /// 5xx, or a server-side reason (`InternalError`, `ServerTimeout`,
    /// `ServiceUnavailable`, `Timeout`).
    pub fn is_server_error(&self) -> bool {
        (500..600).contains(&self.code())
            || matches!(
                self.reason(),
                "InternalError" | "ServerTimeout" | "ServiceUnavailable" | "Timeout"
            )
    }

    /// 401 / `Unauthorized`.
    pub fn is_unauthorized(&self) -> bool {
        self.code() == 401 || self.reason() == "Unauthorized"
    }

    /// 403 / `Forbidden`.
    pub fn is_forbidden(&self) -> bool {
        self.code() == 403 || self.reason() == "Forbidden"
    }

    /// `details.retryAfterSeconds`, as a duration.
    pub fn retry_after(&self) -> Option<Duration> {
        let secs = self.details.as_ref()?.retry_after_seconds?;
        Some(Duration::from_secs(u64::from(secs)))
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let reason = if self.reason().is_empty() {
            "Unknown"
        } else {
            self.reason()
        };
        write!(f, "{reason} ({}): {}", self.code(), self.message())
    }
}

/// The reason kube-apiserver gives for an HTTP code, used when an error body
/// is not a `Status`.
pub(crate) fn reason_for_code(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Gone",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(json: &str) -> Status {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn decodes_a_server_status() {
        let s = status(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
            "message":"configmaps \"x\" not found","reason":"NotFound",
            "details":{"name":"x","kind":"configmaps"},"code":404}"#,
        );
        assert!(s.is_not_found());
        assert!(!s.is_conflict());
        assert_eq!(s.details.unwrap().name.as_deref(), Some("x"));
    }

    #[test]
    fn expired_forms() {
        assert!(status(r#"{"code":410,"reason":"Gone"}"#).is_expired());
        assert!(status(r#"{"reason":"Expired"}"#).is_expired());
        assert!(status(r#"{"code":500,"message":"too old resource version: 1 (5)"}"#).is_expired());
        assert!(status(
            r#"{"message":"The provided continue parameter is too old to display a consistent list result. The continue token has expired"}"#
        )
        .is_expired());
        assert!(!status(r#"{"code":404,"reason":"NotFound"}"#).is_expired());
        assert!(status(r#"{"code":410}"#).is_gone());
        assert!(!status(r#"{"reason":"Expired"}"#).is_gone());
    }

    #[test]
    fn retry_after_and_server_errors() {
        let s =
            status(r#"{"code":429,"reason":"TooManyRequests","details":{"retryAfterSeconds":3}}"#);
        assert!(s.is_too_many_requests());
        assert_eq!(s.retry_after(), Some(Duration::from_secs(3)));
        assert!(status(r#"{"code":503}"#).is_server_error());
        assert!(!status(r#"{"code":409}"#).is_server_error());
        let large = status(
            r#"{"code":504,"details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}]}}"#,
        );
        assert!(large.is_too_large_resource_version());
    }

    #[test]
    fn display_is_short() {
        let s = Status::failure(409, "Conflict", "stale");
        assert_eq!(s.to_string(), "Conflict (409): stale");
    }
}
