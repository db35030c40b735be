//! The background task that writes recorded events: it takes them from the
//! recorder's bounded buffer in order, correlates them, creates or patches
//! core/v1 Events, and retries failed writes later without holding up the
//! events behind them.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Event;
use tokio::sync::{mpsc, oneshot};

use super::correlator::{Correlated, Correlator};
use super::stats::Counters;
use super::PublishError;
use crate::{Api, Client, Error, Patch, PatchParams, PostParams};

/// Where the outcome of an awaited event goes ([`Recorder::publish`](super::Recorder::publish)).
pub(crate) type Reply = oneshot::Sender<Result<(), PublishError>>;

/// What the recorder sends to the writer.
#[derive(Debug)]
pub(crate) enum Message {
    /// An event, when it was recorded, and who waits for its outcome.
    Event(Box<Event>, Instant, Option<Reply>),
    /// Answer once everything sent before is written or given up.
    Flush(oneshot::Sender<()>),
}

/// How the writer retries.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RetryPolicy {
    /// Attempts per event, the first included.
    pub max_attempts: u32,
    /// Delay before the second attempt; doubled for each next one.
    pub backoff: Duration,
    /// The longest delay.
    pub max_backoff: Duration,
    /// Writes waiting for a retry at most; more are given up.
    pub max_pending: usize,
}

/// A write to try again later.
#[derive(Debug)]
struct Retry {
    due: tokio::time::Instant,
    attempt: u32,
    write: Correlated,
    reply: Option<Reply>,
}

/// How one write ended.
enum Outcome {
    Created(Event),
    Patched(Event),
}

pub(crate) struct Writer {
    client: Client,
    correlator: Correlator,
    counters: Arc<Counters>,
    retry: RetryPolicy,
    pending: Vec<Retry>,
    flush_waiters: Vec<oneshot::Sender<()>>,
}

/// Whether a failed write is worth another attempt: the network failed, or
/// the server was overloaded or broken for a moment.
fn retryable(error: &Error) -> bool {
    error.is_transport() || error.is_too_many_requests() || error.is_server_error()
}

impl Writer {
    pub(crate) fn new(
        client: Client,
        correlator: Correlator,
        counters: Arc<Counters>,
        retry: RetryPolicy,
    ) -> Self {
        Self {
            client,
            correlator,
            counters,
            retry,
            pending: Vec::new(),
            flush_waiters: Vec::new(),
        }
    }

    /// Runs until every recorder is dropped and the buffer is empty.
    /// Writes still waiting for a retry then are given up.
    pub(crate) async fn run(mut self, mut rx: mpsc::Receiver<Message>) {
        loop {
            let next_due = self.pending.iter().map(|r| r.due).min();
            let message = match next_due {
                Some(due) => tokio::select! {
                    m = rx.recv() => m,
                    () = tokio::time::sleep_until(due) => {
                        self.retry_due().await;
                        continue;
                    }
                },
                None => rx.recv().await,
            };
            match message {
                Some(Message::Event(event, at, reply)) => self.record(*event, at, reply).await,
                Some(Message::Flush(done)) => self.flush_waiters.push(done),
                None => break,
            }
            self.release_flushes();
        }
        let abandoned = self.pending.len() as u64;
        self.counters.failed.fetch_add(abandoned, Ordering::Relaxed);
        for retry in self.pending.drain(..) {
            answer(retry.reply, Err(PublishError::WriterStopped));
        }
        self.release_flushes();
    }

    /// Answers flushes once no write waits for a retry.
    fn release_flushes(&mut self) {
        if self.pending.is_empty() {
            for done in self.flush_waiters.drain(..) {
                let _ = done.send(());
            }
        }
    }

    async fn record(&mut self, event: Event, at: Instant, reply: Option<Reply>) {
        let correlated = self.correlator.correlate(event, at);
        if correlated.skip {
            self.counters.filtered.fetch_add(1, Ordering::Relaxed);
            answer(reply, Err(PublishError::Filtered));
            tracing::debug!(
                reason = correlated.event.reason.as_deref().unwrap_or(""),
                object = correlated
                    .event
                    .involved_object
                    .name
                    .as_deref()
                    .unwrap_or(""),
                "event dropped by the per-object spam filter"
            );
            return;
        }
        self.attempt(correlated, 1, reply).await;
    }

    async fn retry_due(&mut self) {
        let now = tokio::time::Instant::now();
        let (due, later): (Vec<Retry>, Vec<Retry>) =
            self.pending.drain(..).partition(|r| r.due <= now);
        self.pending = later;
        for r in due {
            self.counters.retried.fetch_add(1, Ordering::Relaxed);
            self.attempt(r.write, r.attempt + 1, r.reply).await;
        }
        self.release_flushes();
    }

    async fn attempt(&mut self, write: Correlated, attempt: u32, reply: Option<Reply>) {
        match self.write(&write).await {
            Ok(Outcome::Created(stored)) => {
                self.counters.created.fetch_add(1, Ordering::Relaxed);
                self.correlator.update_state(&stored);
                answer(reply, Ok(()));
            }
            Ok(Outcome::Patched(stored)) => {
                self.counters.patched.fetch_add(1, Ordering::Relaxed);
                self.correlator.update_state(&stored);
                answer(reply, Ok(()));
            }
            Err(e) if retryable(&e) && attempt < self.retry.max_attempts => {
                if self.pending.len() >= self.retry.max_pending {
                    self.give_up(&write, e, reply);
                    return;
                }
                let delay = e.retry_after().unwrap_or_else(|| self.backoff(attempt));
                tracing::debug!(error = %e, attempt, ?delay, "event write failed; will retry");
                self.pending.push(Retry {
                    due: tokio::time::Instant::now() + delay,
                    attempt,
                    write,
                    reply,
                });
            }
            Err(e) => self.give_up(&write, e, reply),
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        self.retry
            .backoff
            .saturating_mul(factor)
            .min(self.retry.max_backoff)
    }

    fn give_up(&self, write: &Correlated, error: Error, reply: Option<Reply>) {
        self.counters.failed.fetch_add(1, Ordering::Relaxed);
        let event = &write.event;
        if error.is_already_exists() {
            // The same event was written by an earlier attempt whose answer
            // was lost: nothing is missing.
            tracing::debug!(
                name = event.metadata.name.as_deref().unwrap_or(""),
                "event already exists"
            );
            answer(reply, Ok(()));
            return;
        }
        tracing::warn!(
            error = %error,
            reason = event.reason.as_deref().unwrap_or(""),
            object = event.involved_object.name.as_deref().unwrap_or(""),
            "could not write event; giving up"
        );
        answer(reply, Err(PublishError::Write(error)));
    }

    /// Patches the earlier Event for a repeat (creating it anew if it is
    /// gone), else creates one.
    async fn write(&self, write: &Correlated) -> Result<Outcome, Error> {
        let event = &write.event;
        let namespace = event.metadata.namespace.as_deref().unwrap_or("default");
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        if let (Some(patch), Some(name)) = (&write.patch, event.metadata.name.as_deref()) {
            match api
                .patch(name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(stored) => return Ok(Outcome::Patched(stored)),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        let mut fresh = event.clone();
        fresh.metadata.resource_version = None;
        api.create(&PostParams::default(), &fresh)
            .await
            .map(Outcome::Created)
    }
}

/// Tells whoever awaits the event how it ended (nobody may wait).
fn answer(reply: Option<Reply>, outcome: Result<(), PublishError>) {
    if let Some(reply) = reply {
        // the publisher may have stopped waiting (its future dropped)
        let _ = reply.send(outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_transient_failures_are_retried() {
        use crate::ApiError;
        let err = |code: u16| -> Error { ApiError::from_response(code, None, b"").into() };
        assert!(retryable(&err(500)));
        assert!(retryable(&err(503)));
        assert!(retryable(&err(429)));
        assert!(!retryable(&err(409)));
        assert!(!retryable(&err(422)));
        assert!(!retryable(&err(403)));
        assert!(retryable(&Error::Timeout(Duration::from_secs(1))));
    }
}
