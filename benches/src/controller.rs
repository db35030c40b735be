//! The `controller` scenario: the sample-controller converging N Foos
//! (1,000 and 10,000; `KCONTROL_CONTROLLER_FOOS=1000,5000` to choose), from
//! their creation until every Foo's status reports all its replicas
//! available; then a forced relist, and the memory left once it settles.
//!
//! Two processes, so each one's CPU time and memory are its own:
//! - this one runs kcontrol-testserver (HTTPS on loopback, Deployment
//!   simulator on) and creates the Foos in its store;
//! - a child (this binary again, `__controller-child`) runs the controller
//!   exactly as the `sample-controller` binary does, with the client's QPS
//!   limit raised to 100,000, 2 workers and a 30 s resync.
//!
//! Measured: wall time; API requests and writes per Foo (the server's
//! counters); the controller's CPU time per Foo (the child's
//! `/proc/<pid>/stat`, from its first Foo to convergence) and the
//! server's (this process less the thread that creates Foos and polls);
//! the controller's peak RSS; its RSS before a relist of everything (the
//! server compacts its history and ends every watch), at the relist's
//! peak, and 10 s later. The allocator is this binary's (jemalloc by
//! default, with the sample-controller binary's options unless
//! `_RJEM_MALLOC_CONF` is set; the system's with `--no-default-features`).
//!
//! Reference, in the same run: a bare client doing the happy path's three
//! writes per Foo (create the Deployment, write the status, create an
//! Event) with the same two-way concurrency against a fresh server: the
//! floor a controller cannot beat on this server.
// the resource is named Foo
#![allow(clippy::disallowed_names)]

pub(crate) mod procstat;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Event;
use kcontrol_client::{Api, Client, Config, Kubeconfig, KubeconfigOptions, PostParams, RateLimit};
use kcontrol_testserver::{Objects, TestServer};
use sample_controller::controller::{Controller, ControllerOptions};
use sample_controller::{deployment, Foo, FooStatus};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::report::{row, Report};

/// The hidden first argument that makes this binary the controller child.
pub const CHILD_ARG: &str = "__controller-child";

/// The variable jemalloc (as tikv-jemallocator builds it) reads its
/// options from.
const JEMALLOC_CONF_ENV: &str = "_RJEM_MALLOC_CONF";

pub(crate) const FOO_RESOURCE: &str = "foos.samplecontroller.k8s.io";
pub(crate) const NAMESPACE: &str = "default";
const WORKERS: usize = 2;
const QPS: f64 = 100_000.0;
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(900);
const SETTLE: Duration = Duration::from_secs(10);

fn allocator() -> &'static str {
    if cfg!(feature = "jemalloc") {
        "jemalloc"
    } else {
        "system"
    }
}

fn sizes() -> Vec<usize> {
    std::env::var("KCONTROL_CONTROLLER_FOOS")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .filter(|v: &Vec<usize>| !v.is_empty())
        .unwrap_or_else(|| vec![1_000, 10_000])
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The runtime the in-process testserver of a controller scenario runs on.
pub fn server_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("testserver")
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))
}

/// Runs the scenario for each size.
pub fn bench(report: &mut Report) -> Result<(), String> {
    let runtime = server_runtime()?;
    for n in sizes() {
        let run = run_controller(&runtime, n)?;
        let reference = runtime.block_on(reference(n))?;
        let per_foo = |d: Duration| d.as_secs_f64() * 1000.0 / n as f64;
        report.row(row([
            ("scenario", json!("controller")),
            ("foos", json!(n)),
            ("wall_s", json!(run.wall.as_secs_f64())),
            ("reference_wall_s", json!(reference.as_secs_f64())),
            (
                "ratio",
                json!(run.wall.as_secs_f64() / reference.as_secs_f64()),
            ),
            ("requests_per_foo", json!(run.requests as f64 / n as f64)),
            ("writes_per_foo", json!(run.writes as f64 / n as f64)),
            ("ctl_cpu_ms_per_foo", json!(per_foo(run.controller_cpu))),
            ("srv_cpu_ms_per_foo", json!(per_foo(run.server_cpu))),
            ("ctl_idle_rss_mib", json!(mib(run.idle_rss))),
            ("ctl_peak_rss_mib", json!(mib(run.peak_rss))),
            ("allocator", json!(allocator())),
        ]));
        report.row(row([
            ("scenario", json!("controller-relist")),
            ("foos", json!(n)),
            ("rss_before_mib", json!(mib(run.rss_before_relist))),
            ("relist_peak_mib", json!(mib(run.relist_peak))),
            ("rss_settled_mib", json!(mib(run.rss_settled))),
            ("relist_s", json!(run.relist.as_secs_f64())),
            ("allocator", json!(allocator())),
        ]));
        eprintln!("controller {n}: writes by kind: {}", run.write_kinds);
    }
    Ok(())
}

/// Figures of one run.
struct Run {
    wall: Duration,
    requests: u64,
    writes: u64,
    write_kinds: String,
    controller_cpu: Duration,
    server_cpu: Duration,
    /// The controller's RSS once its caches synced, before the first Foo.
    idle_rss: u64,
    peak_rss: u64,
    rss_before_relist: u64,
    relist_peak: u64,
    rss_settled: u64,
    relist: Duration,
}

/// The child, reading its stdout lines on a thread.
struct ControllerChild {
    child: Child,
    lines: mpsc::Receiver<String>,
    pid: String,
}

impl ControllerChild {
    fn spawn(kubeconfig: &std::path::Path) -> Result<Self, String> {
        let mut child = child_command()?
            .arg(CHILD_ARG)
            .arg(kubeconfig)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("spawning the controller: {e}"))?;
        let stdout = child.stdout.take().ok_or("no child stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let pid = child.id().to_string();
        Ok(Self { child, lines, pid })
    }

    fn expect(&self, want: &str, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line == want => return Ok(()),
                Ok(_) => {}
                Err(_) => {
                    return Err(format!(
                        "the controller did not say {want:?} in {timeout:?}"
                    ))
                }
            }
        }
    }

    /// Closes stdin (the child's signal to shut down gracefully) and waits.
    fn stop(mut self) -> Result<(), String> {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => return Err(format!("the controller exited with {status}")),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(None) => {
                    let _ = self.child.kill();
                    return Err("the controller did not shut down within 60 s".to_owned());
                }
                Err(e) => return Err(format!("waiting for the controller: {e}")),
            }
        }
    }
}

/// A command running this binary again (as a child process that runs a
/// controller), with the sample-controller binary's jemalloc options
/// unless the caller chose others in `_RJEM_MALLOC_CONF`.
pub(crate) fn child_command() -> Result<Command, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut command = Command::new(exe);
    if std::env::var_os(JEMALLOC_CONF_ENV).is_none() {
        let conf = String::from_utf8_lossy(sample_controller::JEMALLOC_CONF);
        command.env(JEMALLOC_CONF_ENV, conf.trim_end_matches('\0'));
    }
    Ok(command)
}

/// A TLS testserver sized for `n` Foos, without a request log, with the
/// Foo CRD installed; `simulate_deployments` keeps the Deployment status
/// simulator (the server's default) on.
pub(crate) async fn foo_server(n: usize, simulate_deployments: bool) -> Result<TestServer, String> {
    let builder = TestServer::builder()
        .tls(true)
        .history_size(n * 8 + 1_000)
        .request_log_capacity(0);
    let builder = if simulate_deployments {
        builder
    } else {
        builder.deployment_simulator(None)
    };
    let server = builder
        .start()
        .await
        .map_err(|e| format!("testserver: {e}"))?;
    server
        .objects()
        .create(
            "customresourcedefinitions.apiextensions.k8s.io",
            "",
            crd_json()?,
        )
        .map_err(|e| format!("installing the CRD: {e}"))?;
    Ok(server)
}

pub(crate) fn crd_json() -> Result<Value, String> {
    serde_yaml::from_str(sample_controller::artifacts::CRD_YAML)
        .map_err(|e| format!("crd.yaml: {e}"))
}

pub(crate) fn foo_json(i: usize) -> Value {
    json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "metadata": {"name": format!("foo-{i}"), "namespace": NAMESPACE},
        "spec": {"deploymentName": format!("foo-{i}"), "replicas": 1 + i % 3},
    })
}

/// How many Foos report all their replicas available, with a Deployment
/// that has them (read from the store, as JSON: no decode cost).
pub(crate) fn converged(objects: &Objects) -> usize {
    let available: HashMap<String, i64> = objects
        .list("deployments.apps", Some(NAMESPACE))
        .map(|l| l.items)
        .unwrap_or_default()
        .iter()
        .map(|d| {
            let v = d.value();
            (
                d.name().to_owned(),
                v["status"]["availableReplicas"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    objects
        .list(FOO_RESOURCE, Some(NAMESPACE))
        .map(|l| l.items)
        .unwrap_or_default()
        .iter()
        .filter(|f| {
            let v = f.value();
            let want = v["spec"]["replicas"].as_i64().unwrap_or(1);
            let name = v["spec"]["deploymentName"].as_str().unwrap_or("");
            v["status"]["availableReplicas"].as_i64() == Some(want)
                && available.get(name) == Some(&want)
        })
        .count()
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    procstat::cpu_time("thread-self")
}

pub(crate) fn wait_for(
    what: &str,
    timeout: Duration,
    mut done: impl FnMut() -> bool,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    while !done() {
        if Instant::now() >= deadline {
            return Err(format!("timed out after {timeout:?} waiting for {what}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

fn run_controller(runtime: &tokio::runtime::Runtime, n: usize) -> Result<Run, String> {
    let server = runtime.block_on(foo_server(n, true))?;
    let objects = server.objects();
    let _guard = runtime.enter();
    let kubeconfig =
        std::env::temp_dir().join(format!("kcontrol-bench-{}-{n}.yaml", std::process::id()));
    server
        .write_kubeconfig(&kubeconfig)
        .map_err(|e| format!("writing {}: {e}", kubeconfig.display()))?;
    let child = ControllerChild::spawn(&kubeconfig)?;
    child.expect("running", Duration::from_secs(60))?;
    let pid = child.pid.clone();

    let (ctl0, proc0, thread0) = (
        procstat::cpu_time(&pid),
        procstat::cpu_time("self"),
        thread_cpu(),
    );
    server.clear_request_log();
    let idle_rss = procstat::rss_bytes(&pid);
    procstat::reset_peak(&pid);
    let started = Instant::now();
    for i in 0..n {
        objects
            .create(FOO_RESOURCE, NAMESPACE, foo_json(i))
            .map_err(|e| format!("creating foo-{i}: {e}"))?;
    }
    wait_for("every Foo to converge", CONVERGE_TIMEOUT, || {
        converged(&objects) == n
    })?;
    let wall = started.elapsed();
    let controller_cpu = procstat::cpu_time(&pid).saturating_sub(ctl0);
    let server_cpu = procstat::cpu_time("self")
        .saturating_sub(proc0)
        .saturating_sub(thread_cpu().saturating_sub(thread0));
    let peak_rss = procstat::peak_rss_bytes(&pid);

    // The last events are written in the background: count them once the
    // counters stop moving.
    let mut last = u64::MAX;
    let _ = wait_for(
        "the event writes to settle",
        Duration::from_secs(30),
        || {
            std::thread::sleep(Duration::from_millis(500));
            let now = server.counters().total;
            std::mem::replace(&mut last, now) == now
        },
    );
    let counters = server.counters();
    let writes_by: Vec<(String, u64)> = counters
        .by_verb_resource
        .iter()
        .filter(|((verb, _), _)| matches!(verb.as_str(), "create" | "update" | "patch" | "delete"))
        .map(|((verb, resource), count)| (format!("{verb} {resource}"), *count))
        .collect();
    let writes = writes_by.iter().map(|(_, c)| c).sum();
    let write_kinds = writes_by
        .iter()
        .map(|(k, c)| format!("{k} {c}"))
        .collect::<Vec<_>>()
        .join(", ");

    // A relist of everything: compact the history and end every watch.
    let rss_before_relist = procstat::rss_bytes(&pid);
    procstat::reset_peak(&pid);
    let lists = |c: &kcontrol_testserver::Counters| {
        (
            c.count("list", FOO_RESOURCE),
            c.count("list", "deployments.apps"),
        )
    };
    let before = lists(&counters);
    let relist_start = Instant::now();
    server.faults().compact();
    server.faults().close_all_watches();
    wait_for("the controller to relist", Duration::from_secs(120), || {
        let now = lists(&server.counters());
        now.0 > before.0 && now.1 > before.1
    })?;
    // the relist is done once the caches are back in the same state
    wait_for("the caches to settle", Duration::from_secs(120), || {
        let c = server.counters();
        c.active_watches >= 2
    })?;
    let relist = relist_start.elapsed();
    std::thread::sleep(Duration::from_secs(1));
    let relist_peak = procstat::peak_rss_bytes(&pid);
    std::thread::sleep(SETTLE);
    let rss_settled = procstat::rss_bytes(&pid);

    child.stop()?;
    let _ = std::fs::remove_file(&kubeconfig);
    runtime.block_on(server.shutdown());
    Ok(Run {
        wall,
        requests: counters.total,
        writes,
        write_kinds,
        controller_cpu,
        server_cpu,
        idle_rss,
        peak_rss,
        rss_before_relist,
        relist_peak,
        rss_settled,
        relist,
    })
}

/// The floor: the happy path's three writes per Foo from a bare client,
/// two at a time, against a fresh server holding the same Foos.
async fn reference(n: usize) -> Result<Duration, String> {
    let server = foo_server(n, false).await?;
    let objects = server.objects();
    let client = client_for(&server.kubeconfig())?;
    let started = Instant::now();
    let mut foos = Vec::with_capacity(n);
    for i in 0..n {
        let stored = objects
            .create(FOO_RESOURCE, NAMESPACE, foo_json(i))
            .map_err(|e| format!("creating foo-{i}: {e}"))?;
        let foo: Foo = serde_json::from_value(stored.value().clone()).map_err(|e| e.to_string())?;
        foos.push(foo);
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let foo_api: Api<Foo> = Api::namespaced(client.clone(), NAMESPACE);
    let events: Api<Event> = Api::namespaced(client, NAMESPACE);
    let results: Vec<Result<(), String>> = futures::stream::iter(foos)
        .map(|mut foo| {
            let (deployments, foo_api, events) =
                (deployments.clone(), foo_api.clone(), events.clone());
            async move {
                let err = |e: kcontrol_client::Error| e.to_string();
                deployments
                    .create(&PostParams::default(), &deployment::new_deployment(&foo))
                    .await
                    .map_err(err)?;
                let name = foo.metadata.name.clone().unwrap_or_default();
                foo.status = Some(FooStatus {
                    available_replicas: foo.desired_replicas(),
                });
                foo_api
                    .replace_status(&name, &PostParams::default(), &foo)
                    .await
                    .map_err(err)?;
                let mut event = Event::default();
                event.metadata.name = Some(format!("{name}.synced"));
                event.involved_object.name = Some(name);
                event.reason = Some("Synced".to_owned());
                events
                    .create(&PostParams::default(), &event)
                    .await
                    .map_err(err)?;
                Ok(())
            }
        })
        .buffer_unordered(WORKERS)
        .collect()
        .await;
    let wall = started.elapsed();
    results.into_iter().collect::<Result<Vec<()>, String>>()?;
    server.shutdown().await;
    Ok(wall)
}

fn client_for(kubeconfig: &str) -> Result<Client, String> {
    let kubeconfig = Kubeconfig::from_yaml(kubeconfig).map_err(|e| e.to_string())?;
    let config = Config::from_custom_kubeconfig(&kubeconfig, &KubeconfigOptions::default())
        .map_err(|e| e.to_string())?
        .with_rate_limit(Some(RateLimit {
            qps: QPS,
            burst: 100_000,
        }));
    Client::new(config).map_err(|e| e.to_string())
}

/// The child: runs the controller against the kubeconfig in `args[0]`,
/// prints `running` once its caches synced, and shuts down gracefully when
/// its stdin closes.
pub fn child_main(args: &[String]) -> ExitCode {
    let Some(path) = args.first() else {
        eprintln!("{CHILD_ARG}: needs a kubeconfig path");
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{CHILD_ARG}: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(child(path)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{CHILD_ARG}: {e}");
            ExitCode::FAILURE
        }
    }
}

#[allow(clippy::print_stdout)]
async fn child(path: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let client = client_for(&text)?;
    let controller = std::sync::Arc::new(
        Controller::new(
            client,
            ControllerOptions {
                workers: WORKERS,
                ..ControllerOptions::default()
            },
        )
        .map_err(|e| e.to_string())?,
    );
    let shutdown = CancellationToken::new();
    let running = {
        let controller = std::sync::Arc::clone(&controller);
        let shutdown = shutdown.clone();
        tokio::spawn(async move { controller.run(shutdown).await })
    };
    controller.wait_until_running().await;
    println!("running");
    let _ = std::io::stdout().flush();
    let stdin_closed = shutdown.clone();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
        stdin_closed.cancel();
    });
    running
        .await
        .map_err(|e| format!("controller task: {e}"))?
        .map_err(|e| format!("controller: {e}"))?;
    Ok(())
}
