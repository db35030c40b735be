//! The crate's one [`Error`] type, the [`ApiError`] an HTTP error answer
//! becomes, and the predicates that classify both.

use std::time::Duration;

use crate::auth::AuthError;
use crate::config::ConfigError;
use crate::status::{reason_for_code, Status};
use crate::tls::TlsError;

/// How many bytes of a non-`Status` error body an [`ApiError`] keeps.
pub(crate) const BODY_SNIPPET_LIMIT: usize = 512;

/// A boxed error from the transport layers (hyper, io).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server answered with an HTTP error (a `Status`, or a body that is
    /// not one), or sent a watch `ERROR` event that was turned into an error.
    #[error("API error: {0}")]
    Api(Box<ApiError>),
    /// The configuration could not be loaded (kubeconfig, in-cluster, infer).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The TLS handshake failed; the message says whether the CA, the
    /// hostname or the client certificate was wrong.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// Credentials could not be obtained (token file, exec plugin).
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The TCP connection could not be made.
    #[error("cannot connect to {server}: {source}")]
    Connect {
        /// The server address.
        server: String,
        /// What failed.
        #[source]
        source: BoxError,
    },
    /// The HTTP exchange failed after connecting (reset, protocol error...).
    #[error("HTTP transport error: {0}")]
    Transport(#[source] BoxError),
    /// A non-watch request did not finish within the request timeout.
    #[error("request timed out after {0:?}")]
    Timeout(Duration),
    /// A body could not be decoded into the expected type.
    #[error("cannot decode {what}: {source}")]
    Decode {
        /// What was being decoded (`"list of configmaps"`, `"watch event"`...).
        what: String,
        /// The JSON error, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// A protobuf body could not be decoded into the expected type.
    #[error("cannot decode {what}: {source}")]
    DecodeProtobuf {
        /// What was being decoded (`"list of configmaps"`, `"watch event"`...).
        what: String,
        /// The protobuf error, with the field's JSON path.
        #[source]
        source: kcontrol_proto::Error,
    },
    /// A watch frame was larger than the configured maximum.
    #[error("watch frame exceeds the maximum frame size of {limit} bytes")]
    FrameTooLarge {
        /// The configured maximum.
        limit: usize,
    },
    /// A response body (a whole list, a single object) was larger than the
    /// configured maximum ([`Config::max_response_size`](crate::Config::max_response_size));
    /// reading stopped there.
    #[error("response body exceeds the maximum response size of {limit} bytes (Config::max_response_size; use list_stream or paging for large lists)")]
    ResponseTooLarge {
        /// The configured maximum.
        limit: usize,
    },
    /// The request could not be built (bad name, bad parameter combination).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// Discovery did not find what was asked for.
    #[error("discovery: {0}")]
    Discovery(String),
}

/// An HTTP error answer from the API server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// The server's `Status`, or one made from the HTTP code when the body
    /// was not a `Status` (its message then holds the first bytes of the body).
    pub status: Status,
    /// The HTTP status code of the response (0 for a watch `ERROR` event).
    pub http_code: u16,
    /// The `Retry-After` header, when the server sent one.
    pub retry_after_header: Option<Duration>,
    /// The first bytes of the body when it was not a `Status`.
    pub body_snippet: Option<String>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.status)?;
        if self.http_code != 0 && self.status.code() != self.http_code {
            write!(f, " (HTTP {})", self.http_code)?;
        }
        Ok(())
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    /// Builds the error for an HTTP error response from its code, its
    /// `Retry-After` header and its body.
    pub fn from_response(
        http_code: u16,
        retry_after_header: Option<Duration>,
        body: &[u8],
    ) -> Self {
        let decoded = if body.starts_with(kcontrol_proto::MAGIC) {
            // a Status answered in protobuf (the request asked for it)
            kcontrol_proto::from_object::<Status>(body).map_err(|e| e.to_string())
        } else {
            serde_json::from_slice::<Status>(body).map_err(|e| e.to_string())
        };
        match decoded {
            Ok(mut status)
                if status.reason.is_some() || status.message.is_some() || status.code.is_some() =>
            {
                if status.code.is_none() {
                    status.code = Some(http_code);
                }
                Self {
                    status,
                    http_code,
                    retry_after_header,
                    body_snippet: None,
                }
            }
            _ => {
                let snippet = body_snippet(body);
                let message = if snippet.is_empty() {
                    format!("the server responded with HTTP {http_code} and an empty body")
                } else {
                    format!("the server responded with HTTP {http_code}: {snippet}")
                };
                let status = Status::failure(http_code, reason_for_code(http_code), message);
                Self {
                    status,
                    http_code,
                    retry_after_header,
                    body_snippet: Some(snippet),
                }
            }
        }
    }

    /// The server-suggested delay before a retry: the `Retry-After` header,
    /// else `details.retryAfterSeconds`.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after_header
            .or_else(|| self.status.retry_after())
    }

    /// The HTTP code, or the `Status` code when there was no HTTP code.
    pub fn code(&self) -> u16 {
        if self.http_code != 0 {
            self.http_code
        } else {
            self.status.code()
        }
    }
}

/// The first [`BODY_SNIPPET_LIMIT`] bytes of a body, as lossy UTF-8.
fn body_snippet(body: &[u8]) -> String {
    let end = body.len().min(BODY_SNIPPET_LIMIT);
    let mut text = String::from_utf8_lossy(body.get(..end).unwrap_or(body)).into_owned();
    if body.len() > BODY_SNIPPET_LIMIT {
        text.push_str("...");
    }
    text.trim().to_owned()
}

impl From<ApiError> for Error {
    fn from(e: ApiError) -> Self {
        Error::Api(Box::new(e))
    }
}

impl From<Status> for Error {
    /// A watch `ERROR` event's `Status` as an error (no HTTP code).
    fn from(status: Status) -> Self {
        ApiError {
            status,
            http_code: 0,
            retry_after_header: None,
            body_snippet: None,
        }
        .into()
    }
}

impl Error {
    /// The API error, when the server answered with one.
    pub fn api_error(&self) -> Option<&ApiError> {
        match self {
            Error::Api(e) => Some(e),
            _ => None,
        }
    }

    /// The server's `Status`, when the server answered with an error.
    pub fn status(&self) -> Option<&Status> {
        self.api_error().map(|e| &e.status)
    }

    fn api_is(&self, f: impl Fn(&ApiError) -> bool) -> bool {
        self.api_error().is_some_and(f)
    }

    /// 404 / `NotFound`.
    pub fn is_not_found(&self) -> bool {
        self.api_is(|e| e.code() == 404 || e.status.is_not_found())
    }

    /// 409 / `Conflict` or `AlreadyExists`.
    pub fn is_conflict(&self) -> bool {
        self.api_is(|e| e.code() == 409 || e.status.is_conflict())
    }

    /// 409 with reason `AlreadyExists`.
    pub fn is_already_exists(&self) -> bool {
        self.api_is(|e| e.status.is_already_exists())
    }

    /// 410 / `Gone` (see [`Status::is_gone`]).
    pub fn is_gone(&self) -> bool {
        self.api_is(|e| e.code() == 410 || e.status.is_gone())
    }

    /// The resourceVersion or continue token is no longer served: relist
    /// (see [`Status::is_expired`]).
    pub fn is_expired(&self) -> bool {
        self.api_is(|e| e.code() == 410 || e.status.is_expired())
    }

    /// See [`Status::is_too_large_resource_version`].
    pub fn is_too_large_resource_version(&self) -> bool {
        self.api_is(|e| e.status.is_too_large_resource_version())
    }

    /// 429 / `TooManyRequests`; see [`Error::retry_after`] for the delay.
    pub fn is_too_many_requests(&self) -> bool {
        self.api_is(|e| e.code() == 429 || e.status.is_too_many_requests())
    }

    /// A 5xx answer.
    pub fn is_server_error(&self) -> bool {
        self.api_is(|e| (500..600).contains(&e.code()) || e.status.is_server_error())
    }

    /// 401 / `Unauthorized`.
    pub fn is_unauthorized(&self) -> bool {
        self.api_is(|e| e.code() == 401 || e.status.is_unauthorized())
    }

    /// 403 / `Forbidden`.
    pub fn is_forbidden(&self) -> bool {
        self.api_is(|e| e.code() == 403 || e.status.is_forbidden())
    }

    /// The delay the server asked for (`Retry-After` header or
    /// `details.retryAfterSeconds`).
    pub fn retry_after(&self) -> Option<Duration> {
        self.api_error().and_then(ApiError::retry_after)
    }

    /// Whether the error came from the network rather than from the server's
    /// answer: a failed connection, a reset, or a timeout. Such errors are
    /// worth retrying with backoff.
    pub fn is_transport(&self) -> bool {
        matches!(
            self,
            Error::Connect { .. } | Error::Transport(_) | Error::Timeout(_)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_body_is_kept() {
        let body = br#"{"kind":"Status","code":409,"reason":"Conflict","message":"stale"}"#;
        let e: Error = ApiError::from_response(409, None, body).into();
        assert!(e.is_conflict());
        assert_eq!(e.status().unwrap().message(), "stale");
        assert!(e.to_string().contains("Conflict (409): stale"), "{e}");
    }

    #[test]
    fn non_status_body_keeps_code_and_first_bytes() {
        let body = vec![b'x'; 10_000];
        let e = ApiError::from_response(502, None, &body);
        assert_eq!(e.status.code(), 502);
        let snippet = e.body_snippet.clone().unwrap();
        assert!(snippet.len() <= BODY_SNIPPET_LIMIT + 3);
        assert!(e.status.message().contains("HTTP 502"));
        let e: Error = e.into();
        assert!(e.is_server_error());
    }

    #[test]
    fn html_404_is_not_found() {
        let e: Error = ApiError::from_response(404, None, b"<html>nope</html>").into();
        assert!(e.is_not_found());
        assert!(e.to_string().contains("<html>nope</html>"), "{e}");
    }

    #[test]
    fn retry_after_header_wins() {
        let body = br#"{"code":429,"reason":"TooManyRequests","details":{"retryAfterSeconds":7}}"#;
        let e: Error = ApiError::from_response(429, Some(Duration::from_secs(2)), body).into();
        assert!(e.is_too_many_requests());
        assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
        let e: Error = ApiError::from_response(429, None, body).into();
        assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
    }

    #[test]
    fn watch_error_status_is_expired() {
        let e: Error = Status::failure(410, "Expired", "too old resource version: 5 (10)").into();
        assert!(e.is_expired());
        assert!(e.is_gone());
    }
}
