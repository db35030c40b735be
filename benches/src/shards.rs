//! `kcontrol-bench shards`: the sample-controller sharded across three
//! replicas (separate processes, `--shard-ring`) against the testserver
//! with `--objects` Foos (default 30,000), beside one unsharded replica on
//! the same Foos in the same run. Every reconcile goes to a shared
//! `--reconcile-log`. One replica is SIGKILLed, then one is added:
//!
//! - `per_replica_peak_rss_ratio`: the largest sharded replica's peak RSS
//!   (`VmHWM`) ÷ the unsharded replica's;
//! - `failover_seconds`: from the SIGKILL until every Foo the dead replica
//!   owned was reconciled by another (`lease_seconds` is the member
//!   Lease's duration);
//! - `double_reconciles`: pairs of overlapping reconciles of one key on two
//!   replicas in the log; `unowned`: Foos without a shard label at the end;
//! - `moved_fraction_on_join`: Foos whose owner changed when the fourth
//!   replica joined (ideal 1/4 for three live members plus the newcomer).
//!
//! To look into a run: `KCONTROL_SHARDS_LOG` sets the replicas' `RUST_LOG`
//! (default `warn`; e.g. `warn,kcontrol_controller::sharding=info` logs
//! the sharder's start and cache sync), and with `KCONTROL_SHARDS_KEEP`
//! set the run's directory (replica logs, reconcile log) is kept in the
//! temporary directory. `KCONTROL_SHARDS_BIN` runs every replica as
//! that program (a standalone `sample-controller` build, as deployed)
//! instead of this binary's embedded copy.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kcontrol_controller::sharding::ring;
use kcontrol_testserver::{Objects, TestServer};
use sample_controller::reconcile_log::{now_nanos, overlaps, parse, LogTail};
use serde_json::json;

use crate::controller::{
    child_command, converged, foo_json, foo_server, server_runtime, wait_for, FOO_RESOURCE,
    NAMESPACE,
};
use crate::report::{row, Report};
use crate::soak::process::CHILD_ARG;

const RING: &str = "bench";
const SHARD: &str = "shard.kcontrol.dev/bench";
const DRAIN: &str = "drain.kcontrol.dev/bench";
/// The member Leases' timings: duration, renew deadline, retry period.
const LEASE: (u64, u64, u64) = (5, 3, 1);

/// One controller process.
struct Replica {
    name: String,
    child: Child,
}

impl Replica {
    fn spawn(kubeconfig: &Path, dir: &Path, name: &str, sharded: bool) -> Result<Self, String> {
        let mut command = match std::env::var_os("KCONTROL_SHARDS_BIN") {
            Some(bin) => Command::new(bin),
            None => {
                let mut command = child_command()?;
                command.arg(CHILD_ARG);
                command
            }
        };
        let out =
            std::fs::File::create(dir.join(format!("{name}.log"))).map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        command
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "--namespace",
                NAMESPACE,
                "--workers",
                "4",
                "--resync-period",
                "0",
            ])
            .args(["--qps", "5000", "--burst", "10000"])
            .env(
                "RUST_LOG",
                std::env::var("KCONTROL_SHARDS_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        if sharded {
            command
                .args(["--shard-ring", RING, "--shard-member", name])
                .arg("--leader-elect-lease-duration")
                .arg(format!("{}s", LEASE.0))
                .arg("--leader-elect-renew-deadline")
                .arg(format!("{}s", LEASE.1))
                .arg("--leader-elect-retry-period")
                .arg(format!("{}s", LEASE.2))
                .arg("--reconcile-log")
                .arg(dir.join("reconciles.log"));
        }
        let child = command
            .spawn()
            .map_err(|e| format!("starting {name}: {e}"))?;
        Ok(Self {
            name: name.to_owned(),
            child,
        })
    }

    /// Peak resident memory so far.
    fn peak_rss(&self) -> u64 {
        crate::rss::process_bytes(self.child.id(), "VmHWM:")
    }

    fn terminate(mut self) -> Result<(), String> {
        let pid = self.child.id().to_string();
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .map_err(|e| format!("kill: {e}"))?;
        let status = self.child.wait().map_err(|e| e.to_string())?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("{} exited with {status}", self.name))
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Each Foo's owner (shard label) and whether it is draining.
fn owners(objects: &Objects) -> BTreeMap<String, (Option<String>, bool)> {
    objects
        .list(FOO_RESOURCE, Some(NAMESPACE))
        .map(|l| l.items)
        .unwrap_or_default()
        .iter()
        .map(|o| {
            let labels = &o.value()["metadata"]["labels"];
            (
                format!("{NAMESPACE}/{}", o.name()),
                (
                    labels[SHARD].as_str().map(str::to_owned),
                    labels.get(DRAIN).is_some(),
                ),
            )
        })
        .collect()
}

/// Whether all `n` Foos are owned, undrained, by the member the ring
/// assigns each to among `live`: the end of every move, not a moment
/// between two of them (a Foo already moved while others wait for their
/// drain).
fn settled(objects: &Objects, n: usize, live: &[&str]) -> bool {
    let now = owners(objects);
    now.len() == n
        && now.iter().all(|(key, (s, d))| {
            !d && s.is_some() && s.as_deref() == ring::assign(key, live.iter().copied())
        })
}

fn server_with_foos(
    runtime: &tokio::runtime::Runtime,
    n: usize,
    dir: &Path,
) -> Result<(TestServer, PathBuf), String> {
    let server = runtime.block_on(foo_server(n, true))?;
    for i in 0..n {
        server
            .objects()
            .create(FOO_RESOURCE, NAMESPACE, foo_json(i))
            .map_err(|e| format!("creating Foo {i}: {e}"))?;
    }
    let kubeconfig = dir.join("kubeconfig.yaml");
    server
        .write_kubeconfig(&kubeconfig)
        .map_err(|e| e.to_string())?;
    Ok((server, kubeconfig))
}

/// The unsharded replica's peak RSS, converging `n` Foos.
fn reference(
    runtime: &tokio::runtime::Runtime,
    n: usize,
    dir: &Path,
    timeout: Duration,
) -> Result<u64, String> {
    let (server, kubeconfig) = server_with_foos(runtime, n, dir)?;
    let single = Replica::spawn(&kubeconfig, dir, "single", false)?;
    wait_for("the unsharded replica to converge", timeout, || {
        converged(&server.objects()) == n
    })?;
    let peak = single.peak_rss();
    single.terminate()?;
    runtime.block_on(server.shutdown());
    Ok(peak)
}

/// The member names `names` and `extra`, as `settled` takes them.
fn live<'a>(names: &'a [String], extra: Option<&'a str>) -> Vec<&'a str> {
    names.iter().map(String::as_str).chain(extra).collect()
}

/// Runs the scenario with `n` Foos.
pub fn bench(report: &mut Report, n: usize) -> Result<(), String> {
    let runtime = server_runtime()?;
    let dir = std::env::temp_dir().join(format!("kcontrol-bench-shards-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let timeout =
        Duration::from_secs(120) + Duration::from_millis(20) * u32::try_from(n).unwrap_or(u32::MAX);
    let reference_peak = reference(&runtime, n, &dir, timeout)?;

    let (server, kubeconfig) = server_with_foos(&runtime, n, &dir)?;
    let objects = server.objects();
    let mut replicas: Vec<Replica> = ["s1", "s2", "s3"]
        .iter()
        .map(|name| Replica::spawn(&kubeconfig, &dir, name, true))
        .collect::<Result<_, _>>()?;
    wait_for("the sharded replicas to converge", timeout, || {
        settled(&objects, n, &["s1", "s2", "s3"]) && converged(&objects) == n
    })?;
    let peaks: Vec<u64> = replicas.iter().map(Replica::peak_rss).collect();
    let shares = owners(&objects);
    let mut per_member: HashMap<String, usize> = HashMap::new();
    for (owner, _) in shares.values() {
        *per_member
            .entry(owner.clone().unwrap_or_default())
            .or_default() += 1;
    }
    let largest_share = per_member.values().copied().max().unwrap_or(0) as f64 / n as f64;

    // SIGKILL the sharder's replica (the worst case: the sharder fails
    // over too); its Foos must be reconciled by the others
    let victim = objects
        .get(
            "leases.coordination.k8s.io",
            NAMESPACE,
            &format!("{RING}-sharder"),
        )
        .and_then(|l| {
            l.value()["spec"]["holderIdentity"]
                .as_str()
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "s2".to_owned());
    let index = replicas
        .iter()
        .position(|r| r.name == victim)
        .ok_or("no sharder replica")?;
    let survivors: Vec<String> = replicas
        .iter()
        .map(|r| r.name.clone())
        .filter(|r| *r != victim)
        .collect();
    let orphans: Vec<String> = shares
        .iter()
        .filter(|(_, (s, _))| s.as_deref() == Some(victim.as_str()))
        .map(|(k, _)| k.clone())
        .collect();
    let dead = replicas.remove(index);
    let killed = now_nanos();
    drop(dead);
    let log = dir.join("reconciles.log");
    // the log grows to millions of bytes: read only what each poll adds,
    // so that the harness does not take the CPU the survivors need
    let mut tail = LogTail::new(&log);
    let mut first: HashMap<String, u128> = HashMap::new();
    wait_for(
        "the dead replica's Foos to be reconciled",
        Duration::from_secs(LEASE.0 + 120),
        || {
            for r in tail.read_new().unwrap_or_default() {
                if r.replica != victim && r.start > killed {
                    let at = first.entry(r.key).or_insert(r.start);
                    *at = (*at).min(r.start);
                }
            }
            orphans.iter().all(|k| first.contains_key(k))
        },
    )?;
    let starts: Vec<u128> = orphans
        .iter()
        .filter_map(|k| first.get(k))
        .copied()
        .collect();
    let failover = starts.iter().max().copied().unwrap_or(killed) - killed;
    let failover_first = starts.iter().min().copied().unwrap_or(killed) - killed;
    wait_for("the survivors to own every Foo", timeout, || {
        settled(&objects, n, &live(&survivors, None))
    })?;

    // s4 joins: the share that moves
    let before = owners(&objects);
    replicas.push(Replica::spawn(&kubeconfig, &dir, "s4", true)?);
    wait_for("the joined ring to settle", timeout, || {
        settled(&objects, n, &live(&survivors, Some("s4")))
    })?;
    let after = owners(&objects);
    let moved = before
        .iter()
        .filter(|(k, v)| after.get(*k).map(|a| &a.0) != Some(&v.0))
        .count();

    for replica in replicas {
        replica.terminate()?;
    }
    let all = parse(&std::fs::read_to_string(&log).unwrap_or_default());
    let double = overlaps(&all).len();
    let unowned = owners(&objects)
        .values()
        .filter(|(s, _)| s.is_none())
        .count();
    runtime.block_on(server.shutdown());
    if std::env::var_os("KCONTROL_SHARDS_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let peak = peaks.iter().copied().max().unwrap_or(0);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    report.row(row([
        ("scenario", json!("shards")),
        ("replicas", json!(3)),
        ("objects", json!(n)),
        (
            "per_replica_peak_rss_ratio",
            json!(round(peak as f64 / reference_peak.max(1) as f64)),
        ),
        ("largest_share", json!(round(largest_share))),
        ("failover_seconds", json!(round(failover as f64 / 1e9))),
        (
            "failover_first_seconds",
            json!(round(failover_first as f64 / 1e9)),
        ),
        ("lease_seconds", json!(LEASE.0)),
        ("killed", json!(victim)),
        ("double_reconciles", json!(double)),
        ("unowned", json!(unowned)),
        (
            "moved_fraction_on_join",
            json!(round(moved as f64 / n as f64)),
        ),
        ("reconciles", json!(all.len())),
        (
            "reference_peak_mib",
            json!(round(reference_peak as f64 / 1048576.0)),
        ),
        (
            "replica_peaks_mib",
            json!(peaks
                .iter()
                .map(|p| round(*p as f64 / 1048576.0))
                .collect::<Vec<_>>()),
        ),
        (
            "load",
            json!(load
                .split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")),
        ),
    ]));
    Ok(())
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
