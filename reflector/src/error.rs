//! [`ReflectorError`]: every way a list or a watch can fail, and how the
//! reflector recovers from each (re-watch after a backoff, or relist).

use std::time::Duration;

use kcontrol_client::{Error as ClientError, Status};
use kcontrol_deltafifo::FifoError;

use crate::backoff::{Failure, PacingPreset};
use crate::metrics::RestartCause;

/// A list or watch failure, as the error handler receives it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReflectorError {
    /// A list request, or reading its answer, failed.
    #[error("list failed: {0}")]
    List(#[source] ClientError),
    /// A watch request failed before streaming (HTTP error, connection).
    #[error("watch failed to start: {0}")]
    WatchStart(#[source] ClientError),
    /// A watch stream broke: transport error, or an event that does not
    /// decode (RF7).
    #[error("watch stream failed: {0}")]
    Watch(#[source] ClientError),
    /// The server ended a watch with an `ERROR` event.
    #[error("watch ended with an ERROR event: {0}")]
    WatchEvent(Box<Status>),
    /// A watch or list delivered an object of another kind than the one
    /// listed and watched (RF7).
    #[error("unexpected object: expected {expected}, got {got}")]
    UnexpectedObject {
        /// `apiVersion/kind` expected.
        expected: String,
        /// `apiVersion/kind` received.
        got: String,
    },
    /// An initial-events bookmark carried no resourceVersion to watch from
    /// (a list answer without one is accepted: the watch starts from `""`).
    #[error("the {0} carried no resourceVersion")]
    MissingResourceVersion(&'static str),
    /// A watch event of a type the client does not know (a newer server's,
    /// or a broken one): its change cannot be applied, so the reflector
    /// relists, as client-go's watch decoder rejects it.
    #[error("watch event of unknown type {0:?}")]
    UnknownEventType(String),
    /// A watch ended without any event less than a second after it started
    /// (the server is likely closing watches at once).
    #[error("very short watch: it ended after {0:?} without any event")]
    ShortWatch(Duration),
    /// The server refused WatchList (`sendInitialEvents`); the reflector
    /// lists instead for this attempt.
    #[error("WatchList is not supported by the server ({reason}); falling back to list and watch")]
    WatchListUnsupported {
        /// How that showed.
        reason: String,
    },
    /// A WatchList stream ended before its `k8s.io/initial-events-end`
    /// bookmark; nothing was deleted, and the reflector lists instead for
    /// this attempt.
    #[error("the WatchList stream ended before its initial events were complete")]
    WatchListIncomplete,
    /// The DeltaFIFO refused a change (it was closed, or an object had no key).
    #[error(transparent)]
    Fifo(#[from] FifoError),
}

/// What the reflector does after a watch failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recovery {
    /// Back off and watch again from the last version.
    Rewatch,
    /// Back off and watch again, unless such failures keep coming without
    /// progress: then relist (a bad event or object, RF7).
    RewatchUnlessRepeated,
    /// Relist.
    Relist,
}

impl ReflectorError {
    /// The client error behind this failure, if any.
    pub fn client_error(&self) -> Option<&ClientError> {
        match self {
            Self::List(e) | Self::WatchStart(e) | Self::Watch(e) => Some(e),
            _ => None,
        }
    }

    /// Whether the resourceVersion (or continue token) used is no longer
    /// served: HTTP 410, or an `ERROR` event saying so.
    pub fn is_expired(&self) -> bool {
        match self {
            Self::WatchEvent(status) => status.is_expired(),
            _ => self.client_error().is_some_and(ClientError::is_expired),
        }
    }

    /// Whether the server has not caught up with the resourceVersion asked
    /// for (504 "Too large resource version").
    pub fn is_too_large_resource_version(&self) -> bool {
        match self {
            Self::WatchEvent(status) => status.is_too_large_resource_version(),
            _ => self
                .client_error()
                .is_some_and(ClientError::is_too_large_resource_version),
        }
    }

    /// The delay the server asked for (429 `Retry-After`).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::WatchEvent(status) => status.retry_after(),
            _ => self.client_error().and_then(ClientError::retry_after),
        }
    }

    /// The failure for a person: its message, and for a 404 on a list or
    /// watch that the API server does not serve the resource (a CRD not
    /// installed, a kind the server does not have).
    pub fn describe(&self) -> String {
        let not_served = match self {
            Self::List(e) | Self::WatchStart(e) => e.is_not_found(),
            _ => false,
        };
        if not_served {
            format!("{self} (404: the API server does not serve this resource; is it installed?)")
        } else {
            self.to_string()
        }
    }

    /// Whether the FIFO was closed (the reflector stops).
    pub fn is_fifo_closed(&self) -> bool {
        matches!(self, Self::Fifo(FifoError::Closed))
    }

    /// What this failure says about the wait before the next attempt
    /// (RF5): the server unreachable, a wait it asked for, a watch's
    /// version gone, or none of those.
    pub(crate) fn pacing(&self) -> Failure {
        if self.client_error().is_some_and(is_unreachable) {
            return Failure::Unreachable;
        }
        if let Some(asked) = self.retry_after() {
            return Failure::ServerAsked(asked);
        }
        let watch = matches!(
            self,
            Self::WatchStart(_) | Self::Watch(_) | Self::WatchEvent(_)
        );
        if watch && self.is_expired() {
            Failure::Expired
        } else {
            Failure::Other
        }
    }

    /// Whether a WatchList that failed this way is tried again after a
    /// backoff rather than replaced by a list (client-go's watchList:
    /// `isWatchErrorRetriable`, a refused connection or a 429; kcontrol
    /// also when the connection broke before any answer or the server
    /// asked for a wait: it is struggling, a list would cost it more).
    pub(crate) fn retries_watch_list(&self, preset: PacingPreset) -> bool {
        let Self::WatchStart(e) = self else {
            return false;
        };
        match preset {
            PacingPreset::ClientGo => {
                matches!(e, ClientError::Connect { .. }) || e.is_too_many_requests()
            }
            PacingPreset::Kcontrol => {
                is_unreachable(e) || e.is_too_many_requests() || self.retry_after().is_some()
            }
        }
    }

    /// What this failure is, as the relist and watch-restart metrics count
    /// it.
    pub fn restart_cause(&self) -> RestartCause {
        if self.is_expired() {
            return RestartCause::Expired;
        }
        match self {
            Self::ShortWatch(_) => return RestartCause::ShortWatch,
            Self::UnexpectedObject { .. }
            | Self::MissingResourceVersion(_)
            | Self::UnknownEventType(_) => return RestartCause::BadData,
            Self::WatchEvent(status) => {
                return if status.is_too_many_requests() {
                    RestartCause::TooManyRequests
                } else if status.code() >= 500 {
                    RestartCause::ServerError
                } else {
                    RestartCause::Other
                };
            }
            _ => {}
        }
        match self.client_error() {
            Some(e) if is_unreachable(e) => RestartCause::Unreachable,
            Some(e) if e.is_too_many_requests() => RestartCause::TooManyRequests,
            Some(e) if e.api_error().is_some_and(|a| a.code() >= 500) => RestartCause::ServerError,
            Some(e) if is_bad_data(e) => RestartCause::BadData,
            _ => RestartCause::Other,
        }
    }

    /// How to recover from this failure of a watch (RF4, RF7) under
    /// `preset`'s rules.
    pub(crate) fn watch_recovery(&self, preset: PacingPreset) -> Recovery {
        match self {
            Self::WatchStart(e) => start_recovery(e, preset),
            Self::Watch(e) => client_recovery(e),
            // client-go: only 429 is worth the same watch again; an
            // InternalError, a timeout, a failing conversion webhook... end
            // the iteration and relist
            Self::WatchEvent(status) if status.is_too_many_requests() && !status.is_expired() => {
                Recovery::Rewatch
            }
            Self::UnexpectedObject { .. }
            | Self::Fifo(FifoError::Key(_))
            | Self::MissingResourceVersion(_) => Recovery::RewatchUnlessRepeated,
            _ => Recovery::Relist,
        }
    }
}

/// Whether the server was not reached: refused, or the connection broke
/// before any answer.
fn is_unreachable(e: &ClientError) -> bool {
    matches!(e, ClientError::Connect { .. } | ClientError::Transport(_))
}

/// Whether the answer arrived but could not be decoded, in either
/// encoding (RF7: watch again unless it keeps happening).
fn is_bad_data(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Decode { .. }
            | ClientError::DecodeProtobuf { .. }
            | ClientError::FrameTooLarge { .. }
    )
}

/// How to recover from a watch request that failed before streaming.
fn start_recovery(e: &ClientError, preset: PacingPreset) -> Recovery {
    match preset {
        // a 5xx that asks for a wait says nothing about the watch cache:
        // watch again once it is over (client-go's REST client did so ten
        // times before this; a version gone is answered 410)
        PacingPreset::Kcontrol if e.is_server_error() && e.retry_after().is_some() => {
            Recovery::Rewatch
        }
        // isWatchErrorRetriable: only a refused connection or a 429; the
        // REST client turns a broken connection into an empty watch, which
        // ends at once: a very short watch, which relists
        PacingPreset::ClientGo if matches!(e, ClientError::Transport(_)) => Recovery::Relist,
        _ => client_recovery(e),
    }
}

fn client_recovery(e: &ClientError) -> Recovery {
    if e.is_expired() {
        Recovery::Relist
    } else if e.is_too_many_requests() || is_unreachable(e) {
        // client-go re-watches on 429 and on a refused connection (the
        // server is likely restarting: the watch can resume where it was);
        // kcontrol also when the connection broke before any answer (a
        // pooled connection the restarted server had closed: Go's HTTP
        // client retries those itself); 5xx (504 "too large
        // resourceVersion" too) and the rest relist
        Recovery::Rewatch
    } else if is_bad_data(e) {
        Recovery::RewatchUnlessRepeated
    } else {
        Recovery::Relist
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcontrol_client::ApiError;

    fn api(code: u16, retry: Option<u64>) -> ClientError {
        ApiError::from_response(code, retry.map(Duration::from_secs), b"").into()
    }

    #[test]
    fn rf4_watch_failures_map_to_their_recovery() {
        let cases = [
            (ReflectorError::WatchStart(api(410, None)), Recovery::Relist),
            (
                ReflectorError::WatchStart(api(429, Some(3))),
                Recovery::Rewatch,
            ),
            (ReflectorError::WatchStart(api(503, None)), Recovery::Relist),
            (
                ReflectorError::WatchStart(api(503, Some(1))),
                Recovery::Rewatch,
            ),
            (
                ReflectorError::WatchEvent(Box::new(Status::failure(
                    503,
                    "ServiceUnavailable",
                    "x",
                ))),
                Recovery::Relist,
            ),
            (
                ReflectorError::UnknownEventType("RESYNCED".into()),
                Recovery::Relist,
            ),
            (ReflectorError::WatchStart(api(504, None)), Recovery::Relist),
            (
                ReflectorError::WatchStart(ClientError::Transport("reset".into())),
                Recovery::Rewatch,
            ),
            (
                ReflectorError::WatchStart(ClientError::Connect {
                    server: "127.0.0.1:1".into(),
                    source: "connection refused".into(),
                }),
                Recovery::Rewatch,
            ),
            (
                ReflectorError::ShortWatch(Duration::from_millis(5)),
                Recovery::Relist,
            ),
            (
                ReflectorError::WatchEvent(Box::new(Status::failure(
                    429,
                    "TooManyRequests",
                    "storage is (re)initializing",
                ))),
                Recovery::Rewatch,
            ),
            (ReflectorError::WatchStart(api(403, None)), Recovery::Relist),
            (
                ReflectorError::WatchEvent(Box::new(Status::failure(410, "Expired", "too old"))),
                Recovery::Relist,
            ),
            (
                ReflectorError::WatchEvent(Box::new(Status::failure(500, "InternalError", "x"))),
                Recovery::Relist,
            ),
            (
                ReflectorError::Watch(ClientError::FrameTooLarge { limit: 1 }),
                Recovery::RewatchUnlessRepeated,
            ),
            (
                ReflectorError::UnexpectedObject {
                    expected: "v1/ConfigMap".into(),
                    got: "v1/Status".into(),
                },
                Recovery::RewatchUnlessRepeated,
            ),
            (ReflectorError::Fifo(FifoError::Closed), Recovery::Relist),
        ];
        for (err, want) in cases {
            assert_eq!(err.watch_recovery(PacingPreset::Kcontrol), want, "{err}");
        }
        assert_eq!(
            ReflectorError::WatchStart(api(429, Some(3))).pacing(),
            Failure::ServerAsked(Duration::from_secs(3))
        );
        assert_eq!(
            ReflectorError::List(ClientError::Transport("reset".into())).pacing(),
            Failure::Unreachable
        );
        assert_eq!(
            ReflectorError::List(api(500, None)).pacing(),
            Failure::Other
        );
        let decode = serde_json_error();
        assert_eq!(
            ReflectorError::Watch(decode).watch_recovery(PacingPreset::Kcontrol),
            Recovery::RewatchUnlessRepeated
        );
        // the same for a frame that does not decode in protobuf (it
        // relisted at once while only the JSON error was recognised)
        let decode = protobuf_error();
        assert!(
            matches!(decode, ClientError::DecodeProtobuf { .. }),
            "{decode}"
        );
        let err = ReflectorError::Watch(decode);
        assert_eq!(
            err.watch_recovery(PacingPreset::Kcontrol),
            Recovery::RewatchUnlessRepeated
        );
        assert_eq!(err.restart_cause(), RestartCause::BadData);
    }

    fn protobuf_error() -> ClientError {
        kcontrol_client::watch::decode_protobuf_event::<Status>(b"\x0a\xff").unwrap_err()
    }

    #[test]
    fn rf4_the_client_go_preset_recovers_as_client_go() {
        let go = PacingPreset::ClientGo;
        // a 5xx ends the iteration even when it asked for a wait (after
        // the REST client's own retries)
        assert_eq!(
            ReflectorError::WatchStart(api(503, Some(1))).watch_recovery(go),
            Recovery::Relist
        );
        assert_eq!(
            ReflectorError::WatchStart(ClientError::Transport("EOF".into())).watch_recovery(go),
            Recovery::Relist
        );
        assert_eq!(
            ReflectorError::WatchStart(api(429, Some(1))).watch_recovery(go),
            Recovery::Rewatch
        );
        let refused = ReflectorError::WatchStart(ClientError::Connect {
            server: "127.0.0.1:1".into(),
            source: "connection refused".into(),
        });
        assert_eq!(refused.watch_recovery(go), Recovery::Rewatch);
        // WatchList: refused or 429 are tried again; anything else lists
        assert!(refused.retries_watch_list(go));
        assert!(ReflectorError::WatchStart(api(429, Some(1))).retries_watch_list(go));
        assert!(!ReflectorError::WatchStart(api(503, Some(1))).retries_watch_list(go));
        assert!(ReflectorError::WatchStart(api(503, Some(1)))
            .retries_watch_list(PacingPreset::Kcontrol));
        assert!(
            !ReflectorError::WatchStart(api(403, None)).retries_watch_list(PacingPreset::Kcontrol)
        );
        assert!(!ReflectorError::WatchListIncomplete.retries_watch_list(PacingPreset::Kcontrol));
    }

    #[test]
    fn rf5_failures_map_to_their_pacing() {
        assert_eq!(
            ReflectorError::WatchEvent(Box::new(Status::failure(410, "Expired", "gone"))).pacing(),
            Failure::Expired
        );
        assert_eq!(
            ReflectorError::WatchStart(api(410, None)).pacing(),
            Failure::Expired
        );
        // a list's 410 was retried at "" already: a plain failure
        assert_eq!(
            ReflectorError::List(api(410, None)).pacing(),
            Failure::Other
        );
        let mut asking = Status::failure(500, "InternalError", "busy");
        asking.details = Some(kcontrol_client::StatusDetails {
            retry_after_seconds: Some(2),
            ..Default::default()
        });
        assert_eq!(
            ReflectorError::WatchEvent(Box::new(asking)).pacing(),
            Failure::ServerAsked(Duration::from_secs(2))
        );
        assert_eq!(
            ReflectorError::UnknownEventType("X".into()).pacing(),
            Failure::Other
        );
    }

    fn serde_json_error() -> ClientError {
        kcontrol_client::watch::decode_event::<Status>(b"{not json").unwrap_err()
    }

    #[test]
    fn predicates_see_through_to_the_client_error() {
        assert!(ReflectorError::List(api(410, None)).is_expired());
        assert!(
            ReflectorError::WatchEvent(Box::new(Status::failure(410, "Gone", ""))).is_expired()
        );
        assert_eq!(
            ReflectorError::List(api(429, Some(2))).retry_after(),
            Some(Duration::from_secs(2))
        );
        assert!(ReflectorError::Fifo(FifoError::Closed).is_fifo_closed());
        assert!(!ReflectorError::ShortWatch(Duration::ZERO).is_expired());
    }
}
