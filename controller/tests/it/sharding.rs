//! `Manager::sharded` (SH2, SH4, SH7): two managers on one API server share
//! the ConfigMaps of a ring; each reconciles only the ones labelled with
//! its member name; no key is reconciled by both at once; after one shuts
//! down gracefully the other owns and reconciles every ConfigMap. And the
//! `Sharder` alone (SH6): the children of an owner whose member is gone
//! reach the new member before their owner does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;
use crate::widgets::v1::Widget;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcontrol_client::Client;
use kcontrol_controller::{Action, Context, Manager, Sharder, ShardingConfig};
use kcontrol_testserver::{Failure, FaultScope, TestServer, Verb};
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use support::{eventually, server};

const OBJECTS: usize = 12;
const SHARD: &str = "shard.kcontrol.dev/cms";

/// (member, key, start, end) of every reconcile.
type Log = Arc<Mutex<Vec<(String, String, Instant, Instant)>>>;

fn start(
    server: &TestServer,
    member: &str,
    log: &Log,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let client = Client::from_kubeconfig_yaml(&server.kubeconfig()).unwrap();
    let config = ShardingConfig::new("default", "cms")
        .member(member)
        // a renew deadline a loaded machine meets (a member that misses it
        // stops, as it must); a graceful stop releases the Lease, so the
        // hand-over does not wait for the duration
        .lease_timings(
            Duration::from_secs(15),
            Duration::from_secs(10),
            Duration::from_millis(500),
        );
    let mut manager = Manager::new(client).sharded(config);
    let controller = manager.controller::<ConfigMap>();
    let (log, me) = (Arc::clone(log), member.to_owned());
    manager.add(
        controller,
        move |_cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
            let (log, me) = (Arc::clone(&log), me.clone());
            async move {
                let start = Instant::now();
                // long enough for a move to meet a reconcile in flight
                tokio::time::sleep(Duration::from_millis(20)).await;
                log.lock()
                    .unwrap()
                    .push((me, ctx.key().to_owned(), start, Instant::now()));
                Ok::<_, std::io::Error>(Action::Done)
            }
        },
    );
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let stop = stop.clone();
        async move { manager.run(stop).await.unwrap() }
    });
    (stop, run)
}

fn owners(server: &TestServer) -> BTreeMap<String, Option<String>> {
    server
        .objects()
        .list("configmaps", Some("default"))
        .unwrap()
        .items
        .iter()
        .filter(|o| o.name().starts_with("cm-"))
        .map(|o| {
            let owner = o.value()["metadata"]["labels"][SHARD]
                .as_str()
                .map(str::to_owned);
            (format!("default/{}", o.name()), owner)
        })
        .collect()
}

/// Every ConfigMap owned by one of `live` and reconciled by it after `since`.
fn settled(server: &TestServer, log: &Log, live: &[&str], since: Instant) -> bool {
    let owners = owners(server);
    let log = log.lock().unwrap();
    owners.len() == OBJECTS
        && owners.iter().all(|(key, owner)| {
            owner.as_deref().is_some_and(|o| live.contains(&o))
                && log.iter().any(|(m, k, s, _)| {
                    k == key && Some(m.as_str()) == owner.as_deref() && *s >= since
                })
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sh2_sh7_two_sharded_managers_share_the_objects_and_hand_over_on_shutdown() {
    let (server, _client) = server().await;
    for i in 0..OBJECTS {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i}")}});
        server
            .objects()
            .create("configmaps", "default", cm)
            .unwrap();
    }
    let log: Log = Arc::default();
    let begin = Instant::now();
    let (stop_a, run_a) = start(&server, "a", &log);
    let (stop_b, run_b) = start(&server, "b", &log);
    // (the sharder may assign everything to the first member it sees and
    // move a share when the second joins: wait for both to have one)
    let shared = |shares: &BTreeMap<String, Option<String>>| {
        ["a", "b"]
            .iter()
            .all(|m| shares.values().any(|o| o.as_deref() == Some(*m)))
    };
    eventually(
        "every ConfigMap owned and reconciled by a or b, both with a share",
        async || settled(&server, &log, &["a", "b"], begin) && shared(&owners(&server)),
    )
    .await;

    // a stops gracefully: its Lease is released after its reconciles ended,
    // and b gets its ConfigMaps
    let stopped = Instant::now();
    stop_a.cancel();
    run_a.await.unwrap();
    eventually("every ConfigMap owned and reconciled by b", async || {
        settled(&server, &log, &["b"], stopped)
            || owners(&server).values().all(|o| o.as_deref() == Some("b"))
                && settled(&server, &log, &["b"], begin)
    })
    .await;
    stop_b.cancel();
    run_b.await.unwrap();

    // no key reconciled by both at once
    let log = log.lock().unwrap().clone();
    for (m1, k1, s1, e1) in log.iter() {
        for (m2, k2, s2, e2) in log.iter() {
            if k1 == k2 && m1 != m2 {
                assert!(
                    e1 <= s2 || e2 <= s1,
                    "{k1} reconciled by {m1} and {m2} at once"
                );
            }
        }
    }
    server.shutdown().await;
}

/// The resource version of every object of `resource` whose name starts
/// with `prefix`, with its shard label.
fn versions(
    server: &TestServer,
    resource: &str,
    prefix: &str,
) -> BTreeMap<String, (u64, Option<String>)> {
    let list = server.objects().list(resource, Some("default")).unwrap();
    list.items
        .iter()
        .filter(|o| o.name().starts_with(prefix))
        .map(|o| {
            let meta = &o.value()["metadata"];
            let rv = meta["resourceVersion"].as_str().unwrap().parse().unwrap();
            let shard = meta["labels"][SHARD].as_str().map(str::to_owned);
            (o.name().to_owned(), (rv, shard))
        })
        .collect()
}

/// The ring `cms` with one live member, `a` (a Lease that does not expire
/// within a test), and `OBJECTS` ConfigMaps labelled for a member that has
/// no Lease (gone); their names and UIDs.
fn ring_of_a_with_gone_configmaps(server: &TestServer) -> Vec<(String, String)> {
    ring_of_a_with_configmaps(server, "gone")
}

/// The ring `cms` with one live member, `a`, and `OBJECTS` ConfigMaps
/// labelled for `shard`; their names and UIDs.
fn ring_of_a_with_configmaps(server: &TestServer, shard: &str) -> Vec<(String, String)> {
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "cms-a", "labels": {"sharding.kcontrol.dev/ring": "cms"}},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 3600}});
    server
        .objects()
        .create("leases.coordination.k8s.io", "default", lease)
        .unwrap();
    (0..OBJECTS)
        .map(|i| {
            let name = format!("cm-{i}");
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "labels": {SHARD: shard}}});
            let cm = server
                .objects()
                .create("configmaps", "default", cm)
                .unwrap();
            let uid = cm.value()["metadata"]["uid"].as_str().unwrap().to_owned();
            (name, uid)
        })
        .collect()
}

/// The ring `cms` in `default` with a Lease of `lease` and a renew
/// deadline of `renew` (retry 200 ms).
fn cms_config(lease: Duration, renew: Duration) -> ShardingConfig {
    ShardingConfig::new("default", "cms").lease_timings(lease, renew, Duration::from_millis(200))
}

/// A sharder running in a task.
struct Running {
    stop: CancellationToken,
    run: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops the sharder and waits for it.
    async fn stop(self) {
        self.stop.cancel();
        self.run.await.unwrap();
    }
}

/// Runs `sharder` until [`Running::stop`].
fn run_sharder(sharder: Sharder) -> Running {
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let stop = stop.clone();
        async move { sharder.run(stop).await.unwrap() }
    });
    Running { stop, run }
}

/// Whether `n` objects are listed in `versions`, every one labelled for `a`.
fn all_on_a(versions: &BTreeMap<String, (u64, Option<String>)>, n: usize) -> bool {
    versions.len() == n && versions.values().all(|(_, s)| s.as_deref() == Some("a"))
}

/// SH6: ConfigMaps labelled for a member that has no Lease (gone) each
/// control two Secrets with the same label; the one live member, `a`,
/// gets them all, and every Secret is relabelled before its ConfigMap, so
/// that a controller on `a` finds its children cached when the owner
/// arrives (no create of a child that exists).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sh6_children_reach_the_new_member_before_their_owner() {
    let (server, client) = server().await;
    gone_secrets_of(&server, &ring_of_a_with_gone_configmaps(&server));
    let sharder = run_secrets_sharder(client);
    eventually("every ConfigMap and Secret labelled for a", async || {
        all_on_a(&versions(&server, "configmaps", "cm-"), OBJECTS)
            && all_on_a(&versions(&server, "secrets", "cm-"), 2 * OBJECTS)
    })
    .await;
    sharder.stop().await;
    let owners = versions(&server, "configmaps", "cm-");
    for (name, (rv, _)) in versions(&server, "secrets", "cm-") {
        let owner = name.rsplit_once('-').unwrap().0;
        let owner_rv = owners[owner].0;
        assert!(
            rv < owner_rv,
            "{name} relabelled at {rv}, after its owner {owner} at {owner_rv}"
        );
    }
    server.shutdown().await;
}

/// A sharder of the ConfigMaps and the Secrets they control, running.
fn run_secrets_sharder(client: Client) -> Running {
    let config = cms_config(Duration::from_secs(15), Duration::from_secs(10));
    run_sharder(
        Sharder::new(client, config)
            .shard::<ConfigMap>()
            .owns::<ConfigMap, Secret>(),
    )
}

/// Two Secrets controlled by each of `owners` (names and UIDs), labelled
/// for a member that has no Lease (gone).
fn gone_secrets_of(server: &TestServer, owners: &[(String, String)]) {
    for (name, uid) in owners {
        for j in 0..2 {
            let owner = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": name,
                "uid": uid, "controller": true}]);
            let secret = json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": format!("{name}-{j}"), "labels": {SHARD: "gone"},
                    "ownerReferences": owner}});
            server
                .objects()
                .create("secrets", "default", secret)
                .unwrap();
        }
    }
}

/// Owners already where the ring names them are settled, so the sharder
/// does not cache them; children that lag behind such an owner still
/// follow it (to where the ring names the owner's key), and the owners
/// are not written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_of_a_settled_owner_out_of_the_cache_follow_it() {
    let (server, client) = server().await;
    gone_secrets_of(&server, &ring_of_a_with_configmaps(&server, "a"));
    let before = versions(&server, "configmaps", "cm-");
    let sharder = run_secrets_sharder(client);
    eventually("every Secret labelled for a", async || {
        all_on_a(&versions(&server, "secrets", "cm-"), 2 * OBJECTS)
    })
    .await;
    sharder.stop().await;
    assert_eq!(versions(&server, "configmaps", "cm-"), before);
    server.shutdown().await;
}

/// A sharded kind whose children cannot be listed (a custom resource not
/// installed) holds the sharder back one Lease duration, not for ever:
/// the ConfigMaps of a gone member still reach the live one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_that_cannot_be_listed_does_not_stop_the_sharder() {
    let (server, client) = server().await;
    ring_of_a_with_gone_configmaps(&server);
    let config = cms_config(Duration::from_secs(2), Duration::from_secs(1));
    let sharder = run_sharder(
        Sharder::new(client, config)
            .shard::<ConfigMap>()
            .owns::<ConfigMap, Widget>(),
    );
    eventually("every ConfigMap labelled for a", async || {
        all_on_a(&versions(&server, "configmaps", "cm-"), OBJECTS)
    })
    .await;
    sharder.stop().await;
    server.shutdown().await;
}

/// SH4 without a periodic pass: the sharder's first writes fail (500 on
/// every PATCH of a ConfigMap, twice as many as there are ConfigMaps) and
/// each failed write is retried with the queue's backoff, so every
/// ConfigMap of the gone member still reaches the live one within the
/// test's deadline (the sharder re-evaluates on events, ring changes and
/// retries only; it has no resync).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sh4_a_failed_assignment_is_retried_without_a_resync() {
    let (server, client) = server().await;
    ring_of_a_with_gone_configmaps(&server);
    let scope = FaultScope {
        verb: Some(Verb::Patch),
        resource: Some("configmaps".into()),
    };
    let failures = 2 * OBJECTS as u64;
    server
        .faults()
        .fail_next_matching(failures, Failure::InternalError, scope);
    let config = cms_config(Duration::from_secs(15), Duration::from_secs(10));
    let sharder = run_sharder(Sharder::new(client, config).shard::<ConfigMap>());
    eventually("every ConfigMap labelled for a", async || {
        all_on_a(&versions(&server, "configmaps", "cm-"), OBJECTS)
    })
    .await;
    sharder.stop().await;
    let failed = server
        .request_log()
        .iter()
        .filter(|r| r.verb == Some(Verb::Patch) && r.status == 500)
        .count();
    assert_eq!(failed as u64, failures, "every injected failure was met");
    server.shutdown().await;
}
