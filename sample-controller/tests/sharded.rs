//! `sample-controller --shard-ring` run as real processes against one API
//! server (the in-process test server over HTTP on 127.0.0.1): three
//! replicas share the Foos; one is SIGKILLed mid-run, one joins later;
//! every reconcile is appended to a shared log, which must show no key
//! reconciled by two replicas at once (SH2, SH3), every Foo owned by a
//! live replica and reconciled after the kill and after the join (SH4).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kcontrol_client::{Api, Client, Patch, PatchParams, RateLimit};
use kcontrol_testserver::{eventually_within, try_eventually_within, TestServer};
use sample_controller::embedded::{client_for, demo_foo};
use sample_controller::reconcile_log::{now_nanos, overlaps, parse, LoggedReconcile};
use sample_controller::Foo;

mod support;

use support::{Replica, SAFETY};

const FOOS: u32 = 60;
const SHARD: &str = "shard.kcontrol.dev/foos";
const DRAIN: &str = "drain.kcontrol.dev/foos";
const FOOS_RESOURCE: &str = "foos.samplecontroller.k8s.io";

/// A replica of ring `foos` as member `name`, every reconcile appended to
/// `log`.
fn member(kubeconfig: &Path, log: &Path, name: &str) -> Replica {
    let mut command = support::command(kubeconfig, 500, 1000);
    command
        .args(["--shard-ring", "foos", "--shard-member", name])
        // a renew deadline a loaded machine meets: a member that misses it
        // exits, as it must, and the test with it
        .args(["--leader-elect-lease-duration", "8s"])
        .args(["--leader-elect-renew-deadline", "6s"])
        .args(["--leader-elect-retry-period", "500ms"])
        .arg("--reconcile-log")
        .arg(log)
        .env("RUST_LOG", "info,kcontrol_controller::sharding=debug");
    Replica::start(name, command)
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

/// Waits until every Foo is owned by one of `live`, undrained, and each
/// of `live` owns some (the first assignment may come before the last
/// member joined).
async fn wait_owned_by(server: &TestServer, live: &[&str], replicas: &[&Replica]) {
    let what = format!("every Foo owned by one of {live:?}, each with a share");
    let owned = try_eventually_within(what, SAFETY, async || {
        let now = labels(server);
        let owned = now.len() == FOOS as usize
            && now
                .values()
                .all(|(s, d)| !d && s.as_deref().is_some_and(|s| live.contains(&s)));
        owned
            && live
                .iter()
                .all(|m| now.values().any(|(s, _)| s.as_deref() == Some(*m)))
    })
    .await;
    if let Err(e) = owned {
        let logs: Vec<String> = replicas
            .iter()
            .map(|r| format!("--- {}\n{}", r.name, r.stderr()))
            .collect();
        panic!("{e}: {:?}\n{}", labels(server), logs.join("\n"));
    }
}

/// The Deployments whose shard label is not their Foo's, and how many
/// Deployments there are.
fn astray_deployments(server: &TestServer) -> (Vec<String>, usize) {
    let foos = labels(server);
    let list = server
        .objects()
        .list("deployments.apps", Some("default"))
        .unwrap();
    let astray = list
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
    (astray, list.items.len())
}

/// Waits until every Deployment has its Foo's shard label.
async fn wait_deployments_follow(server: &TestServer) {
    let followed = try_eventually_within(
        "every Deployment with its Foo's shard",
        SAFETY,
        async || {
            let (astray, n) = astray_deployments(server);
            astray.is_empty() && n == FOOS as usize
        },
    )
    .await;
    if let Err(e) = followed {
        panic!("{e}: {:?}", astray_deployments(server));
    }
}

fn read_log(path: &Path) -> Vec<LoggedReconcile> {
    parse(&std::fs::read_to_string(path).unwrap_or_default())
}

/// The Foos not reconciled, after `since`, by the replica their label
/// names.
fn not_reconciled_by_owner(server: &TestServer, log: &Path, since: u128) -> Vec<String> {
    let done: BTreeSet<(String, String)> = read_log(log)
        .into_iter()
        .filter(|r| r.start >= since)
        .map(|r| (r.key, r.replica))
        .collect();
    labels(server)
        .into_iter()
        .filter(|(k, (s, _))| {
            s.as_ref()
                .is_none_or(|s| !done.contains(&(k.clone(), s.clone())))
        })
        .map(|(k, _)| k)
        .collect()
}

/// Waits until every Foo was reconciled, after `since`, by the replica
/// its label names.
async fn wait_reconciled_by_owner(server: &TestServer, log: &Path, since: u128) {
    let what = format!("every Foo reconciled by its owner since {since}");
    let done = try_eventually_within(what, SAFETY, async || {
        not_reconciled_by_owner(server, log, since).is_empty()
    })
    .await;
    if let Err(e) = done {
        panic!("{e}: {:?}", not_reconciled_by_owner(server, log, since));
    }
}

/// Bumps every Foo's replicas (an update each replica must reconcile),
/// counting the Foos done in `progress`.
async fn touch_all(client: &Client, round: i32, progress: &AtomicU32) {
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
        progress.fetch_add(1, Ordering::SeqCst);
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

    let r1 = member(&kubeconfig, &log, "r1");
    let mut r2 = member(&kubeconfig, &log, "r2");
    let r3 = member(&kubeconfig, &log, "r3");
    wait_owned_by(&server, &["r1", "r2", "r3"], &[&r1, &r2, &r3]).await;
    wait_reconciled_by_owner(&server, &log, 0).await;

    // SIGKILL r2 while the Foos are being updated
    let progress = Arc::new(AtomicU32::new(0));
    let touch = tokio::spawn({
        let (client, progress) = (client.clone(), Arc::clone(&progress));
        async move { touch_all(&client, 1, &progress).await }
    });
    eventually_within("the update of the Foos under way", SAFETY, async || {
        progress.load(Ordering::SeqCst) >= FOOS / 4
    })
    .await;
    r2.signal("-KILL");
    let killed = now_nanos();
    let _ = r2.wait_exit().await;
    touch.await.unwrap();
    wait_owned_by(&server, &["r1", "r3"], &[&r1, &r3]).await;
    let after_kill = now_nanos();
    touch_all(&client, 2, &AtomicU32::new(0)).await;
    wait_reconciled_by_owner(&server, &log, after_kill).await;
    assert!(read_log(&log)
        .iter()
        .any(|r| r.replica != "r2" && r.start > killed));

    // r4 joins while the Foos are being updated: moves go through drains
    let r4 = member(&kubeconfig, &log, "r4");
    touch_all(&client, 3, &AtomicU32::new(0)).await;
    wait_owned_by(&server, &["r1", "r3", "r4"], &[&r1, &r3, &r4]).await;
    let after_join = now_nanos();
    touch_all(&client, 4, &AtomicU32::new(0)).await;
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
    touch_all(&client, 5, &AtomicU32::new(0)).await;
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
