//! A standby's watch of the Lease it competes for
//! ([`LeaderElectionConfig::watch`](super::LeaderElectionConfig::watch)).
//!
//! A standby that only polls sees a renewal at its next poll, up to 2.2
//! retry periods after it happened, and counts the lease duration from
//! there (LE2); after the leader dies it takes over that much later. A
//! watch shows each renewal as it is written, so the lease duration counts
//! from the renewal itself (still from the moment this process saw it: a
//! watch event arrives after the write, never before). The polls go on as
//! before; the watch only adds observations, and a watch that cannot open
//! or ends is opened again at most once a lease duration.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kcontrol_client::{Api, WatchEvent, WatchParams, WatchStream};
use tokio::time::Instant;

/// The open watch of one Lease, if any.
pub(super) struct Follow {
    stream: Option<WatchStream<Lease>>,
    /// When the last watch was opened (or failed to open).
    opened: Option<Instant>,
    /// Between two openings.
    every: Duration,
    /// How long an opening may take.
    timeout: Duration,
}

impl Follow {
    /// No watch yet; one opens at most every `every`, within `timeout`
    /// (a server that does not answer delays no try longer than that).
    pub(super) fn new(every: Duration, timeout: Duration) -> Self {
        Self {
            stream: None,
            opened: None,
            every,
            timeout,
        }
    }

    /// Opens a watch of the Lease `name` unless one is open or the last
    /// opening was less than `every` ago.
    pub(super) async fn open(&mut self, api: &Api<Lease>, name: &str) {
        if self.stream.is_some() || self.opened.is_some_and(|at| at.elapsed() < self.every) {
            return;
        }
        self.opened = Some(Instant::now());
        let params = WatchParams::default().fields(&format!("metadata.name={name}"));
        match tokio::time::timeout(self.timeout, api.watch(&params, "")).await {
            Ok(Ok(stream)) => self.stream = Some(stream),
            Ok(Err(e)) => {
                tracing::debug!(lease = %name, error = %e, "could not watch the lease: polling alone");
            }
            Err(_) => {
                tracing::debug!(lease = %name, "the lease watch did not open in time: polling alone");
            }
        }
    }

    /// The next state of the Lease the watch shows. Never resolves while
    /// no watch is open; `None` when the watch ended (it is then closed).
    pub(super) async fn next(&mut self) -> Option<Lease> {
        let Some(stream) = self.stream.as_mut() else {
            return std::future::pending().await;
        };
        loop {
            match stream.next().await {
                Some(Ok(WatchEvent::Added(lease) | WatchEvent::Modified(lease))) => {
                    return Some(lease)
                }
                Some(Ok(WatchEvent::Bookmark(_))) => {}
                Some(Ok(other)) => {
                    tracing::debug!(event = other.type_name(), "the lease watch ended");
                    break;
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "the lease watch failed");
                    break;
                }
                None => break,
            }
        }
        self.stream = None;
        None
    }
}
