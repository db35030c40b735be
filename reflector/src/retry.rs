//! Request-level retries, as client-go's REST client makes them beneath
//! its reflector (`rest/request.go` `request` and `Watch`, with
//! `rest/with_retry.go`): an answer that asks for a wait — 429 or 5xx with
//! `Retry-After` — is sent again after exactly that wait, at most
//! [`SERVER_ASKED_IN_A_ROW`] times; the failure reaches the reflector's
//! own rules (RF4, RF5) only after that.
//!
//! kcontrol also reads the wait from `details.retryAfterSeconds` of the
//! answer's `Status` (client-go reads the header only). The client-go
//! preset also retries, after 1 s, a list whose connection broke before
//! its answer and a watch start that hit an EOF or a timeout, as client-go
//! does (`IsConnectionReset`/`IsProbableEOF` for GETs, `IsProbableEOF`/
//! `IsTimeout` for watches); a refused connection is never retried there.

use std::future::Future;
use std::time::Duration;

use kcontrol_client::Error as ClientError;
use kcontrol_indexer::KubeObject;
use serde::de::DeserializeOwned;

use crate::backoff::{PacingPreset, SERVER_ASKED_IN_A_ROW};
use crate::reflector::Reflector;

/// What kind of request is retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// A list page (a GET).
    List,
    /// A watch or WatchList request.
    Watch,
}

/// The wait before sending a request again after `error`, when `preset`'s
/// REST client would; `None` when the error goes to the reflector.
pub(crate) fn retry_wait(
    preset: PacingPreset,
    request: Request,
    error: &ClientError,
) -> Option<Duration> {
    if let Some(api) = error.api_error() {
        let code = api.http_code;
        // an ERROR event's Status (no HTTP answer) is not a request's
        if code != 429 && code < 500 {
            return None;
        }
        return match preset {
            PacingPreset::Kcontrol => api.retry_after(),
            // checkWait: the Retry-After header, whole seconds
            PacingPreset::ClientGo => api.retry_after_header,
        };
    }
    match (preset, request, error) {
        // retryAfterResponse(): an artificial "Retry-After: 1"
        (PacingPreset::ClientGo, Request::List, ClientError::Transport(_))
        | (
            PacingPreset::ClientGo,
            Request::Watch,
            ClientError::Transport(_) | ClientError::Timeout(_),
        ) => Some(Duration::from_secs(1)),
        _ => None,
    }
}

impl<K> Reflector<K>
where
    K: KubeObject + DeserializeOwned,
{
    /// Sends a request with `send`, sending it again after the wait an
    /// answer asks for, at most [`SERVER_ASKED_IN_A_ROW`] times (see the
    /// module doc).
    pub(crate) async fn send_retrying<T, F, Fut>(
        &self,
        request: Request,
        mut send: F,
    ) -> Result<T, ClientError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ClientError>>,
    {
        let mut retries = 0;
        loop {
            let error = match send().await {
                Ok(answer) => return Ok(answer),
                Err(e) => e,
            };
            let preset = self.pacing.lock().preset();
            let wait = match retry_wait(preset, request, &error) {
                Some(wait) if retries < SERVER_ASKED_IN_A_ROW => wait,
                _ => return Err(error),
            };
            retries += 1;
            if error.api_error().is_some() {
                self.pacing.lock().server_asked();
            }
            self.metrics.failure();
            self.metrics.backoff(wait);
            tracing::debug!(reflector = %self.config.name, %error, ?wait, retries, "sending the request again");
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcontrol_client::{ApiError, Status};

    fn api(code: u16, header: Option<u64>, body_secs: Option<u32>) -> ClientError {
        let body = match body_secs {
            Some(s) => format!(
                r#"{{"kind":"Status","code":{code},"reason":"TooManyRequests","details":{{"retryAfterSeconds":{s}}}}}"#
            ),
            None => format!(r#"{{"kind":"Status","code":{code},"reason":"x"}}"#),
        };
        ApiError::from_response(code, header.map(Duration::from_secs), body.as_bytes()).into()
    }

    const BOTH: [PacingPreset; 2] = [PacingPreset::Kcontrol, PacingPreset::ClientGo];

    #[test]
    fn a_429_or_5xx_with_retry_after_is_sent_again_after_it() {
        // client-go checkWait: 429 or >= 500, with a Retry-After header
        for preset in BOTH {
            for request in [Request::List, Request::Watch] {
                for code in [429, 500, 503, 504] {
                    assert_eq!(
                        retry_wait(preset, request, &api(code, Some(3), None)),
                        Some(Duration::from_secs(3)),
                        "{preset:?} {request:?} {code}"
                    );
                }
                for code in [400, 403, 404, 409, 410, 422] {
                    assert_eq!(
                        retry_wait(preset, request, &api(code, Some(3), None)),
                        None,
                        "{code}"
                    );
                }
                assert_eq!(retry_wait(preset, request, &api(503, None, None)), None);
            }
        }
    }

    #[test]
    fn only_kcontrol_reads_the_wait_from_the_status_body() {
        let e = api(429, None, Some(4));
        assert_eq!(
            retry_wait(PacingPreset::Kcontrol, Request::Watch, &e),
            Some(Duration::from_secs(4))
        );
        assert_eq!(retry_wait(PacingPreset::ClientGo, Request::Watch, &e), None);
        // nor does a watch ERROR event's Status (no HTTP answer) count here
        let event: ClientError = Status::failure(429, "TooManyRequests", "x").into();
        assert_eq!(
            retry_wait(PacingPreset::Kcontrol, Request::Watch, &event),
            None
        );
    }

    #[test]
    fn client_go_retries_broken_connections_after_a_second_never_refused_ones() {
        let reset = ClientError::Transport("connection reset by peer".into());
        let refused = ClientError::Connect {
            server: "127.0.0.1:1".into(),
            source: "connection refused".into(),
        };
        let timeout = ClientError::Timeout(Duration::from_secs(20));
        let one = Some(Duration::from_secs(1));
        assert_eq!(
            retry_wait(PacingPreset::ClientGo, Request::List, &reset),
            one
        );
        assert_eq!(
            retry_wait(PacingPreset::ClientGo, Request::Watch, &reset),
            one
        );
        assert_eq!(
            retry_wait(PacingPreset::ClientGo, Request::Watch, &timeout),
            one
        );
        assert_eq!(
            retry_wait(PacingPreset::ClientGo, Request::List, &timeout),
            None
        );
        for request in [Request::List, Request::Watch] {
            assert_eq!(retry_wait(PacingPreset::ClientGo, request, &refused), None);
            // kcontrol leaves those to the reflector's backoff (RF4)
            assert_eq!(retry_wait(PacingPreset::Kcontrol, request, &reset), None);
            assert_eq!(retry_wait(PacingPreset::Kcontrol, request, &refused), None);
        }
    }
}
