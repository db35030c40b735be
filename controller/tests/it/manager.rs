//! The Manager (CT17): several controllers on one client, one informer
//! factory (a resource listed once whatever the number of controllers
//! watching it), one health server whose `/readyz` waits for every
//! controller's caches, one graceful shutdown; with leader election, only
//! the leader reconciles and a successor takes over once it releases.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcontrol_client::Api;
use kcontrol_controller::{Action, Context, LeaderElectionConfig, Manager};
use kcontrol_informer::WatchConfig;
use kcontrol_testserver::{TestServer, Verb};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use support::{eventually, get, next, server, wait_for_status, DEADLINE};

fn seed(server: &TestServer) {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"}});
    server
        .objects()
        .create("configmaps", "default", cm)
        .unwrap();
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "app"}});
    server
        .objects()
        .create("secrets", "default", secret)
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct17_controllers_share_one_factory_one_health_server_and_one_shutdown() {
    let (server, client) = server().await;
    seed(&server);
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let mut manager = Manager::new(client);
    let configmaps = manager.controller::<ConfigMap>();
    let tx_cm = tx.clone();
    manager.add(
        configmaps,
        move |_cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
            let tx = tx_cm.clone();
            async move {
                tx.send(format!("configmap {}", ctx.key())).unwrap();
                Ok::<_, std::io::Error>(Action::Done)
            }
        },
    );
    // the Secret controller watches ConfigMaps too: one informer serves both
    let secrets = manager
        .controller::<Secret>()
        .watches::<ConfigMap>(|cm: &ConfigMap| {
            vec![format!(
                "default/{}",
                cm.metadata.name.clone().unwrap_or_default()
            )]
        });
    manager.add(secrets, move |_s: Arc<Secret>, ctx: Context<Secret>| {
        let tx = tx.clone();
        async move {
            tx.send(format!("secret {}", ctx.key())).unwrap();
            Ok::<_, std::io::Error>(Action::Done)
        }
    });
    let addr = manager
        .serve_health("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    assert_eq!(
        get(addr, "/readyz").await.0,
        503,
        "not ready before the caches sync"
    );
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    let mut seen = vec![next(&mut rx).await, next(&mut rx).await];
    seen.sort();
    assert_eq!(seen, ["configmap default/app", "secret default/app"]);
    wait_for_status(addr, "/readyz", 200).await;
    let lists = server
        .request_log()
        .iter()
        .filter(|r| r.verb == Some(Verb::List) && r.resource.as_deref() == Some("configmaps"))
        .count();
    assert_eq!(lists, 1, "one ConfigMap informer for both controllers");
    shutdown.cancel();
    tokio::time::timeout(DEADLINE, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    eventually("the health server closed", async || {
        std::net::TcpStream::connect(addr).is_err()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managers_watch_config_reaches_its_informers() {
    let (server, client) = server().await;
    seed(&server);
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let mut manager =
        Manager::new(client).watch_config(WatchConfig::default().use_watch_list(true));
    let configmaps = manager.controller::<ConfigMap>();
    manager.add(
        configmaps,
        move |_cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
            let tx = tx.clone();
            async move {
                tx.send(ctx.key().to_owned()).unwrap();
                Ok::<_, std::io::Error>(Action::Done)
            }
        },
    );
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    assert_eq!(next(&mut rx).await, "default/app");
    let requests = crate::controller::configmap_requests(&server);
    assert!(
        crate::controller::synced_by_watch_list(&requests),
        "{requests:?}"
    );
    shutdown.cancel();
    run.await.unwrap().unwrap();
    server.shutdown().await;
}

fn lease_config(identity: &str) -> LeaderElectionConfig {
    let mut config = LeaderElectionConfig::new("default", "managers");
    config.identity = identity.to_owned();
    config.lease_duration = Duration::from_secs(3);
    config.renew_deadline = Duration::from_secs(2);
    config.retry_period = Duration::from_millis(200);
    config
}

fn holder(server: &TestServer) -> Option<String> {
    server
        .objects()
        .get_as::<Lease>("default", "managers")
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct17_only_the_leader_reconciles_and_a_successor_takes_over() {
    let (server, client) = server().await;
    seed(&server);
    // each reconcile reports who it is and who held the Lease as it ran
    let (tx, mut rx) = mpsc::unbounded_channel::<(&'static str, Option<String>)>();
    let start = |identity: &'static str| {
        let mut manager = Manager::new(client.clone()).leader_election(lease_config(identity));
        let tx = tx.clone();
        let controller = manager.controller::<ConfigMap>();
        manager.add(
            controller,
            move |_cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
                let tx = tx.clone();
                async move {
                    let leases: Api<Lease> = Api::namespaced(ctx.client().clone(), "default");
                    let lease = leases.get("managers").await?;
                    let holder = lease.spec.and_then(|s| s.holder_identity);
                    tx.send((identity, holder)).unwrap();
                    Ok::<_, kcontrol_client::Error>(Action::Done)
                }
            },
        );
        let shutdown = CancellationToken::new();
        (tokio::spawn(manager.run(shutdown.clone())), shutdown)
    };
    let (first_run, first_stop) = start("first");
    eventually("first to lead", async || {
        holder(&server).as_deref() == Some("first")
    })
    .await;
    assert_eq!(next(&mut rx).await, ("first", Some("first".to_owned())));
    let (second_run, second_stop) = start("second");
    // the standby does not reconcile while the first leads; once the first
    // shuts down it releases the Lease and the second takes over at once
    first_stop.cancel();
    tokio::time::timeout(DEADLINE, first_run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(next(&mut rx).await, ("second", Some("second".to_owned())));
    assert_eq!(holder(&server).as_deref(), Some("second"));
    second_stop.cancel();
    tokio::time::timeout(DEADLINE, second_run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // no reconcile ran on a manager that did not hold the Lease
    while let Ok((who, holder)) = rx.try_recv() {
        assert_eq!(holder.as_deref(), Some(who));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct17_a_leader_that_cannot_renew_stops_its_controllers_and_says_so() {
    let (server, client) = server().await;
    seed(&server);
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    let mut manager = Manager::new(client).leader_election(lease_config("only"));
    let controller = manager.controller::<ConfigMap>();
    manager.add(
        controller,
        move |_cm: Arc<ConfigMap>, _ctx: Context<ConfigMap>| {
            let tx = tx.clone();
            async move {
                tx.send(()).unwrap();
                Ok::<_, std::io::Error>(Action::Done)
            }
        },
    );
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    next(&mut rx).await;
    // every renewal fails from now on: past the renew deadline the manager
    // stops its controllers and returns the loss (never cancelled here)
    server.faults().fail_for(
        Duration::from_secs(600),
        kcontrol_testserver::Failure::InternalError,
        kcontrol_testserver::FaultScope {
            verb: Some(Verb::Update),
            resource: Some("leases".into()),
        },
    );
    let ended = tokio::time::timeout(DEADLINE, run).await.unwrap().unwrap();
    assert!(
        matches!(
            ended,
            Err(kcontrol_controller::ManagerError::LeaderElection(_))
        ),
        "{ended:?}"
    );
}

/// CT17: `/readyz` answers 503 from the moment shutdown starts, while a
/// reconcile in flight still holds the drain (a load balancer stops
/// sending before the process stops).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct17_readyz_is_503_from_the_start_of_shutdown() {
    let (server, client) = server().await;
    seed(&server);
    let (tx, mut started) = mpsc::unbounded_channel::<String>();
    // closed to let the reconcile finish: every acquire then returns at once
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let mut manager = Manager::new(client);
    let configmaps = manager.controller::<ConfigMap>();
    let held = Arc::clone(&release);
    manager.add(
        configmaps,
        move |_cm: Arc<ConfigMap>, ctx: Context<ConfigMap>| {
            let (tx, held) = (tx.clone(), Arc::clone(&held));
            async move {
                tx.send(ctx.key().to_string()).unwrap();
                let _ = held.acquire().await;
                Ok::<_, std::io::Error>(Action::Done)
            }
        },
    );
    let addr = manager
        .serve_health("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    assert_eq!(next(&mut started).await, "default/app");
    wait_for_status(addr, "/readyz", 200).await;

    shutdown.cancel();
    wait_for_status(addr, "/readyz", 503).await;
    assert!(
        !run.is_finished(),
        "the reconcile in flight still holds the drain"
    );
    release.close();
    tokio::time::timeout(DEADLINE, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
