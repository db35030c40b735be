//! The `soak` scenario: the sample-controller under continuous random Foo
//! churn and random faults for `--duration`, then a check that everything
//! converged and that its memory stayed flat.
//!
//! - The testserver runs in this process (HTTPS on 127.0.0.1, Deployment
//!   simulator and garbage collector on); the controller in a child
//!   process ([`process`]), restarted after each SIGTERM or SIGKILL.
//! - Churn ([`churn`]): a pool of `--foos` names, about `--rate` changes a
//!   second (create, scale, delete, recreate with the same name, delete
//!   the Deployment), from a RNG seeded by `--seed`.
//! - Faults, one every 0.5–2.5 s, chosen by the same seed: every watch
//!   dropped; the next watches (or list and watches) answered 410; the
//!   history compacted; a burst of 429s or 5xx (every request for
//!   0.2–3 s); a lagging replica serving lists and watches for up to 3 s;
//!   a Foo watch cache (re)initializing; and, in the first half only, the
//!   controller stopped by SIGTERM (it must exit 0) or SIGKILL and started
//!   again. One fault at a time: each new one first clears what is left
//!   of the previous (`Faults::reset`), so 410s counted for "the next
//!   list" cannot pile up while the controller's reflectors back off.
//! - RSS: restarts reset a process's memory, so restarts happen only in
//!   the first half of the run. The warm-up RSS is taken at 60 % of the
//!   run (and at least a tenth of the run after the last start), the end
//!   RSS at the end of churn, both under churn and faults (the median of
//!   five readings 100 ms apart); `rss_growth` is end ÷ warm-up.
//! - At the end churn and faults stop and the server's state is polled
//!   (every 100 ms, up to `--settle-timeout`) until [`check::check`]
//!   finds it converged: every Foo owns exactly one Deployment with its
//!   replicas and reports them available, and no Deployment is orphaned.
//!
//! The controller logs (`RUST_LOG`, default `info`) to a file in the
//! temporary directory, named on stderr; it is removed after a run that
//! passed unless `KCONTROL_SOAK_KEEP_LOG` is set.
//!
//! - The time series ([`timeline`]): the controller's RSS every 0.5 s from
//!   the first start to the end of the settle, and each fault's time, as
//!   `rss_samples` and `fault_times` in the row.
//!
//! One row (`--json`: one JSON line); the run fails (non-zero exit) if it
//! did not converge, if anything was lost, duplicated or orphaned, if a
//! SIGTERM did not end the controller with exit 0 (or it died by itself),
//! or if `rss_growth` exceeds `--max-rss-growth` when given.

pub mod check;
pub mod churn;
pub mod process;
pub mod timeline;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kcontrol_testserver::{Failure, FaultScope, TestServer};
use serde_json::json;

use crate::controller::{foo_server, procstat, FOO_RESOURCE, NAMESPACE};
use crate::report::{row, Report};
use process::{Controller, Ended, Launcher};
use timeline::Timeline;

/// The soak's settings (`kcontrol-bench soak --help`).
#[derive(Clone, Debug)]
pub struct Options {
    /// How long churn and faults run.
    pub duration: Duration,
    /// The seed of every random choice.
    pub seed: u64,
    /// Names in the Foo pool.
    pub foos: u64,
    /// Churn changes a second (mean).
    pub rate: f64,
    /// How long the end may take to converge.
    pub settle_timeout: Duration,
    /// Fail when `rss_growth` exceeds this.
    pub max_rss_growth: Option<f64>,
    /// A `sample-controller` binary to run instead of this one.
    pub controller_bin: Option<PathBuf>,
}

/// A small, fast, seedable generator (SplitMix64): the same seed gives the
/// same sequence of choices on every platform and version.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The faults the soak injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    /// Every open watch ends.
    WatchDrop,
    /// The next watches answer 410; every open watch ends.
    WatchExpired,
    /// The next list and watches answer 410; every open watch ends.
    ListExpired,
    /// The history is compacted; every open watch ends.
    Compaction,
    /// The next requests answer 429 with Retry-After: 1.
    TooManyRequests,
    /// The next requests answer 500 or 503.
    ServerError,
    /// For a few seconds a lagging replica serves lists and watches;
    /// every open watch ends.
    LaggingReplica,
    /// Foo watches answer 429 "storage is (re)initializing" for a while;
    /// every open watch ends.
    WatchCacheInit,
    /// The controller gets SIGTERM and is started again.
    Sigterm,
    /// The controller gets SIGKILL and is started again.
    Sigkill,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Self::WatchDrop => "watch_drop",
            Self::WatchExpired => "watch_410",
            Self::ListExpired => "list_410",
            Self::Compaction => "compaction",
            Self::TooManyRequests => "burst_429",
            Self::ServerError => "burst_5xx",
            Self::LaggingReplica => "lagging_replica",
            Self::WatchCacheInit => "watch_cache_init",
            Self::Sigterm => "sigterm",
            Self::Sigkill => "sigkill",
        }
    }

    /// Picks a fault: restarts (about one fault in five) only while
    /// `restarts` allows them.
    fn pick(rng: &mut Rng, restarts: bool) -> Self {
        const SERVER: [Fault; 8] = [
            Fault::WatchDrop,
            Fault::WatchExpired,
            Fault::ListExpired,
            Fault::Compaction,
            Fault::TooManyRequests,
            Fault::ServerError,
            Fault::LaggingReplica,
            Fault::WatchCacheInit,
        ];
        if restarts && rng.below(5) == 0 {
            return if rng.below(2) == 0 {
                Self::Sigterm
            } else {
                Self::Sigkill
            };
        }
        SERVER[rng.below(SERVER.len() as u64) as usize]
    }
}

/// Set (to anything) to keep the controller's log after a run that passed
/// (a failed run always keeps it).
const KEEP_LOG_ENV: &str = "KCONTROL_SOAK_KEEP_LOG";

/// How long the lagging replica serves.
const LAGGING_WINDOW: Duration = Duration::from_secs(3);
/// How long a SIGTERMed controller may take to shut down.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a burst of 429s or 5xx lasts: 0.2 to 3 s. A window, not a
/// count of requests: a count would last as long as the controller's
/// backed-off retries take to use it up (minutes, once only a backed-off
/// list is left asking).
fn burst(rng: &mut Rng) -> Duration {
    Duration::from_millis(rng.range(200, 3_000))
}

/// Injects a server-side fault; returns when a lagging window should end.
fn inject(server: &TestServer, fault: Fault, rng: &mut Rng) -> Option<Instant> {
    let faults = server.faults();
    match fault {
        Fault::WatchDrop => faults.close_all_watches(),
        Fault::WatchExpired => {
            faults.expire_next_watches(rng.range(1, 3));
            faults.close_all_watches();
        }
        Fault::ListExpired => {
            faults.expire_next_lists(1);
            faults.expire_next_watches(2);
            faults.close_all_watches();
        }
        Fault::Compaction => {
            faults.compact();
            faults.close_all_watches();
        }
        Fault::TooManyRequests => faults.fail_for(
            burst(rng),
            Failure::TooManyRequests {
                retry_after_secs: 1,
            },
            FaultScope::default(),
        ),
        Fault::ServerError => {
            let failure = if rng.below(2) == 0 {
                Failure::InternalError
            } else {
                Failure::ServiceUnavailable
            };
            faults.fail_for(burst(rng), failure, FaultScope::default());
        }
        Fault::LaggingReplica => {
            let rv = server.objects().resource_version();
            let lag = rng.range(10, 300);
            faults.serve_from_lagging_replica(rng.range(5, 40), rv.saturating_sub(lag).max(1));
            faults.close_all_watches();
            return Some(Instant::now() + LAGGING_WINDOW);
        }
        Fault::WatchCacheInit => {
            faults
                .initialize_watch_cache(FOO_RESOURCE, Duration::from_millis(rng.range(500, 3_000)));
            faults.close_all_watches();
        }
        Fault::Sigterm | Fault::Sigkill => {}
    }
    None
}

/// The median of five RSS readings 100 ms apart.
fn rss_sample(controller: &Controller) -> u64 {
    let mut readings: Vec<u64> = (0..5)
        .map(|i| {
            if i > 0 {
                std::thread::sleep(Duration::from_millis(100));
            }
            controller.rss()
        })
        .collect();
    readings.sort_unstable();
    readings[2]
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The 1-minute load average, 0 when unknown.
fn load_average() -> f64 {
    crate::report::load_average().unwrap_or(0.0)
}

/// The state of the run the fault loop keeps.
struct Run {
    /// `None` only between stopping a controller and starting the next.
    controller: Option<Controller>,
    /// Controller processes started.
    starts: u64,
    /// SIGTERMs not followed by exit 0 within the timeout, and deaths not
    /// asked for.
    bad_exits: u64,
    last_start: Instant,
    notes: Vec<String>,
}

impl Run {
    /// Stops the controller with `fault`'s signal and starts another.
    fn restart(&mut self, launcher: &Launcher, fault: Fault) -> Result<(), String> {
        // churn goes on while no controller runs
        let old = self.controller.take().ok_or("no controller to restart")?;
        match fault {
            Fault::Sigkill => old.kill()?,
            _ => match old.terminate(SHUTDOWN_TIMEOUT)? {
                Ended::Exited(status) if status.success() => {}
                ended => {
                    self.bad_exits += 1;
                    self.notes.push(format!("SIGTERM: {ended:?}"));
                }
            },
        }
        self.controller = Some(launcher.start()?);
        self.starts += 1;
        self.last_start = Instant::now();
        Ok(())
    }
}

/// Runs the soak and reports its row.
pub fn bench(report: &mut Report, options: &Options) -> Result<(), String> {
    let runtime = crate::controller::server_runtime()?;
    let pool = usize::try_from(options.foos).unwrap_or(usize::MAX);
    let server = runtime.block_on(foo_server(pool, true))?;
    let tag = format!("kcontrol-soak-{}", std::process::id());
    let launcher = Launcher {
        kubeconfig: std::env::temp_dir().join(format!("{tag}.yaml")),
        log: std::env::temp_dir().join(format!("{tag}.log")),
        program: options.controller_bin.clone(),
    };
    server
        .write_kubeconfig(&launcher.kubeconfig)
        .map_err(|e| format!("writing {}: {e}", launcher.kubeconfig.display()))?;
    eprintln!(
        "soak: seed {}, {:?}, controller log {}",
        options.seed,
        options.duration,
        launcher.log.display()
    );
    let load_start = load_average();
    let result = soak(&server, &launcher, options);
    let load_end = load_average();
    let _ = std::fs::remove_file(&launcher.kubeconfig);
    let counters = server.counters();
    runtime.block_on(server.shutdown());
    let outcome = result?;

    let lists = counters.count("list", FOO_RESOURCE) + counters.count("list", "deployments.apps");
    let relists = lists.saturating_sub(2 * outcome.starts);
    let verdict = &outcome.verdict;
    let converged = verdict.converged();
    let growth = outcome.rss_end as f64 / outcome.rss_warm.max(1) as f64;
    let churn = &outcome.churn;
    let fault_kinds: BTreeMap<&str, u64> =
        outcome.faults.iter().map(|(f, n)| (f.name(), *n)).collect();
    let faults: u64 = outcome.faults.values().sum();
    let restarts = outcome.starts - 1;
    report.row(
        row([
            ("scenario", json!("soak")),
            ("duration_s", json!(options.duration.as_secs_f64())),
            ("seed", json!(options.seed)),
            ("foos", json!(options.foos)),
            ("events", json!(churn.events())),
            (
                "churn",
                json!({
                    "creates": churn.creates,
                    "scales": churn.scales,
                    "deletes": churn.deletes,
                    "recreates": churn.recreates,
                    "deployment_deletes": churn.deployment_deletes,
                    "errors": churn.errors,
                }),
            ),
            ("faults", json!(faults)),
            ("fault_kinds", json!(fault_kinds)),
            ("restarts", json!(restarts)),
            ("bad_exits", json!(outcome.bad_exits)),
            ("relists", json!(relists)),
            ("requests", json!(counters.total)),
            ("converged", json!(converged)),
            ("converge_s", json!(outcome.converge.as_secs_f64())),
            ("lost", json!(verdict.lost)),
            ("duplicated", json!(verdict.duplicated)),
            ("orphaned", json!(verdict.orphaned)),
            ("mismatched", json!(verdict.mismatched)),
            ("unsynced", json!(verdict.unsynced)),
            ("foos_at_end", json!(verdict.foos)),
            ("deployments_at_end", json!(verdict.deployments)),
            ("rss_warm_mib", json!(mib(outcome.rss_warm))),
            ("rss_end_mib", json!(mib(outcome.rss_end))),
            ("rss_settled_mib", json!(mib(outcome.rss_settled))),
            ("rss_growth", json!(growth)),
            ("load_start", json!(load_start)),
            ("load_end", json!(load_end)),
        ])
        .with(outcome.timeline.fields()),
    );

    let mut failures = Vec::new();
    if !converged {
        failures.push(format!(
            "not converged within {:?}: {:?}",
            options.settle_timeout, verdict
        ));
    }
    if outcome.bad_exits > 0 {
        failures.push(format!(
            "{} bad controller exits: {}",
            outcome.bad_exits,
            outcome.notes.join("; ")
        ));
    }
    if let Some(max) = options.max_rss_growth {
        if growth > max {
            failures.push(format!("rss_growth {growth:.3} > {max}"));
        }
    }
    if failures.is_empty() {
        if std::env::var_os(KEEP_LOG_ENV).is_none() {
            let _ = std::fs::remove_file(&launcher.log);
        }
        Ok(())
    } else {
        Err(format!(
            "soak failed: {}\nlast lines of the controller log ({}):\n{}",
            failures.join("; "),
            launcher.log.display(),
            process::log_tail(&launcher.log, 30)
        ))
    }
}

/// What [`soak`] measured.
struct Outcome {
    churn: churn::ChurnStats,
    faults: BTreeMap<Fault, u64>,
    starts: u64,
    bad_exits: u64,
    notes: Vec<String>,
    verdict: check::Verdict,
    converge: Duration,
    rss_warm: u64,
    rss_end: u64,
    rss_settled: u64,
    timeline: Timeline,
}

fn soak(server: &TestServer, launcher: &Launcher, options: &Options) -> Result<Outcome, String> {
    let objects = server.objects();
    let mut rng = Rng::new(options.seed);
    let started = Instant::now();
    let mut run = Run {
        controller: Some(launcher.start()?),
        starts: 1,
        bad_exits: 0,
        last_start: Instant::now(),
        notes: Vec::new(),
    };
    let churn = churn::Churn::start(objects.clone(), options.foos, options.rate, rng.next_u64());
    let end = started + options.duration;
    let restarts_until = started + options.duration / 2;
    let mut faults: BTreeMap<Fault, u64> = BTreeMap::new();
    let mut next_fault = started + Duration::from_millis(rng.range(500, 2_500));
    let mut lagging_until: Option<Instant> = None;
    let mut rss_warm = None;
    let mut timeline = Timeline::new(started);
    let run_result = (|| -> Result<(), String> {
        loop {
            let now = Instant::now();
            if now >= end {
                return Ok(());
            }
            timeline.sample(run.controller.as_ref());
            if let Some(status) = run.controller.as_mut().and_then(Controller::exited) {
                run.bad_exits += 1;
                run.notes
                    .push(format!("the controller died by itself: {status}"));
                run.controller = Some(launcher.start()?);
                run.starts += 1;
                run.last_start = Instant::now();
                // its memory is another process's: measure warm-up again
                rss_warm = None;
            }
            if lagging_until.is_some_and(|t| now >= t) {
                server.faults().serve_from_lagging_replica(0, 0);
                lagging_until = None;
            }
            let warm_at = (started + options.duration.mul_f64(0.6))
                .max(run.last_start + options.duration / 10);
            if rss_warm.is_none() && now >= warm_at {
                rss_warm = run.controller.as_ref().map(rss_sample);
                timeline.mark("rss_warm_at_s");
            }
            if now >= next_fault {
                // one fault at a time: what is left of the previous one
                // ends (a 410 counted for the next list would otherwise
                // wait for a controller in backoff and pile up)
                server.faults().reset();
                lagging_until = None;
                let fault = Fault::pick(&mut rng, now < restarts_until);
                match fault {
                    Fault::Sigterm | Fault::Sigkill => run.restart(launcher, fault)?,
                    _ => {
                        if let Some(until) = inject(server, fault, &mut rng) {
                            lagging_until = Some(until);
                        }
                    }
                }
                *faults.entry(fault).or_default() += 1;
                timeline.fault(fault.name());
                next_fault = Instant::now() + Duration::from_millis(rng.range(500, 2_500));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })();
    // the end RSS under the same churn and faults as the warm-up one
    let rss_end = run.controller.as_ref().map_or(0, rss_sample);
    timeline.mark("churn_end_s");
    let churn = churn.stop()?;
    server.faults().reset();
    run_result?;
    let mut controller = run.controller.take().ok_or("no controller at the end")?;
    let rss_warm = rss_warm.unwrap_or(rss_end);

    // settle: churn and faults stopped; poll the state until converged
    let settle_start = Instant::now();
    let mut verdict = check::check_server(&objects, NAMESPACE);
    let mut next_note = Duration::from_secs(5);
    while !verdict.converged() && settle_start.elapsed() < options.settle_timeout {
        if let Some(status) = controller.exited() {
            run.bad_exits += 1;
            run.notes
                .push(format!("the controller died while settling: {status}"));
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        timeline.sample(Some(&controller));
        verdict = check::check_server(&objects, NAMESPACE);
        if settle_start.elapsed() >= next_note {
            eprintln!(
                "soak: settling for {:.0?}: {verdict:?}",
                settle_start.elapsed()
            );
            next_note += Duration::from_secs(5);
        }
    }
    let converge = settle_start.elapsed();
    timeline.mark("settled_at_s");
    let rss_settled = procstat::rss_bytes(controller.pid());
    let Run {
        starts,
        mut bad_exits,
        mut notes,
        ..
    } = run;
    match controller.terminate(SHUTDOWN_TIMEOUT)? {
        Ended::Exited(status) if status.success() => {}
        ended => {
            bad_exits += 1;
            notes.push(format!("final SIGTERM: {ended:?}"));
        }
    }
    Ok(Outcome {
        churn,
        faults,
        starts,
        bad_exits,
        notes,
        verdict,
        converge,
        rss_warm,
        rss_end,
        rss_settled,
        timeline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rng_is_seeded_and_stays_in_range() {
        let a: Vec<u64> = {
            let mut r = Rng::new(7);
            (0..5).map(|_| r.next_u64()).collect()
        };
        let mut r = Rng::new(7);
        assert_eq!(a, (0..5).map(|_| r.next_u64()).collect::<Vec<_>>());
        assert_ne!(a, {
            let mut r = Rng::new(8);
            (0..5).map(|_| r.next_u64()).collect::<Vec<_>>()
        });
        let mut seen = [false; 10];
        for _ in 0..10_000 {
            let v = r.range(1, 10);
            assert!((1..=10).contains(&v));
            seen[(v - 1) as usize] = true;
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
        }
        assert!(seen.iter().all(|s| *s));
        assert_eq!(r.below(0), 0);
    }

    /// Restarts are picked only while allowed, and every kind comes up.
    #[test]
    fn faults_cover_every_kind_and_restarts_only_when_allowed() {
        let mut rng = Rng::new(1);
        let mut seen = BTreeMap::new();
        for _ in 0..2_000 {
            let f = Fault::pick(&mut rng, false);
            assert!(!matches!(f, Fault::Sigterm | Fault::Sigkill));
            *seen.entry(f).or_insert(0) += 1;
        }
        assert_eq!(seen.len(), 8);
        for _ in 0..2_000 {
            *seen.entry(Fault::pick(&mut rng, true)).or_insert(0) += 1;
        }
        assert_eq!(seen.len(), 10);
    }
}
