//! The reflector's backoff (client-go's exponential backoff manager), the
//! pacing rules around it for a server that comes back (RF5), and the
//! randomised watch timeout.

use std::time::Duration;

use tokio::time::Instant;

use crate::config::BackoffConfig;

/// Exponential backoff with jitter that starts over after a healthy period.
#[derive(Debug)]
pub(crate) struct Backoff {
    config: BackoffConfig,
    /// The base of the next wait.
    base: Duration,
    /// When the last wait was handed out.
    last: Option<Instant>,
}

impl Backoff {
    pub(crate) fn new(config: BackoffConfig) -> Self {
        Self {
            base: config.initial,
            config,
            last: None,
        }
    }

    /// The next wait at `now`, `r` in `[0, 1)` choosing the jitter.
    pub(crate) fn next_delay_with(&mut self, now: Instant, r: f64) -> Duration {
        if let Some(last) = self.last {
            if now.saturating_duration_since(last) > self.config.reset_after {
                self.base = self.config.initial;
            }
        }
        self.last = Some(now);
        let base = self.base.min(self.config.max);
        self.base = base.saturating_mul(2).min(self.config.max);
        jittered(base, self.config.jitter, r)
    }
}

impl Backoff {
    /// Starts over from the initial wait.
    pub(crate) fn reset(&mut self) {
        self.base = self.config.initial;
        self.last = None;
    }
}

/// How many waits in a row follow the server's `Retry-After` exactly
/// (client-go's REST client retries such answers up to 10 times itself,
/// without touching the reflector's backoff).
pub(crate) const SERVER_ASKED_IN_A_ROW: u32 = 10;

/// What a failure says about the wait before the next attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The server could not be reached: refused, or the connection broke
    /// before any answer.
    Unreachable,
    /// The server answered and asked for this wait (`Retry-After`).
    ServerAsked(Duration),
    /// Anything else.
    Other,
}

/// The waits between attempts (RF5): client-go's backoff, except that
/// - a wait the server asks for (`Retry-After` on a 429 or 5xx) is waited
///   exactly, without growing the backoff, up to [`SERVER_ASKED_IN_A_ROW`]
///   times in a row;
/// - once a watch starts or a list succeeds after the server was
///   unreachable, the backoff starts over: the outage that grew it is
///   over, and a relist that follows (a 410 for versions older than a
///   restart) waits the initial backoff, not the outage's.
#[derive(Debug)]
pub(crate) struct Pacing {
    backoff: Backoff,
    unreachable: bool,
    server_asked: u32,
}

impl Pacing {
    pub(crate) fn new(config: BackoffConfig) -> Self {
        Self {
            backoff: Backoff::new(config),
            unreachable: false,
            server_asked: 0,
        }
    }

    /// The wait after `failure`.
    pub(crate) fn after_failure(&mut self, failure: Failure) -> Duration {
        self.after_failure_with(failure, Instant::now(), rand::random::<f64>())
    }

    /// The wait after `failure` at `now`, `r` choosing the jitter.
    pub(crate) fn after_failure_with(
        &mut self,
        failure: Failure,
        now: Instant,
        r: f64,
    ) -> Duration {
        match failure {
            Failure::Unreachable => {
                self.unreachable = true;
                self.backoff.next_delay_with(now, r)
            }
            Failure::ServerAsked(asked) if self.server_asked < SERVER_ASKED_IN_A_ROW => {
                self.server_asked += 1;
                asked
            }
            Failure::ServerAsked(asked) => self.backoff.next_delay_with(now, r).max(asked),
            Failure::Other => self.backoff.next_delay_with(now, r),
        }
    }

    /// A watch started or a list succeeded.
    pub(crate) fn succeeded(&mut self) {
        self.server_asked = 0;
        if std::mem::take(&mut self.unreachable) {
            self.backoff.reset();
        }
    }
}

/// `base × (1 + jitter × r)`, `r` clamped to `[0, 1)` and a negative or
/// non-finite jitter read as none.
fn jittered(base: Duration, jitter: f64, r: f64) -> Duration {
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
    base.saturating_add(base.mul_f64(jitter * r))
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
mod tests {
    use super::*;

    fn config() -> BackoffConfig {
        BackoffConfig {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            reset_after: Duration::from_secs(120),
            jitter: 1.0,
        }
    }

    #[test]
    fn rf5_doubles_from_initial_to_the_cap() {
        let mut b = Backoff::new(config());
        let t = Instant::now();
        let waits: Vec<u128> = (0..8)
            .map(|i| {
                b.next_delay_with(t + Duration::from_secs(i), 0.0)
                    .as_millis()
            })
            .collect();
        assert_eq!(waits, [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
    }

    #[test]
    fn rf5_jitter_adds_up_to_the_jitter_fraction() {
        let t = Instant::now();
        for (r, want) in [(0.0, 800), (0.5, 1200), (0.999, 1599)] {
            let mut b = Backoff::new(config());
            assert_eq!(b.next_delay_with(t, r).as_millis(), want);
        }
        let mut none = Backoff::new(BackoffConfig {
            jitter: 0.0,
            ..config()
        });
        assert_eq!(none.next_delay_with(t, 0.9).as_millis(), 800);
        let mut bad = Backoff::new(BackoffConfig {
            jitter: f64::NAN,
            ..config()
        });
        assert_eq!(bad.next_delay_with(t, 0.9).as_millis(), 800);
    }

    #[test]
    fn rf5_resets_after_a_healthy_period() {
        let mut b = Backoff::new(config());
        let t = Instant::now();
        for i in 0..5 {
            b.next_delay_with(t + Duration::from_secs(i), 0.0);
        }
        // within the healthy period: still growing
        let grown = b.next_delay_with(t + Duration::from_secs(100), 0.0);
        assert_eq!(grown.as_millis(), 25600);
        // more than reset_after since the last wait: from the start again
        let reset = b.next_delay_with(t + Duration::from_secs(221), 0.0);
        assert_eq!(reset.as_millis(), 800);
        assert_eq!(
            b.next_delay_with(t + Duration::from_secs(222), 0.0)
                .as_millis(),
            1600
        );
    }

    #[test]
    fn rf5_a_wait_the_server_asks_for_is_waited_exactly_ten_times_in_a_row() {
        let mut p = Pacing::new(config());
        let t = Instant::now();
        let one = Duration::from_secs(1);
        for _ in 0..SERVER_ASKED_IN_A_ROW {
            assert_eq!(p.after_failure_with(Failure::ServerAsked(one), t, 0.0), one);
        }
        // then the backoff, which the asked-for waits did not grow
        assert_eq!(
            p.after_failure_with(Failure::ServerAsked(one), t, 0.0),
            one.max(Duration::from_millis(800))
        );
        assert_eq!(
            p.after_failure_with(Failure::ServerAsked(Duration::from_secs(5)), t, 0.0),
            Duration::from_secs(5),
            "never shorter than asked"
        );
        p.succeeded();
        assert_eq!(p.after_failure_with(Failure::ServerAsked(one), t, 0.0), one);
    }

    #[test]
    fn rf5_the_backoff_an_outage_grew_starts_over_once_the_server_answers() {
        let mut p = Pacing::new(config());
        let t = Instant::now();
        let waits: Vec<u128> = (0..4)
            .map(|_| {
                p.after_failure_with(Failure::Unreachable, t, 0.0)
                    .as_millis()
            })
            .collect();
        assert_eq!(waits, [800, 1600, 3200, 6400]);
        p.succeeded();
        assert_eq!(
            p.after_failure_with(Failure::Other, t, 0.0).as_millis(),
            800,
            "the relist after a restart's 410 waits the initial backoff"
        );
    }

    #[test]
    fn rf5_failures_of_a_reachable_server_keep_growing_the_backoff() {
        let mut p = Pacing::new(config());
        let t = Instant::now();
        let mut waits = Vec::new();
        for _ in 0..4 {
            // list succeeds, the watch fails: no outage, no reset
            p.succeeded();
            waits.push(p.after_failure_with(Failure::Other, t, 0.0).as_millis());
        }
        assert_eq!(waits, [800, 1600, 3200, 6400]);
    }

    #[test]
    fn rf3_watch_timeouts_lie_in_min_to_twice_min() {
        let five = Duration::from_secs(300);
        assert_eq!(watch_timeout_seconds(five, 0.0), 300);
        assert_eq!(watch_timeout_seconds(five, 0.5), 450);
        assert_eq!(watch_timeout_seconds(five, 0.999_999), 599);
        assert_eq!(watch_timeout_seconds(five, 1.0), 599);
        assert_eq!(watch_timeout_seconds(five, f64::NAN), 300);
        assert_eq!(watch_timeout_seconds(Duration::from_millis(10), 0.7), 1);
        for i in 0..1000 {
            let t = watch_timeout_seconds(five, f64::from(i) / 1000.0);
            assert!((300..600).contains(&t), "{t}");
        }
        // the random source covers the range
        let seen: std::collections::BTreeSet<u32> = (0..2000)
            .map(|_| watch_timeout_seconds(five, rand::random::<f64>()) / 60)
            .collect();
        assert_eq!(seen, (5..10).collect());
    }
}
