//! `sample-controller --shard-ring` run as real processes against one API
//! server (the in-process test server over HTTP on 127.0.0.1): three
//! replicas share the Foos; one is SIGKILLed mid-run, one joins later;
//! every reconcile is appended to a shared log, which must show no key
//! reconciled by two replicas at once (SH2, SH3), every Foo owned by a
//! live replica and reconciled after the kill and after the join (SH4).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kcontrol_client::{Api, Client, Patch, PatchParams, RateLimit};
use kcontrol_testserver::TestServer;
use sample_controller::embedded::{client_for, demo_foo};
use sample_controller::reconcile_log::{now_nanos, overlaps, parse, LoggedReconcile};
use sample_controller::Foo;
use tokio::time::Instant;

const BINARY: &str = env!("CARGO_BIN_EXE_sample-controller");
const SAFETY: Duration = Duration::from_secs(60);
const FOOS: u32 = 60;
const SHARD: &str = "shard.kcontrol.dev/foos";
const DRAIN: &str = "drain.kcontrol.dev/foos";
const FOOS_RESOURCE: &str = "foos.samplecontroller.k8s.io";

struct Replica {
    name: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Replica {
    fn spawn(kubeconfig: &Path, log: &Path, name: &str) -> Self {
        let mut child = Command::new(BINARY)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--namespace", "default", "--resync-period", "0"])
            .args(["--qps", "500", "--burst", "1000"])
            .args(["--shard-ring", "foos", "--shard-member", name])
            .args(["--leader-elect-lease-duration", "3s"])
            .args(["--leader-elect-renew-deadline", "2s"])
            .args(["--leader-elect-retry-period", "500ms"])
            .arg("--reconcile-log")
            .arg(log)
            .env("RUST_LOG", "info,kcontrol_controller::sharding=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting sample-controller");
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Self {
            name: name.to_owned(),
            child,
            lines,
        }
    }

    fn stderr(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    async fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + SAFETY;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Each Foo's shard and drain labels, from the server's store.
fn labels(server: &TestServer) -> BTreeMap<String, (Option<String>, bool)> {
    let list = server
        .objects()
        .list(FOOS_RESOURCE, Some("default"))
        .unwrap();
    list.items
        .iter()
        .map(|o| {
            let v = o.value();
            let name = v["metadata"]["name"].as_str().unwrap_or_default();
            let l = &v["metadata"]["labels"];
            (
                format!("default/{name}"),
                (l[SHARD].as_str().map(str::to_owned), l.get(DRAIN).is_some()),
            )
        })
        .collect()
}

/// Waits until every Foo is owned by one of `live`, undrained.
async fn wait_owned_by(server: &TestServer, live: &[&str], replicas: &[&Replica]) {
    let deadline = Instant::now() + SAFETY;
    loop {
        let now = labels(server);
        let settled = now.len() == FOOS as usize
            && now
                .values()
                .all(|(s, d)| !d && s.as_deref().is_some_and(|s| live.contains(&s)));
        if settled {
            return;
        }
        if Instant::now() > deadline {
            let logs: Vec<String> = replicas
                .iter()
                .map(|r| format!("--- {}\n{}", r.name, r.stderr()))
                .collect();
            panic!(
                "Foos not all owned by {live:?}: {now:?}\n{}",
                logs.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until every Deployment has its Foo's shard label.
async fn wait_deployments_follow(server: &TestServer) {
    let deadline = Instant::now() + SAFETY;
    loop {
        let foos = labels(server);
        let list = server
            .objects()
            .list("deployments.apps", Some("default"))
            .unwrap();
        let astray: Vec<String> = list
            .items
            .iter()
            .filter_map(|o| {
                let v = o.value();
                let name = v["metadata"]["name"].as_str().unwrap_or_default();
                let shard = v["metadata"]["labels"][SHARD].as_str().map(str::to_owned);
                let owner = foos
                    .get(&format!("default/{name}"))
                    .and_then(|f| f.0.clone());
                (shard != owner).then(|| format!("{name}: {shard:?} != {owner:?}"))
            })
            .collect();
        if astray.is_empty() && list.items.len() == FOOS as usize {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "Deployments not following their Foos: {astray:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn read_log(path: &Path) -> Vec<LoggedReconcile> {
    parse(&std::fs::read_to_string(path).unwrap_or_default())
}

/// Waits until every Foo was reconciled, after `since`, by the replica
/// its label names.
async fn wait_reconciled_by_owner(server: &TestServer, log: &Path, since: u128) {
    let deadline = Instant::now() + SAFETY;
    loop {
        let owners = labels(server);
        let done: BTreeSet<(String, String)> = read_log(log)
            .into_iter()
            .filter(|r| r.start >= since)
            .map(|r| (r.key, r.replica))
            .collect();
        let missing: Vec<&String> = owners
            .iter()
            .filter(|(k, (s, _))| {
                s.as_ref()
                    .is_none_or(|s| !done.contains(&((*k).clone(), s.clone())))
            })
            .map(|(k, _)| k)
            .collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not reconciled by their owners since {since}: {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Bumps every Foo's replicas (an update each replica must reconcile).
async fn touch_all(client: &Client, round: i32) {
    let api: Api<Foo> = Api::namespaced(client.clone(), "default");
    for i in 1..=FOOS {
        let patch = serde_json::json!({"spec": {"replicas": 1 + (i as i32 + round) % 3}});
        api.patch(
            &format!("example-foo-{i}"),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .unwrap();
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sh8_replicas_share_the_foos_and_a_kill_and_a_join_never_reconcile_a_key_twice() {
    let server = TestServer::builder()
        .deployment_simulator(Some(Duration::from_millis(20)))
        .start()
        .await
        .unwrap();
    let client = client_for(
        &server,
        RateLimit {
            qps: 1000.0,
            burst: 2000,
        },
    )
    .unwrap();
    sample_controller::artifacts::install_foo_crd(&client, Duration::from_secs(30))
        .await
        .unwrap();
    let dir: PathBuf = std::env::temp_dir().join(format!("sc-shards-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let log = dir.join("reconciles.log");
    let api: Api<Foo> = Api::namespaced(client.clone(), "default");
    for i in 1..=FOOS {
        api.create(&kcontrol_client::PostParams::default(), &demo_foo(i))
            .await
            .unwrap();
    }

    let r1 = Replica::spawn(&kubeconfig, &log, "r1");
    let mut r2 = Replica::spawn(&kubeconfig, &log, "r2");
    let r3 = Replica::spawn(&kubeconfig, &log, "r3");
    wait_owned_by(&server, &["r1", "r2", "r3"], &[&r1, &r2, &r3]).await;
    let shares = labels(&server);
    for r in ["r1", "r2", "r3"] {
        let n = shares
            .values()
            .filter(|(s, _)| s.as_deref() == Some(r))
            .count();
        assert!(n > 0, "{r} got no Foo: {shares:?}");
    }
    wait_reconciled_by_owner(&server, &log, 0).await;

    // SIGKILL r2 while the Foos are being updated
    let touch = tokio::spawn({
        let client = client.clone();
        async move { touch_all(&client, 1).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    r2.signal("-KILL");
    let killed = now_nanos();
    let _ = r2.wait_exit().await;
    touch.await.unwrap();
    wait_owned_by(&server, &["r1", "r3"], &[&r1, &r3]).await;
    let after_kill = now_nanos();
    touch_all(&client, 2).await;
    wait_reconciled_by_owner(&server, &log, after_kill).await;
    assert!(read_log(&log)
        .iter()
        .any(|r| r.replica != "r2" && r.start > killed));

    // r4 joins while the Foos are being updated: moves go through drains
    let r4 = Replica::spawn(&kubeconfig, &log, "r4");
    let touch = tokio::spawn({
        let client = client.clone();
        async move { touch_all(&client, 3).await }
    });
    touch.await.unwrap();
    let deadline = Instant::now() + SAFETY;
    while !labels(&server)
        .values()
        .any(|(s, _)| s.as_deref() == Some("r4"))
    {
        assert!(
            Instant::now() < deadline,
            "r4 got nothing:\n{}",
            r4.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_owned_by(&server, &["r1", "r3", "r4"], &[&r1, &r3, &r4]).await;
    let after_join = now_nanos();
    touch_all(&client, 4).await;
    wait_reconciled_by_owner(&server, &log, after_join).await;

    // SH6: every Deployment carries its Foo's shard label
    wait_deployments_follow(&server).await;

    // SH7: a graceful stop releases r1's Lease after its workers drained;
    // its Foos go to the others
    let [mut r1, r3, r4] = [r1, r3, r4];
    r1.signal("-TERM");
    let status = r1.wait_exit().await;
    assert!(status.success(), "r1 exited {status}:\n{}", r1.stderr());
    wait_owned_by(&server, &["r3", "r4"], &[&r3, &r4]).await;
    let after_stop = now_nanos();
    touch_all(&client, 5).await;
    wait_reconciled_by_owner(&server, &log, after_stop).await;

    let mut rest = [r3, r4];
    for r in &rest {
        r.signal("-TERM");
    }
    for r in &mut rest {
        let status = r.wait_exit().await;
        assert!(
            status.success(),
            "{} exited {status}:\n{}",
            r.name,
            r.stderr()
        );
    }
    let all = read_log(&log);
    let twice = overlaps(&all);
    assert!(
        twice.is_empty(),
        "keys reconciled by two replicas at once: {twice:?}"
    );
    let unowned: Vec<String> = labels(&server)
        .into_iter()
        .filter(|(_, (s, _))| s.is_none())
        .map(|(k, _)| k)
        .collect();
    assert!(unowned.is_empty(), "unowned Foos: {unowned:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
