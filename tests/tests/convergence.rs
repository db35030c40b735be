//! Many Foos converge: 1,000 Foos on the testserver while it drops watches,
//! answers 429 and 500, compacts its history and expires watches; and a
//! controller restarted in the middle of the work resumes with no
//! duplicate Deployment and no Foo left behind. On a real cluster
//! (`KCONTROL_E2E_KUBECONFIG`) the same runs with fewer Foos and no faults.
// the resource is named Foo; the skip lines are for whoever runs the suite
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::disallowed_names, clippy::print_stdout)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kcontrol_client::{ListParams, PostParams};
use kcontrol_e2e::{eventually_within, Env, RunningController};
use kcontrol_indexer::Object;
use kcontrol_testserver::{Failure, FaultScope, Verb};
use sample_controller::deployment::is_converged;
use sample_controller::Foo;

async fn create_foos(env: &Env, prefix: &str, range: std::ops::Range<usize>) {
    let api = env.foos();
    let namespace = env.namespace.clone();
    futures::stream::iter(range)
        .map(|i| {
            let api = api.clone();
            let name = format!("{prefix}-{i}");
            let foo = Foo::with_deployment(&namespace, &name, &name, 1 + (i % 3) as i32);
            async move {
                // injected 429s and 500s hit the test's creates too: retry
                // them; a create whose answer was lost may have happened:
                // AlreadyExists is fine
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    match api.create(&PostParams::default(), &foo).await {
                        Ok(_) => return Ok(()),
                        Err(e) if e.is_already_exists() => return Ok(()),
                        Err(e)
                            if attempt < 50
                                && (e.is_too_many_requests() || e.is_server_error()) =>
                        {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
}

/// Retries a read that an injected 429 or 500 failed (the fault rounds
/// leave a few dozen queued failures behind them), for at most 60 s.
async fn retry<T, F, Fut>(mut read: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kcontrol_client::Error>>,
{
    let mut last = None;
    for _ in 0..600 {
        match read().await {
            Ok(value) => return value,
            Err(e) if e.is_too_many_requests() || e.is_server_error() => {
                last = Some(e);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("read failed: {e}"),
        }
    }
    panic!("read failed 600 times (60 s), last with {last:?}")
}

/// Foos and Deployments of the namespace, read through the API; and how
/// many Foos are in sync with a Deployment they control.
async fn state(env: &Env) -> (Vec<Foo>, HashMap<String, Deployment>, usize) {
    let all = ListParams::default();
    let (foo_api, deployment_api) = (env.foos(), env.deployments());
    let foos = retry(|| foo_api.list(&all)).await.items;
    let deployments: HashMap<String, Deployment> = retry(|| deployment_api.list(&all))
        .await
        .items
        .into_iter()
        .map(|d| (d.name().unwrap().to_owned(), d))
        .collect();
    let synced = foos
        .iter()
        .filter(|f| {
            deployments
                .get(&f.spec.deployment_name)
                .is_some_and(|d| is_converged(f, d))
        })
        .count();
    (foos, deployments, synced)
}

async fn all_converged(env: &Env, count: usize, timeout: Duration) {
    eventually_within(format!("{count} Foos to converge"), timeout, || async {
        let (foos, _, synced) = state(env).await;
        (foos.len() == count && synced == count).then_some(())
    })
    .await;
    let (foos, deployments, _) = state(env).await;
    assert_eq!(deployments.len(), count, "one Deployment per Foo, no more");
    for foo in &foos {
        let d = &deployments[&foo.spec.deployment_name];
        assert_eq!(d.controller_ref().unwrap().uid, foo.uid().unwrap());
    }
}

/// Successful Deployment creates the testserver served (201s).
fn deployment_creates(env: &Env) -> usize {
    env.server()
        .unwrap()
        .request_log()
        .iter()
        .filter(|r| {
            r.verb == Some(Verb::Create)
                && r.resource.as_deref() == Some("deployments.apps")
                && r.status == 201
        })
        .count()
}

/// Injects a fault every 150 ms until `stop`: dropped watches, 429s with
/// Retry-After, 500s, compaction with dropped watches, expired watches.
fn inject_faults(env: &Env, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<u32> {
    let faults = env.server().unwrap().faults().clone();
    tokio::spawn(async move {
        let mut round = 0u32;
        while !stop.load(Ordering::Relaxed) {
            match round % 5 {
                0 => faults.close_all_watches(),
                1 => faults.fail_next(
                    5,
                    Failure::TooManyRequests {
                        retry_after_secs: 1,
                    },
                ),
                2 => faults.fail_next(5, Failure::InternalError),
                3 => {
                    faults.compact();
                    faults.close_all_watches();
                }
                _ => {
                    faults.expire_next_watches(2);
                    faults.close_all_watches();
                }
            }
            round += 1;
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        round
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_foos_converge_under_faults() {
    kcontrol_e2e::init_logging();
    const FOOS: usize = 1_000;
    let env = Env::testserver("thousand").await;
    let ctl = RunningController::start(&env, 4).await;
    // the controller's own writes fail too: its first Deployment creates
    // (429) and Foo status writes (500)
    let server = env.server().unwrap();
    let scope = |verb, resource: &str| FaultScope {
        verb: Some(verb),
        resource: Some(resource.to_owned()),
    };
    server.faults().fail_next_matching(
        5,
        Failure::TooManyRequests {
            retry_after_secs: 1,
        },
        scope(Verb::Create, "deployments.apps"),
    );
    server.faults().fail_next_matching(
        5,
        Failure::InternalError,
        scope(Verb::Update, "foos.samplecontroller.k8s.io"),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let faults = inject_faults(&env, Arc::clone(&stop));
    create_foos(&env, "foo", 0..FOOS).await;
    // faults go on for the first stretch of the convergence, then stop so
    // the last retries (backoff capped by the queue's limiter) can finish
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop.store(true, Ordering::Relaxed);
    let rounds = faults.await.unwrap();
    assert!(rounds >= 10, "faults were injected ({rounds} rounds)");
    all_converged(&env, FOOS, Duration::from_secs(120)).await;
    assert_eq!(
        deployment_creates(&env),
        FOOS,
        "each Deployment created once"
    );
    // two informers, their watches ended by the faults and reopened
    let watches = env
        .server()
        .unwrap()
        .request_log()
        .iter()
        .filter(|r| r.verb == Some(Verb::Watch))
        .count();
    assert!(
        watches > 2,
        "watches were dropped and reopened ({watches} watch requests)"
    );
    let stats = ctl.controller.stats();
    assert!(
        stats.sync_errors >= 10,
        "the failed writes were retried: {stats:?}"
    );
    ctl.stop().await;

    if let Some(real) = Env::real_cluster("thousand").await {
        let ctl = RunningController::start(&real, 4).await;
        create_foos(&real, "foo", 0..20).await;
        all_converged(&real, 20, real.patience(Duration::from_secs(60))).await;
        ctl.stop().await;
        real.cleanup().await;
        println!("a_thousand_foos: real cluster ran 20 Foos without injected faults");
    } else {
        println!("a_thousand_foos: real-cluster part skipped (KCONTROL_E2E_KUBECONFIG is not set)");
    }
}

async fn restart(env: Env, before: usize, after: usize) {
    let ctl = RunningController::start(&env, 2).await;
    // on the testserver, slow every request down so the controller is
    // surely stopped in the middle of its work
    if let Some(server) = env.server() {
        server.faults().set_latency(Duration::from_millis(5));
    }
    create_foos(&env, "r", 0..before).await;
    // stop in the middle: some Deployments exist, not all Foos are synced
    let api = env.deployments();
    eventually_within(
        "the first Deployments",
        env.patience(Duration::from_secs(30)),
        || {
            let api = api.clone();
            async move {
                let all = ListParams::default();
                let n = retry(|| api.list(&all)).await.items.len();
                (n >= before / 10).then_some(())
            }
        },
    )
    .await;
    ctl.stop().await;
    if let Some(server) = env.server() {
        server.faults().set_latency(Duration::ZERO);
    }
    let (_, deployments, synced) = state(&env).await;
    if env.server().is_some() {
        assert!(
            synced < before,
            "stopped before the work was done ({synced}/{before})"
        );
    }
    println!(
        "restart ({}): stopped with {} Deployments and {synced}/{before} Foos in sync",
        env.target(),
        deployments.len()
    );
    // while it is down: more Foos
    create_foos(&env, "r", before..before + after).await;

    let ctl = RunningController::start(&env, 2).await;
    all_converged(&env, before + after, env.patience(Duration::from_secs(60))).await;
    if env.server().is_some() {
        assert_eq!(
            deployment_creates(&env),
            before + after,
            "no Deployment created twice"
        );
    }
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_controller_resumes_without_duplicates_or_losses() {
    kcontrol_e2e::init_logging();
    let env = Env::testserver("restart").await;
    restart(env, 400, 100).await;
    match Env::real_cluster("restart").await {
        Some(real) => {
            restart(real.clone(), 20, 5).await;
            real.cleanup().await;
        }
        None => println!("restart: real-cluster part skipped (KCONTROL_E2E_KUBECONFIG is not set)"),
    }
}
