//! The faults a fleet lives through, played on the wall clock against the
//! testserver (issue 26):
//! - `restart`: down 3 s (connections cut, port refusing), then 503 with
//!   `Retry-After: 1` for 1 s, then watches answered 429 while the watch
//!   cache fills for 2 s, and 410 for versions from before the restart;
//! - `flapping`: down 2 s / up 1 s, five times (each a restart: history
//!   lost, 410 for older versions);
//! - `retry-after`: every watch answered 503 with `Retry-After: 1` for 30 s
//!   (lists served), open watches closed as it starts;
//! - `watchlist-429`: WatchList requests answered 429 (`Retry-After: 1`)
//!   for 10 s, as the history is dropped and open watches closed (so every
//!   reflector relists through WatchList).

use std::time::{Duration, Instant};

use kcontrol_testserver::{Failure, FaultScope, Faults, Flapping, Restart, Verb};

/// A fault of the fleet scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// One API server restart.
    Restart,
    /// A server that keeps restarting.
    Flapping,
    /// Watches failing with 503 and `Retry-After`.
    RetryAfter,
    /// WatchList throttled with 429.
    WatchList429,
}

impl Fault {
    /// Every fault, in the order they run.
    pub const ALL: [Fault; 4] = [
        Fault::Restart,
        Fault::Flapping,
        Fault::RetryAfter,
        Fault::WatchList429,
    ];

    /// The fault's name in rows (`-limited` is appended for the runs with
    /// the admission limit).
    pub fn name(self) -> &'static str {
        match self {
            Fault::Restart => "restart",
            Fault::Flapping => "flapping",
            Fault::RetryAfter => "retry-after",
            Fault::WatchList429 => "watchlist-429",
        }
    }

    /// Whether the fleet syncs through WatchList.
    pub fn watch_list(self) -> bool {
        self == Fault::WatchList429
    }

    /// Plays the fault on a server; returns when the server is healthy
    /// again (every phase of the fault over).
    pub async fn play(self, faults: &Faults) -> Instant {
        match self {
            Fault::Restart => {
                let restart = Restart {
                    down: Duration::from_secs(3),
                    unavailable: Duration::from_secs(1),
                    initializing: Duration::from_secs(2),
                };
                faults.restart(restart).await;
                let healthy = Instant::now() + restart.unavailable + restart.initializing;
                tokio::time::sleep_until(healthy.into()).await;
                healthy
            }
            Fault::Flapping => {
                faults
                    .flap(Flapping {
                        down: Duration::from_secs(2),
                        up: Duration::from_secs(1),
                        times: 5,
                    })
                    .await;
                Instant::now()
            }
            Fault::RetryAfter => {
                let window = Duration::from_secs(30);
                let healthy = Instant::now() + window;
                let watches = FaultScope {
                    verb: Some(Verb::Watch),
                    resource: Some("configmaps".into()),
                };
                faults.fail_for(window, Failure::ServiceUnavailable, watches);
                faults.close_all_watches();
                tokio::time::sleep_until(healthy.into()).await;
                healthy
            }
            Fault::WatchList429 => {
                let window = Duration::from_secs(10);
                let healthy = Instant::now() + window;
                faults.fail_watch_lists_for(
                    window,
                    Failure::TooManyRequests {
                        retry_after_secs: 1,
                    },
                );
                faults.compact();
                faults.close_all_watches();
                tokio::time::sleep_until(healthy.into()).await;
                healthy
            }
        }
    }
}
