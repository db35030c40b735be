//! The reflector's backoff (client-go's exponential backoff manager) and
//! the pacing rules around it (RF5): kcontrol's, and the client-go preset
//! ([`PacingPreset::ClientGo`]) that reproduces client-go's exactly, for
//! comparison; and the randomised watch timeout.
//!
//! Both pacings wait the same way at the request level (client-go's REST
//! client, [`crate::retry`]): an answer asking for a wait is retried after
//! exactly that wait, up to [`SERVER_ASKED_IN_A_ROW`] times. They differ
//! at the reflector level, once a failure ends a watch or a list:
//! - kcontrol never waits less than the server asked for: the backoff
//!   step, growing, is the wait, and the server's wait its floor
//!   (client-go's reflector ignores it there);
//! - after an outage, a 410 that came less than [`SETTLE`] after the
//!   server's first answer since it refused connections is first
//!   confirmed: the same watch is sent again a second (with jitter) later,
//!   and only an answer then relists — a server that falls over again
//!   within a second of its return costs no LIST;
//! - the relist that a 410 after an outage calls for waits a random part
//!   of the backoff, `[0, backoff × jitter)`, instead of the backoff plus
//!   that random part: the same spread as client-go's, so returning clients
//!   come back no denser than client-go's, without the grown backoff in
//!   front;
//!   once per outage, and once per backoff period: a server that flaps
//!   (up, down again before the backoff starts over) gets client-go's full
//!   steps from its second return on.
//!
//! Neither resets the backoff on a success: it starts over only after
//! `reset_after` without a backoff step (client-go's "2 minutes without
//! backoff": the connection has stayed healthy).

use std::time::Duration;

use tokio::time::Instant;

use crate::config::BackoffConfig;

/// How many times in a row the same request is sent again after the wait
/// the server asked for, before the failure ends the watch or list
/// (client-go's REST client: `maxRetries` 10).
pub(crate) const SERVER_ASKED_IN_A_ROW: u32 = 10;

/// How long a server back from being unreachable must have been answering
/// (anything, a 503 too) before the relist a 410 calls for (RF5): a 410
/// sooner than that is confirmed by the same watch sent this long (plus
/// jitter, up to as much again) after it. The same second that makes a
/// watch ending sooner without events a failure (RF4): a success shorter
/// than that does not count.
pub(crate) const SETTLE: Duration = Duration::from_secs(1);

/// Whose pacing rules a reflector follows.
///
/// ```
/// use kcontrol_reflector::{PacingPreset, WatchConfig};
///
/// // a reference reflector paced exactly as a client-go informer's
/// let reference = WatchConfig::default().pacing(PacingPreset::ClientGo);
/// assert_eq!(reference.pacing, PacingPreset::ClientGo);
/// assert_eq!(WatchConfig::default().pacing, PacingPreset::Kcontrol);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PacingPreset {
    /// kcontrol's rules (RF5 of DESIGN.md): client-go's backoff and
    /// request retries, a server-asked wait a floor under the growing
    /// backoff, a watch whose start is answered 5xx with `Retry-After`
    /// watched again instead of relisted, and the relist after an outage's
    /// 410 spread over the backoff instead of waiting it (the 410 confirmed
    /// a second later first when the server had only just come back).
    #[default]
    Kcontrol,
    /// client-go's rules, exactly (`tools/cache/reflector.go` with
    /// `rest/request.go`'s retries), as a reference for benchmarks and
    /// tests: the reflector's waits ignore what the server asked for, a
    /// watch start failing with 5xx relists, every relist waits a backoff
    /// step; the REST client retries 429 and 5xx answers with a
    /// `Retry-After` header (not `retryAfterSeconds` in the body), and
    /// transport errors of a list or a watch start, after 1 s.
    ClientGo,
}

/// Exponential backoff with jitter that starts over after a quiet period
/// (client-go's `NewExponentialBackoffManager`).
#[derive(Debug)]
pub(crate) struct Backoff {
    config: BackoffConfig,
    /// The base of the next wait.
    base: Duration,
    /// When the last wait was handed out.
    last: Option<Instant>,
    /// How many times the backoff started over (after a quiet period).
    period: u64,
}

impl Backoff {
    pub(crate) fn new(config: BackoffConfig) -> Self {
        Self {
            base: config.initial,
            config,
            last: None,
            period: 0,
        }
    }

    /// Whether a step at `now` starts the backoff over.
    fn resets_at(&self, now: Instant) -> bool {
        self.last
            .is_some_and(|last| now.saturating_duration_since(last) > self.config.reset_after)
    }

    /// The backoff period a step at `now` belongs to: a new one once it
    /// starts over.
    fn period_at(&self, now: Instant) -> u64 {
        self.period + u64::from(self.resets_at(now))
    }

    /// The base of the step at `now` (back to `initial` when more than
    /// `reset_after` passed since the last step), and the base after it.
    fn advance(&mut self, now: Instant) -> Duration {
        if self.resets_at(now) {
            self.base = self.config.initial;
            self.period += 1;
        }
        self.last = Some(now);
        let base = self.base.min(self.config.max);
        self.base = base.saturating_mul(2).min(self.config.max);
        base
    }

    /// The next wait at `now`: `base × (1 + jitter × r)`, `r` in `[0, 1)`.
    pub(crate) fn next_delay_with(&mut self, now: Instant, r: f64) -> Duration {
        let base = self.advance(now);
        base.saturating_add(spread(base, self.config.jitter, r))
    }

    /// The next step taken as a spread only: `base × jitter × r`, so that
    /// waits drawn this way cover the same window length as
    /// [`next_delay_with`](Self::next_delay_with)'s, starting at zero.
    pub(crate) fn next_spread_with(&mut self, now: Instant, r: f64) -> Duration {
        let base = self.advance(now);
        spread(base, self.config.jitter, r)
    }
}

/// What a failure says about the wait before the next attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The server could not be reached: refused, or the connection broke
    /// before any answer.
    Unreachable,
    /// The server answered and asked for this wait (`Retry-After` on a 429
    /// or 5xx, `retryAfterSeconds` in a `Status`).
    ServerAsked(Duration),
    /// A watch was answered 410: the version it asked for is gone.
    Expired,
    /// Anything else.
    Other,
}

/// The waits between attempts (RF5), by [`PacingPreset`].
#[derive(Debug)]
pub(crate) struct Pacing {
    preset: PacingPreset,
    backoff: Backoff,
    /// The server was unreachable or asked for waits since a watch last
    /// delivered an event (or the last spread relist).
    outage: bool,
    /// The backoff period of the last spread relist: one per period.
    spread_period: Option<u64>,
    /// Whether the server is reachable, as far as its answers tell.
    reach: Reach,
}

/// What the reflector last learned of whether the server answers (RF5
/// rule 5: a 410 soon after the server's return is confirmed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reach {
    /// It never refused a connection (so far as anyone saw).
    Steady,
    /// It refused a connection (or broke one before answering) and has not
    /// answered since.
    Refused,
    /// It answers again, first since this instant.
    AnsweringSince(Instant),
}

impl Pacing {
    pub(crate) fn new(preset: PacingPreset, config: BackoffConfig) -> Self {
        Self {
            preset,
            backoff: Backoff::new(config),
            outage: false,
            spread_period: None,
            reach: Reach::Steady,
        }
    }

    pub(crate) fn preset(&self) -> PacingPreset {
        self.preset
    }

    /// The wait after `failure` ended a watch or a list.
    pub(crate) fn after_failure(&mut self, failure: Failure) -> Duration {
        self.after_failure_with(failure, Instant::now(), rand::random::<f64>())
    }

    /// The wait after `failure` at `now`, `r` in `[0, 1)` choosing the
    /// jitter.
    pub(crate) fn after_failure_with(
        &mut self,
        failure: Failure,
        now: Instant,
        r: f64,
    ) -> Duration {
        match (self.preset, failure) {
            (_, Failure::Unreachable) => {
                self.outage = true;
                self.reach = Reach::Refused;
                self.backoff.next_delay_with(now, r)
            }
            (PacingPreset::Kcontrol, Failure::ServerAsked(asked)) => {
                self.answered(now);
                self.backoff.next_delay_with(now, r).max(asked)
            }
            (PacingPreset::Kcontrol, Failure::Expired) if self.spreads_at(now) => {
                self.outage = false;
                self.spread_period = Some(self.backoff.period_at(now));
                self.backoff.next_spread_with(now, r)
            }
            _ => self.backoff.next_delay_with(now, r),
        }
    }

    /// Before the relist a watch's `failure` calls for: the wait after
    /// which the same watch is sent again to confirm the server stayed up,
    /// when it is a 410 after an outage (kcontrol's rules) not yet
    /// confirmed. `None`: relist ([`after_failure`](Self::after_failure)
    /// says when).
    pub(crate) fn confirm_before_relist(&mut self, failure: Failure) -> Option<Duration> {
        self.confirm_with(failure, Instant::now(), rand::random::<f64>())
    }

    /// [`confirm_before_relist`](Self::confirm_before_relist) at `now`,
    /// `r` in `[0, 1)` choosing the jitter: [`SETTLE`] `× (1 + jitter ×
    /// r)` when the server has answered for less than [`SETTLE`].
    pub(crate) fn confirm_with(
        &mut self,
        failure: Failure,
        now: Instant,
        r: f64,
    ) -> Option<Duration> {
        if self.preset != PacingPreset::Kcontrol || failure != Failure::Expired || !self.outage {
            return None;
        }
        self.answered_at(now);
        let Reach::AnsweringSince(since) = self.reach else {
            return None;
        };
        if now.saturating_duration_since(since) >= SETTLE {
            return None;
        }
        Some(SETTLE.saturating_add(spread(SETTLE, self.backoff.config.jitter, r)))
    }

    /// Whether a 410 at `now` relists after a spread rather than a full
    /// step: after an outage, and not twice in one backoff period (a
    /// flapping server: the first return is spread, the next ones wait
    /// client-go's full steps).
    fn spreads_at(&self, now: Instant) -> bool {
        self.outage && self.spread_period != Some(self.backoff.period_at(now))
    }

    /// A request was answered with a wait to honour before sending it
    /// again (retried at the request level): the server is struggling.
    pub(crate) fn server_asked(&mut self) {
        self.answered(Instant::now());
    }

    /// The server answered at `now`, asking for a wait: an outage, though
    /// it is reachable.
    fn answered(&mut self, now: Instant) {
        self.outage = true;
        self.answered_at(now);
    }

    /// The server answered at `now`: its first answer after refusing
    /// starts the time it has been answering.
    fn answered_at(&mut self, now: Instant) {
        if self.reach == Reach::Refused {
            self.reach = Reach::AnsweringSince(now);
        }
    }

    /// A watch delivered an event: whatever outage there was is over.
    pub(crate) fn progressed(&mut self) {
        self.outage = false;
    }
}

/// `base × jitter × r`, `r` clamped to `[0, 1]` and a negative or
/// non-finite jitter read as none.
fn spread(base: Duration, jitter: f64, r: f64) -> Duration {
    let jitter = if jitter.is_finite() && jitter > 0.0 {
        jitter
    } else {
        0.0
    };
    let r = if r.is_finite() {
        r.clamp(0.0, 1.0)
    } else {
        0.0
    };
    base.mul_f64(jitter * r)
}

/// The `timeoutSeconds` of a watch: uniform in `[min, 2 × min)`, in whole
/// seconds and at least one (client-go's `minWatchTimeout × (1 + rand)`).
pub(crate) fn watch_timeout_seconds(min: Duration, r: f64) -> u32 {
    let min_secs = min.as_secs_f64().max(1.0);
    let r = if r.is_finite() {
        r.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let secs = (min_secs * (1.0 + r)).floor();
    // below 2 × min even for r rounding up to 1
    let upper = (2.0 * min_secs).ceil() - 1.0;
    let secs = secs.min(upper).max(min_secs.ceil());
    if secs >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        // in range and whole: the cast is exact
        secs as u32
    }
}

#[cfg(test)]
mod tests;
