//! The `sample-controller` binary run as in production, against one API
//! server (the in-process test server, over real HTTP on 127.0.0.1):
//! several `--leader-elect` replicas of which only one writes Deployments,
//! hand-over after SIGTERM and SIGKILL of the leader, `/readyz` and a
//! `/metrics` scrape parsed as Prometheus text.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kcontrol_client::{Client, RateLimit};
use kcontrol_testserver::{eventually_within, try_eventually_within, TestServer, Verb};
use sample_controller::embedded::{client_for, demo_foo};
use sample_controller::Foo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod support;

use support::{Replica, BINARY, SAFETY};

const LEASE: &str = "sample-controller";

impl Replica {
    fn spawn(kubeconfig: &Path, name: &str, args: &[&str]) -> Self {
        let mut command = support::command(kubeconfig, 200, 400);
        command.args(args).env("RUST_LOG", "info");
        Self::start(name, command)
    }

    fn leader(kubeconfig: &Path, identity: &str, metrics: bool) -> Self {
        let mut args = vec![
            "--leader-elect",
            "--leader-elect-identity",
            identity,
            "--leader-elect-lease-duration",
            "3s",
            "--leader-elect-renew-deadline",
            "2s",
            "--leader-elect-retry-period",
            "1s",
        ];
        if metrics {
            args.extend(["--metrics-addr", "127.0.0.1:0"]);
        }
        Self::spawn(kubeconfig, identity, &args)
    }

    /// The address of its metrics server, from its log.
    async fn metrics_addr(&self) -> SocketAddr {
        let line = self.wait_for_line(&["serving /healthz", "bound="]).await;
        let bound = line.split("bound=").nth(1).unwrap();
        bound.split_whitespace().next().unwrap().parse().unwrap()
    }
}

struct Setup {
    server: TestServer,
    client: Client,
    dir: PathBuf,
    kubeconfig: PathBuf,
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn setup(name: &str, install_crd: bool) -> Setup {
    let server = TestServer::builder()
        .deployment_simulator(Some(Duration::from_millis(20)))
        .start()
        .await
        .unwrap();
    let client = client_for(
        &server,
        RateLimit {
            qps: 500.0,
            burst: 1000,
        },
    )
    .unwrap();
    if install_crd {
        sample_controller::artifacts::install_foo_crd(&client, Duration::from_secs(30))
            .await
            .unwrap();
    }
    let dir = std::env::temp_dir().join(format!("sc-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    Setup {
        server,
        client,
        dir,
        kubeconfig,
    }
}

async fn create_foo(client: &Client, i: u32) {
    let api: kcontrol_client::Api<Foo> =
        kcontrol_client::Api::namespaced(client.clone(), "default");
    api.create(&kcontrol_client::PostParams::default(), &demo_foo(i))
        .await
        .unwrap();
}

fn holder(server: &TestServer) -> Option<String> {
    let lease = server
        .objects()
        .get("leases.coordination.k8s.io", "default", LEASE)?;
    lease.value()["spec"]["holderIdentity"]
        .as_str()
        .map(str::to_owned)
}

async fn wait_holder(server: &TestServer, identity: &str, replica: &Replica) {
    let held = try_eventually_within(
        format!("{identity} to hold the lease"),
        SAFETY,
        async || holder(server).as_deref() == Some(identity),
    )
    .await;
    if let Err(e) = held {
        panic!("{e} (holder {:?}):\n{}", holder(server), replica.stderr());
    }
}

async fn wait_deployment(server: &TestServer, i: u32) {
    let name = format!("example-foo-{i}");
    eventually_within(format!("Deployment {name}"), SAFETY, async || {
        server
            .objects()
            .get("deployments.apps", "default", &name)
            .is_some()
    })
    .await;
}

/// The identities that wrote Deployments, in the order of the writes.
fn deployment_writers(server: &TestServer) -> Vec<String> {
    server
        .request_log()
        .into_iter()
        .filter(|r| {
            r.resource.as_deref() == Some("deployments.apps")
                && matches!(
                    r.verb,
                    Some(Verb::Create | Verb::Update | Verb::Patch | Verb::Delete)
                )
        })
        .map(|r| {
            r.user_agent
                .split("leader-elect/")
                .nth(1)
                .unwrap_or("<no identity>")
                .to_owned()
        })
        .collect()
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_writes_and_sigterm_and_sigkill_hand_over() {
    let s = setup("le", true).await;
    for i in 1..=3 {
        create_foo(&s.client, i).await;
    }
    let mut a = Replica::leader(&s.kubeconfig, "a", false);
    wait_holder(&s.server, "a", &a).await;
    for i in 1..=3 {
        wait_deployment(&s.server, i).await;
    }
    let b = Replica::leader(&s.kubeconfig, "b", false);
    b.wait_for_line(&["new leader observed", "holder=a"]).await;
    b.wait_for_line(&["caches synced"]).await;
    create_foo(&s.client, 4).await;
    wait_deployment(&s.server, 4).await;

    // SIGTERM: a drains, releases the lease, b takes over at its next try
    // (that a release hands over before the lease expires is the library's
    // leader_election test; times are the benchmarks' business)
    a.signal("-TERM");
    wait_holder(&s.server, "b", &b).await;
    assert_eq!(a.wait_exit().await.code(), Some(0), "{}", a.stderr());
    assert!(
        a.stderr().contains("released the leader lease"),
        "{}",
        a.stderr()
    );
    create_foo(&s.client, 5).await;
    wait_deployment(&s.server, 5).await;

    // SIGKILL: nothing released; c takes over once the lease expires
    let c = Replica::leader(&s.kubeconfig, "c", false);
    c.wait_for_line(&["new leader observed", "holder=b"]).await;
    c.wait_for_line(&["caches synced"]).await;
    b.signal("-KILL");
    wait_holder(&s.server, "c", &c).await;
    create_foo(&s.client, 6).await;
    wait_deployment(&s.server, 6).await;

    // one writer at a time: a's writes, then b's, then c's, never interleaved
    // (the request log gets a write once it is answered: the Deployment can
    // be in the store a moment before c's write is in the log)
    let writers = eventually_within("c's write in the request log", SAFETY, async || {
        let writers = deployment_writers(&s.server);
        writers.iter().any(|w| w == "c").then_some(writers)
    })
    .await;
    let mut phases: Vec<&str> = writers.iter().map(String::as_str).collect();
    phases.dedup();
    assert_eq!(phases, ["a", "b", "c"], "{writers:?}");
    drop(c);
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_renewals_fail_stops_writing_before_its_renew_deadline() {
    let s = setup("lost", true).await;
    create_foo(&s.client, 1).await;
    let mut a = Replica::leader(&s.kubeconfig, "a", false);
    wait_holder(&s.server, "a", &a).await;
    wait_deployment(&s.server, 1).await;
    // every Lease write fails from now on
    s.server.faults().fail_next_matching(
        1_000_000,
        kcontrol_testserver::Failure::InternalError,
        kcontrol_testserver::FaultScope {
            verb: Some(Verb::Update),
            resource: Some("leases".into()),
        },
    );
    let status = a.wait_exit().await;
    assert_eq!(status.code(), Some(1), "{}", a.stderr());
    let stderr = a.stderr();
    assert!(stderr.contains("leader election lost"), "{stderr}");
    // it stopped before the lease it last renewed expired
    let lease = s
        .server
        .objects()
        .get("leases.coordination.k8s.io", "default", LEASE)
        .unwrap();
    let renewed: k8s_openapi::jiff::Timestamp = lease.value()["spec"]["renewTime"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let seconds = |t: k8s_openapi::jiff::Timestamp| {
        t.as_second() as f64 + f64::from(t.subsec_nanosecond()) / 1e9
    };
    let expires = seconds(renewed) + 3.0;
    // when its workers stopped, by its own log's clock (the same machine's)
    let line = stderr
        .lines()
        .find(|l| l.contains("leader election lost: stopping the workers"))
        .unwrap_or_else(|| panic!("{stderr}"));
    let stopped: k8s_openapi::jiff::Timestamp =
        line.split_whitespace().next().unwrap().parse().unwrap();
    assert!(
        seconds(stopped) < expires,
        "stopped at {stopped}, after the lease expired ({renewed} + 3s)"
    );
    // and at its renew deadline (2 s) after the last renewal (plus slack
    // for a loaded machine's timers)
    assert!(
        seconds(stopped) - seconds(renewed) <= 2.5,
        "stopped at {stopped}, {renewed} renewed last"
    );
    // the exited leader wrote nothing more: a Foo created now gets no Deployment
    let writes = deployment_writers(&s.server).len();
    create_foo(&s.client, 2).await;
    assert_eq!(deployment_writers(&s.server).len(), writes);
}

/// (status code, body) of a GET.
async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let code = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}

/// Samples of a scrape: `name{labels}` → value, parsed as Prometheus text.
fn scrape_samples(text: &str) -> BTreeMap<String, f64> {
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text");
    let mut samples = BTreeMap::new();
    for s in scrape.samples {
        let value = match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => continue,
        };
        let mut labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        labels.sort();
        samples.insert(format!("{}{{{}}}", s.metric, labels.join(",")), value);
    }
    samples
}

async fn text_of(addr: SocketAddr) -> String {
    get(addr, "/metrics").await.1
}

/// Scrapes `/metrics` until `done` holds for its samples and text, and
/// returns those samples; panics with `what` and the last text after
/// [`SAFETY`].
async fn scrape_until(
    addr: SocketAddr,
    what: &str,
    done: impl Fn(&BTreeMap<String, f64>, &str) -> bool,
) -> BTreeMap<String, f64> {
    let mut last = String::new();
    let scraped = try_eventually_within(what, SAFETY, async || {
        last = text_of(addr).await;
        let samples = scrape_samples(&last);
        done(&samples, &last).then_some(samples)
    })
    .await;
    scraped.unwrap_or_else(|e| panic!("{e}:\n{last}"))
}

/// The observation count of the histogram `metric` with label `key=value`.
fn histogram_count(text: &str, metric: &str, key: &str, value: &str) -> u64 {
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text");
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric && s.labels.get(key) == Some(value))
        .filter_map(|s| match &s.value {
            prometheus_parse::Value::Histogram(buckets) => buckets.last().map(|b| b.count as u64),
            _ => None,
        })
        .sum()
}

/// The sum of the samples of `metric` whose labels contain every one of `labels`.
fn sum(samples: &BTreeMap<String, f64>, metric: &str, labels: &[&str]) -> f64 {
    samples
        .iter()
        .filter(|(k, _)| {
            k.split_once('{').is_some_and(|(name, rest)| {
                name == metric && labels.iter().all(|l| rest.contains(l))
            })
        })
        .map(|(_, v)| v)
        .sum()
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_follows_the_caches_and_metrics_move_as_objects_flow() {
    // no Foo CRD yet: the Foo informer cannot list, so not ready
    let s = setup("metrics", false).await;
    let mut a = Replica::leader(&s.kubeconfig, "a", true);
    let addr = a.metrics_addr().await;
    assert_eq!(get(addr, "/healthz").await.0, 200);
    let (code, body) = get(addr, "/readyz").await;
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("[-]informer-foos not ready"), "{body}");

    sample_controller::artifacts::install_foo_crd(&s.client, Duration::from_secs(30))
        .await
        .unwrap();
    let mut body = String::new();
    let ready = try_eventually_within("/readyz to answer 200", SAFETY, async || {
        let (code, text) = get(addr, "/readyz").await;
        body = text;
        code == 200
    })
    .await;
    assert!(ready.is_ok(), "never ready: {body}");
    wait_holder(&s.server, "a", &a).await;
    // The Lease names its holder as soon as the server stored it; the
    // elector sets its gauge once the answer is back: wait for the gauge.
    let before = scrape_until(addr, "never led by its gauge", |m, _| {
        sum(
            m,
            "leader_election_master_status",
            &["name=sample-controller"],
        ) == 1.0
    })
    .await;
    for i in 1..=5 {
        create_foo(&s.client, i).await;
    }
    for i in 1..=5 {
        wait_deployment(&s.server, i).await;
    }
    // the work queue took the keys, the reflectors listed and watched,
    // the informers hold the objects, the client counted its requests
    let checks = |m: &BTreeMap<String, f64>, text: &str| {
        sum(m, "workqueue_adds_total", &["name=foos"]) >= 5.0
            && sum(m, "informer_notifications_total", &["name=foos"]) >= 5.0
            && sum(m, "reflector_lists_total", &["name=foos"]) >= 1.0
            && sum(
                m,
                "reflector_watch_events_total",
                &["name=foos", "type=ADDED"],
            ) >= 5.0
            && sum(m, "informer_objects", &["name=foos"]) >= 5.0
            && sum(m, "informer_objects", &["name=deployments"]) >= 5.0
            && sum(
                m,
                "rest_client_requests_total",
                &["method=POST", "code=201"],
            ) >= 5.0
            && sum(m, "sample_controller_deployments_created_total", &[]) >= 5.0
            && histogram_count(
                text,
                "rest_client_request_duration_seconds",
                "verb",
                "create",
            ) >= 5
    };
    // The Deployments' status updates enqueue their Foos again after
    // the creates were counted, so the queue is drained once it is seen
    // empty, not at the first scrape where the other figures moved.
    let drained = |m: &BTreeMap<String, f64>| sum(m, "workqueue_depth", &["name=foos"]) == 0.0;
    let after = scrape_until(
        addr,
        "metrics did not move or the queue never drained",
        |m, text| checks(m, text) && drained(m),
    )
    .await;
    assert!(
        !checks(&before, ""),
        "the figures moved from before: {before:?}"
    );
    assert!(
        sum(&after, "reflector_last_resource_version", &["name=foos"])
            > sum(&before, "reflector_last_resource_version", &["name=foos"]),
        "{after:?}"
    );

    // SIGTERM: a graceful exit (/readyz turning 503 on shutdown: HL3, controller/tests/it/health.rs)
    a.signal("-TERM");
    assert_eq!(a.wait_exit().await.code(), Some(0), "{}", a.stderr());
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_the_sync_key_and_the_request_verb_and_resource() {
    let s = setup("json", true).await;
    let mut command = Command::new(BINARY);
    command
        .arg("--kubeconfig")
        .arg(&s.kubeconfig)
        .args(["--namespace", "default", "--log-format", "json"])
        .env(
            "RUST_LOG",
            "info,sample_controller=debug,kcontrol_client=trace",
        );
    let replica = Replica::start("json", command);
    create_foo(&s.client, 1).await;
    replica.wait_for_line(&["created Deployment"]).await;
    let lines = replica.lines.lock().unwrap().clone();
    let events: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let created = events
        .iter()
        .find(|e| e["fields"]["message"] == "created Deployment")
        .unwrap();
    assert_eq!(created["span"]["name"], "sync", "{created}");
    assert_eq!(created["span"]["key"], "default/example-foo-1", "{created}");
    let request = events
        .iter()
        .find(|e| {
            e["span"]["name"] == "api_request"
                && e["span"]["verb"] == "create"
                && e["span"]["resource"] == "deployments"
        })
        .unwrap_or_else(|| panic!("no api_request span for the create:\n{}", lines.join("\n")));
    assert!(
        request["spans"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "sync"),
        "{request}"
    );
}
