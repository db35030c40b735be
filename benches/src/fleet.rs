//! The `fleet` scenario (issue 26): many controllers' reflectors against
//! one API server that fails in the ways servers do, each fault played
//! once with kcontrol's pacing and once with the client-go preset
//! ([`PacingPreset::ClientGo`], client-go's rules exactly), without and
//! with an admission limit like priority and fairness (20 requests in
//! flight, 429 with `Retry-After: 1` beyond) on a server that takes
//! [`Options::limited_service`] to answer each request.
//!
//! For each fault the four fleets (two pacings, with and without the
//! limit) run at the same time, each against a testserver of its own in
//! this process, so that each pair shares the machine's load; the faults
//! run one after the other. A fleet is N reflectors (default 200) over
//! the same 100 fixture ConfigMaps, each with its own client (and so its
//! own connection) and `User-Agent`, each popped into a store as an
//! informer would. Once every store is in sync, every watch open and has
//! delivered an event (a change every store has seen), the limit (if any)
//! is set and the fault played ([`schedule`]); when the server is healthy
//! again one object is changed.
//!
//! Row fields:
//! - `requests_per_client_per_sec_failing`: requests the members sent
//!   (refused connections and request-level retries included) from the
//!   fault's start until the server was healthy, per member and second;
//! - `lists`: LIST requests the server answered 200 from the fault's
//!   start to the end of the row (WatchList syncs are not LISTs);
//! - `recovery_seconds`: from the server being healthy until every
//!   member's store holds the server's state, the change included
//!   (`null` if not within 150 s);
//! - `retry_after_violations`: requests the server saw from a member
//!   sooner than the `Retry-After` it had last given that member;
//! - `failing_seconds`, `rejected_by_limit` (429s of the admission limit);
//!   the report adds `load_1m` and `cpus` to every row.

mod member;
mod schedule;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kcontrol_reflector::PacingPreset;
use kcontrol_testserver::{TestServer, Verb};
use serde_json::{json, Value};

use crate::fixtures::{self, NAMESPACE};
use crate::report::{row, Report};
use member::{pacing_name, Member};
pub use schedule::Fault;

/// Objects every member lists and watches.
const OBJECTS: usize = 100;
/// Requests in flight the limited servers admit.
const LIMIT: usize = 20;
/// How long a limited server takes to answer a request by default, in
/// milliseconds (see [`Options::limited_service`]).
pub const LIMITED_SERVICE_MS: u64 = 200;
/// How long a fleet may take to be in sync (before and after a fault).
const SYNC_TIMEOUT: Duration = Duration::from_secs(150);
/// How often stores are compared with the server.
const POLL: Duration = Duration::from_millis(50);

/// The scenario's options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Reflectors per fleet.
    pub clients: usize,
    /// The faults to play, in order.
    pub faults: Vec<Fault>,
    /// How long the limited servers take to answer each request (seat
    /// held): a struggling server, the kind an admission limit protects.
    /// The testserver answers these lists in well under a millisecond, so
    /// without it requests hardly overlap and the limit never fills.
    pub limited_service: Duration,
}

/// What one fleet measured.
struct Outcome {
    fault: Fault,
    pacing: PacingPreset,
    limited: bool,
    clients: usize,
    requests: usize,
    failing: Duration,
    lists: usize,
    recovery: Option<Duration>,
    violations: u64,
    rejected: u64,
}

/// Runs the scenario on a Tokio runtime of two worker threads (servers and
/// fleets share it, as the machine's two cores).
pub fn bench(report: &mut Report, options: &Options) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("starting the Tokio runtime: {e}"))?;
    runtime.block_on(run(report, options))
}

async fn run(report: &mut Report, options: &Options) -> Result<(), String> {
    for fault in &options.faults {
        let runs = [
            (PacingPreset::Kcontrol, false),
            (PacingPreset::ClientGo, false),
            (PacingPreset::Kcontrol, true),
            (PacingPreset::ClientGo, true),
        ];
        let outcomes = futures::future::join_all(
            runs.map(|(pacing, limited)| fleet(*fault, pacing, limited, options)),
        )
        .await;
        for outcome in outcomes {
            report.row(to_row(&outcome?));
        }
    }
    Ok(())
}

/// One fleet through one fault, on a server of its own.
async fn fleet(
    fault: Fault,
    pacing: PacingPreset,
    limited: bool,
    options: &Options,
) -> Result<Outcome, String> {
    let clients = options.clients;
    let server = TestServer::builder()
        .deployment_simulator(None)
        .start()
        .await
        .map_err(|e| format!("starting a testserver: {e}"))?;
    load(&server)?;
    let members = (0..clients)
        .map(|i| Member::start(server.url(), i, pacing, fault.watch_list()))
        .collect::<Result<Vec<_>, String>>()?;
    let want = state(&server)?;
    if in_sync_within(&members, &want).await.is_none() {
        return Err(format!(
            "{} fleet of {clients}: no initial sync",
            pacing_name(pacing)
        ));
    }
    wait_watching(&server, clients).await?;
    // every watch delivers an event before the fault: a watch cut before
    // any event within its first second counts as failed (client-go's
    // "very short watch") and relists, which would make every fault start
    // with a relist of the whole fleet
    change(&server, "seen by every watch before the fault")?;
    let want = state(&server)?;
    if in_sync_within(&members, &want).await.is_none() {
        return Err(format!(
            "{} fleet of {clients}: an event not delivered",
            pacing_name(pacing)
        ));
    }
    if limited {
        server.faults().limit_in_flight(Some(LIMIT));
        server.faults().set_latency(options.limited_service);
    }
    server.clear_request_log();
    let start = Instant::now();
    let healthy = fault.play(server.faults()).await;
    change(&server, "changed once the server was healthy again")?;
    let want = state(&server)?;
    let recovery = in_sync_within(&members, &want).await;
    let requests = members.iter().map(|m| m.sent_between(start, healthy)).sum();
    let counters = server.counters();
    let lists = server
        .request_log()
        .iter()
        .filter(|r| r.verb == Some(Verb::List) && r.status == 200)
        .count();
    futures::future::join_all(members.into_iter().map(Member::stop)).await;
    server.shutdown().await;
    Ok(Outcome {
        fault,
        pacing,
        limited,
        clients,
        requests,
        failing: healthy.saturating_duration_since(start),
        lists,
        recovery,
        violations: counters.retry_after_violations,
        rejected: counters.rejected_in_flight,
    })
}

/// The fixture ConfigMaps in the bench namespace.
fn load(server: &TestServer) -> Result<(), String> {
    let objects = server.objects();
    objects
        .create(
            "namespaces",
            "",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        )
        .map_err(|e| format!("creating namespace {NAMESPACE}: {e}"))?;
    objects
        .bulk_load(
            "configmaps",
            NAMESPACE,
            (0..OBJECTS).map(|i| fixtures::configmap_value(i, 0)),
        )
        .map_err(|e| format!("loading the fixtures: {e}"))?;
    Ok(())
}

/// Sets one object's value to `value` (once the server is healthy: the
/// stores must catch up with it).
fn change(server: &TestServer, value: &str) -> Result<(), String> {
    let mut changed = fixtures::configmap_value(0, 0);
    changed["data"]["alpha"] = Value::from(value);
    if let Some(meta) = changed["metadata"].as_object_mut() {
        meta.remove("resourceVersion");
    }
    server
        .objects()
        .update("configmaps", NAMESPACE, changed)
        .map(drop)
        .map_err(|e| format!("changing an object: {e}"))
}

/// The server's ConfigMaps: key → resourceVersion.
fn state(server: &TestServer) -> Result<BTreeMap<String, String>, String> {
    let list = server
        .objects()
        .list("configmaps", Some(NAMESPACE))
        .map_err(|e| format!("listing the server's objects: {e}"))?;
    Ok(list
        .items
        .iter()
        .map(|o| (o.key().to_owned(), o.resource_version().to_string()))
        .collect())
}

/// How long until every member holds `want`; `None` after [`SYNC_TIMEOUT`].
async fn in_sync_within(members: &[Member], want: &BTreeMap<String, String>) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < SYNC_TIMEOUT {
        if members.iter().all(|m| m.in_sync(want)) {
            return Some(start.elapsed());
        }
        tokio::time::sleep(POLL).await;
    }
    None
}

/// Waits until every member's watch is open.
async fn wait_watching(server: &TestServer, clients: usize) -> Result<(), String> {
    let start = Instant::now();
    while server.counters().active_watches < clients as u64 {
        if start.elapsed() > SYNC_TIMEOUT {
            return Err(format!(
                "{} of {clients} watches open",
                server.counters().active_watches
            ));
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

fn to_row(o: &Outcome) -> crate::report::Row {
    let fault = if o.limited {
        format!("{}-limited", o.fault.name())
    } else {
        o.fault.name().to_owned()
    };
    let failing = o.failing.as_secs_f64().max(1e-9);
    row([
        ("scenario", json!("fleet")),
        ("fault", json!(fault)),
        ("pacing", json!(pacing_name(o.pacing))),
        ("clients", json!(o.clients)),
        (
            "requests_per_client_per_sec_failing",
            json!(o.requests as f64 / o.clients.max(1) as f64 / failing),
        ),
        ("lists", json!(o.lists)),
        (
            "recovery_seconds",
            json!(o.recovery.map(|d| d.as_secs_f64())),
        ),
        ("retry_after_violations", json!(o.violations)),
        ("failing_seconds", json!(o.failing.as_secs_f64())),
        ("rejected_by_limit", json!(o.rejected)),
    ])
}
