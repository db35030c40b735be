//! Waiting in tests for something to happen: a condition polled (with a
//! short backoff) until it holds, bounded by a deadline that names what was
//! awaited when it passes.
//!
//! One helper for every crate's tests (the testserver is the one crate they
//! all may dev-depend on): [`eventually`] for async tests, with an async
//! condition; [`eventually_blocking`] for threads. A condition gives a
//! `bool` (done when true) or an `Option` (done when `Some`, whose value is
//! returned); see [`Outcome`]. The deadline, [`EVENTUALLY_DEADLINE`], is a safety net
//! that a loaded machine meets with room, never a timing under test.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use kcontrol_testserver::{eventually, eventually_blocking, try_eventually_within};
//!
//! let polls = AtomicU32::new(0);
//! // async: the condition may await (an HTTP request, a lock)
//! eventually("three polls", async || polls.fetch_add(1, Ordering::SeqCst) == 2).await;
//! // a value, once there is one
//! let n = eventually("a count past five", async || {
//!     let n = polls.fetch_add(1, Ordering::SeqCst);
//!     (n > 5).then_some(n)
//! })
//! .await;
//! assert_eq!(n, 6);
//! // blocking, for tests on threads
//! eventually_blocking("ten polls", || polls.fetch_add(1, Ordering::SeqCst) >= 10);
//! // a shorter bound, and the timeout as a value rather than a panic
//! let err = try_eventually_within("never", std::time::Duration::from_millis(5), async || false)
//!     .await
//!     .unwrap_err();
//! assert!(err.to_string().starts_with("timed out after 5ms waiting for never"));
//! # }
//! ```

use std::fmt::Display;
use std::time::{Duration, Instant};

/// The longest [`eventually`] and [`eventually_blocking`] wait: a safety
/// net for a loaded machine, not a timing.
pub const EVENTUALLY_DEADLINE: Duration = Duration::from_secs(30);

/// The first pause between two polls; each next one doubles, up to
/// [`LONGEST_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_micros(100);

/// The longest pause between two polls.
const LONGEST_PAUSE: Duration = Duration::from_millis(20);

/// What a polled condition gives: whether it holds, and if so the value the
/// wait returns.
pub trait Outcome {
    /// The value returned once the condition holds.
    type Value;
    /// `Some` once the condition holds.
    fn done(self) -> Option<Self::Value>;
}

impl Outcome for bool {
    type Value = ();
    fn done(self) -> Option<()> {
        self.then_some(())
    }
}

impl<T> Outcome for Option<T> {
    type Value = T;
    fn done(self) -> Option<T> {
        self
    }
}

/// A condition did not hold within its bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("timed out after {after:?} waiting for {what}")]
pub struct TimedOut {
    /// What was awaited, as the caller described it.
    pub what: String,
    /// The bound that passed.
    pub after: Duration,
}

/// The pauses between polls: doubling from [`FIRST_PAUSE`] to
/// [`LONGEST_PAUSE`], never past the deadline.
struct Backoff {
    deadline: Instant,
    pause: Duration,
}

impl Backoff {
    fn new(within: Duration) -> Self {
        Self {
            deadline: Instant::now() + within,
            pause: FIRST_PAUSE,
        }
    }

    /// The next pause, or `None` once the deadline has passed.
    fn next(&mut self) -> Option<Duration> {
        let left = self.deadline.checked_duration_since(Instant::now())?;
        if left.is_zero() {
            return None;
        }
        let pause = self.pause.min(left);
        self.pause = (self.pause * 2).min(LONGEST_PAUSE);
        Some(pause)
    }
}

/// Polls `cond` until it holds, for at most `within`; the value it gave, or
/// [`TimedOut`] naming `what`. The condition is polled once more at the
/// deadline.
pub async fn try_eventually_within<O: Outcome>(
    what: impl Display,
    within: Duration,
    mut cond: impl AsyncFnMut() -> O,
) -> Result<O::Value, TimedOut> {
    let mut backoff = Backoff::new(within);
    loop {
        if let Some(value) = cond().await.done() {
            return Ok(value);
        }
        match backoff.next() {
            Some(pause) => tokio::time::sleep(pause).await,
            None => {
                return Err(TimedOut {
                    what: what.to_string(),
                    after: within,
                })
            }
        }
    }
}

/// [`try_eventually_within`] bounded by [`EVENTUALLY_DEADLINE`]: for a test
/// that reports more than `what` when the wait fails (the state it reached).
pub async fn try_eventually<O: Outcome>(
    what: impl Display,
    cond: impl AsyncFnMut() -> O,
) -> Result<O::Value, TimedOut> {
    try_eventually_within(what, EVENTUALLY_DEADLINE, cond).await
}

/// Polls `cond` until it holds, for at most `within`, and returns the value
/// it gave.
///
/// # Panics
///
/// When `within` passes first, with a message naming `what`: this is a
/// test's assertion.
pub async fn eventually_within<O: Outcome>(
    what: impl Display,
    within: Duration,
    cond: impl AsyncFnMut() -> O,
) -> O::Value {
    match try_eventually_within(what, within, cond).await {
        Ok(value) => value,
        Err(timed_out) => panic!("{timed_out}"),
    }
}

/// Polls `cond` until it holds, for at most [`EVENTUALLY_DEADLINE`], and returns the
/// value it gave.
///
/// # Panics
///
/// When [`EVENTUALLY_DEADLINE`] passes first, with a message naming `what`: this is a
/// test's assertion.
pub async fn eventually<O: Outcome>(what: impl Display, cond: impl AsyncFnMut() -> O) -> O::Value {
    eventually_within(what, EVENTUALLY_DEADLINE, cond).await
}

/// [`eventually`] for a thread: polls `cond`, sleeping the thread between
/// polls, for at most [`EVENTUALLY_DEADLINE`].
///
/// # Panics
///
/// When [`EVENTUALLY_DEADLINE`] passes first, with a message naming `what`.
pub fn eventually_blocking<O: Outcome>(
    what: impl Display,
    mut cond: impl FnMut() -> O,
) -> O::Value {
    let mut backoff = Backoff::new(EVENTUALLY_DEADLINE);
    loop {
        if let Some(value) = cond().done() {
            return value;
        }
        match backoff.next() {
            Some(pause) => std::thread::sleep(pause),
            None => panic!(
                "{}",
                TimedOut {
                    what: what.to_string(),
                    after: EVENTUALLY_DEADLINE,
                }
            ),
        }
    }
}

/// [`std::process::Child::wait_with_output`] with a bound: waits for `child`
/// to exit (polling, with the same backoff) while reading its piped stdout
/// and stderr (on threads, so a chatty child cannot fill a pipe and stall),
/// and returns its status and output (empty for a stream not piped).
///
/// # Panics
///
/// When `within` passes first: the child is killed and the panic names
/// `what`.
pub fn wait_with_output_within(
    what: impl Display,
    within: Duration,
    mut child: std::process::Child,
) -> std::process::Output {
    fn drain(
        pipe: Option<impl std::io::Read + Send + 'static>,
    ) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                // a read error ends the output there: the status still says
                // how the child ended
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let mut backoff = Backoff::new(within);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => panic!("waiting for {what}: {e}"),
        }
        match backoff.next() {
            Some(pause) => std::thread::sleep(pause),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{}",
                    TimedOut {
                        what: what.to_string(),
                        after: within,
                    }
                );
            }
        }
    };
    let joined = |reader: std::thread::JoinHandle<Vec<u8>>| reader.join().unwrap_or_default();
    std::process::Output {
        status,
        stdout: joined(stdout),
        stderr: joined(stderr),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn the_backoff_doubles_to_its_cap_and_stops_at_the_deadline() {
        let mut b = Backoff::new(Duration::from_secs(30));
        let pauses: Vec<_> = (0..10).filter_map(|_| b.next()).collect();
        assert_eq!(pauses[0], FIRST_PAUSE);
        assert_eq!(pauses[1], FIRST_PAUSE * 2);
        assert_eq!(*pauses.last().unwrap(), LONGEST_PAUSE);
        let mut over = Backoff::new(Duration::ZERO);
        assert_eq!(over.next(), None);
    }

    #[tokio::test]
    async fn a_condition_that_never_holds_times_out_naming_what() {
        let polls = AtomicU32::new(0);
        let err = try_eventually_within("the moon", Duration::from_millis(30), async || {
            polls.fetch_add(1, Ordering::SeqCst);
            false
        })
        .await
        .unwrap_err();
        assert_eq!(err.what, "the moon");
        assert_eq!(err.to_string(), "timed out after 30ms waiting for the moon");
        assert!(
            polls.load(Ordering::SeqCst) >= 2,
            "polled again before giving up"
        );
    }

    #[tokio::test]
    #[should_panic(expected = "timed out after 10ms waiting for a ghost")]
    async fn eventually_within_panics_naming_what() {
        eventually_within("a ghost", Duration::from_millis(10), async || None::<u8>).await;
    }

    #[test]
    fn a_process_is_awaited_with_its_output_or_killed() {
        use std::process::{Command, Stdio};
        let child = Command::new("sh")
            .args(["-c", "echo out; echo err >&2; exit 3"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_with_output_within("sh", Duration::from_secs(30), child);
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(
            (out.stdout.as_slice(), out.stderr.as_slice()),
            (&b"out\n"[..], &b"err\n"[..])
        );
        let sleeper = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = sleeper.id();
        let timed_out = std::panic::catch_unwind(|| {
            wait_with_output_within("a sleeper", Duration::from_millis(20), sleeper)
        });
        let message = *timed_out.unwrap_err().downcast::<String>().unwrap();
        assert_eq!(message, "timed out after 20ms waiting for a sleeper");
        // killed and reaped: no such process any more
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    }

    #[test]
    fn the_blocking_twin_returns_the_value() {
        let polls = AtomicU32::new(0);
        let n = eventually_blocking("the third poll", || {
            let n = polls.fetch_add(1, Ordering::SeqCst);
            (n == 2).then_some(n)
        });
        assert_eq!(n, 2);
    }
}
