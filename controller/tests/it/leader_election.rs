//! Leader election against the in-process API server (LE1-LE6): one
//! leader at a time, release hands over at once, a leader that cannot
//! renew stops before its lease can expire for anyone else, a renewal that
//! meets a 409 is retried at once. Short durations; the tests wait for
//! events (callbacks, the request log), with generous safety deadlines.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kcontrol_client::{Api, Client, Config, Kubeconfig, KubeconfigOptions, PostParams};
use kcontrol_controller::leader_election::{
    LeaderElectionConfig, LeaderElectionError, LeaderElector,
};
use kcontrol_testserver::{eventually_within, Failure, FaultScope, TestServer, Verb};
use prometheus_client::registry::Registry;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const SAFETY: Duration = Duration::from_secs(60);

fn client(server: &TestServer) -> Client {
    client_as(server, "kcontrol-test")
}

fn client_as(server: &TestServer, user_agent: &str) -> Client {
    let kubeconfig = Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let mut config =
        Config::from_custom_kubeconfig(&kubeconfig, &KubeconfigOptions::default()).unwrap();
    config.user_agent = user_agent.to_owned();
    Client::try_from(config).unwrap()
}

fn config(identity: &str, lease: u64, renew_ms: u64, retry_ms: u64) -> LeaderElectionConfig {
    let mut config = LeaderElectionConfig::new("default", "demo-lock");
    config.identity = identity.to_owned();
    config.lease_duration = Duration::from_secs(lease);
    config.renew_deadline = Duration::from_millis(renew_ms);
    config.retry_period = Duration::from_millis(retry_ms);
    config
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    Started(String),
    Stopped(String),
    NewLeader { observer: String, leader: String },
}

/// What every test here starts with: a server, the channel candidates'
/// callbacks report to, how many lead at once, and whether two ever did.
async fn election() -> (
    TestServer,
    mpsc::UnboundedSender<(Instant, Event)>,
    mpsc::UnboundedReceiver<(Instant, Event)>,
    Arc<AtomicI32>,
    Arc<AtomicBool>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let server = TestServer::start().await.unwrap();
    let (leaders, overlap) = (
        Arc::new(AtomicI32::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    (server, tx, rx, leaders, overlap)
}

/// A candidate whose callbacks report to `events`; `leaders` counts the
/// candidates leading at once, and `overlap` is set if ever two did.
fn candidate(
    server: &TestServer,
    config: LeaderElectionConfig,
    events: &mpsc::UnboundedSender<(Instant, Event)>,
    leaders: &Arc<AtomicI32>,
    overlap: &Arc<AtomicBool>,
) -> Arc<LeaderElector> {
    let id = config.identity.clone();
    let (e1, e2, e3) = (events.clone(), events.clone(), events.clone());
    let (id1, id2, id3) = (id.clone(), id.clone(), id);
    let (l1, l2, o1) = (
        Arc::clone(leaders),
        Arc::clone(leaders),
        Arc::clone(overlap),
    );
    Arc::new(
        LeaderElector::new(client(server), config)
            .unwrap()
            .on_started_leading(move |_token| {
                if l1.fetch_add(1, Ordering::SeqCst) != 0 {
                    o1.store(true, Ordering::SeqCst);
                }
                let _ = e1.send((Instant::now(), Event::Started(id1.clone())));
            })
            .on_stopped_leading(move || {
                l2.fetch_sub(1, Ordering::SeqCst);
                let _ = e2.send((Instant::now(), Event::Stopped(id2.clone())));
            })
            .on_new_leader(move |leader| {
                let _ = e3.send((
                    Instant::now(),
                    Event::NewLeader {
                        observer: id3.clone(),
                        leader: leader.to_owned(),
                    },
                ));
            }),
    )
}

fn spawn_run(
    elector: &Arc<LeaderElector>,
    stop: &CancellationToken,
) -> tokio::task::JoinHandle<Result<(), LeaderElectionError>> {
    let elector = Arc::clone(elector);
    let stop = stop.clone();
    tokio::spawn(async move { elector.run(stop).await })
}

async fn wait_for(events: &mut mpsc::UnboundedReceiver<(Instant, Event)>, want: &Event) -> Instant {
    let deadline = Instant::now() + SAFETY;
    loop {
        let (at, event) = tokio::time::timeout_at(deadline, events.recv())
            .await
            .unwrap_or_else(|_| panic!("no {want:?} within {SAFETY:?}"))
            .expect("events channel open");
        if &event == want {
            return at;
        }
    }
}

async fn lease(server: &TestServer) -> Lease {
    Api::<Lease>::namespaced(client(server), "default")
        .get("demo-lock")
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_a_release_hands_over_before_the_lease_expires() {
    let (server, tx, mut rx, leaders, overlap) = election().await;
    // a lease longer than every wait below: only a release hands it over
    // in time, never its expiry
    let lease_secs = 2 * SAFETY.as_secs();
    let mut registry = Registry::default();
    let a = candidate(
        &server,
        config("a", lease_secs, 3000, 1000),
        &tx,
        &leaders,
        &overlap,
    );
    let b = candidate(
        &server,
        config("b", lease_secs, 3000, 1000),
        &tx,
        &leaders,
        &overlap,
    );
    // the metric, on a separate elector of the same lease (b's twin)
    let metric = LeaderElector::new(client(&server), config("m", lease_secs, 3000, 1000))
        .unwrap()
        .with_registry(&mut registry);
    let stop_a = CancellationToken::new();
    let stop_b = CancellationToken::new();
    let run_a = spawn_run(&a, &stop_a);
    wait_for(&mut rx, &Event::Started("a".into())).await;
    assert!(a.is_leader());
    let run_b = spawn_run(&b, &stop_b);
    wait_for(
        &mut rx,
        &Event::NewLeader {
            observer: "b".into(),
            leader: "a".into(),
        },
    )
    .await;
    assert!(!b.is_leader());
    assert_eq!(b.observed_leader().as_deref(), Some("a"));

    // a stays leader through several renewals while b keeps trying
    let renewed = lease(&server).await.spec.unwrap().renew_time.unwrap();
    let now = eventually_within("a renewal of the lease", SAFETY, async || {
        let now = lease(&server).await.spec.unwrap();
        (now.renew_time.as_ref() != Some(&renewed)).then_some(now)
    })
    .await;
    assert_eq!(now.holder_identity.as_deref(), Some("a"));
    assert!(!b.is_leader());

    // graceful shutdown of a: it releases the lease, b takes it over at its
    // next try (within 2.2 retry periods), long before the lease expires
    stop_a.cancel();
    run_a.await.unwrap().unwrap();
    wait_for(&mut rx, &Event::Started("b".into())).await;
    assert!(!overlap.load(Ordering::SeqCst), "two leaders at once");
    let spec = lease(&server).await.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));
    assert_eq!(spec.lease_duration_seconds, i32::try_from(lease_secs).ok());

    // the metric reads 0 for a standby
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains("leader_election_master_status{name=\"demo-lock\"} 0"),
        "{text}"
    );
    let stop_m = CancellationToken::new();
    let run_m = spawn_run(&Arc::new(metric), &stop_m);
    stop_b.cancel();
    run_b.await.unwrap().unwrap();
    // b released: m acquires
    eventually_within("m to lead", SAFETY, async || {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text.contains("leader_election_master_status{name=\"demo-lock\"} 1")
    })
    .await;
    stop_m.cancel();
    run_m.await.unwrap().unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_stops_leading_before_its_lease_can_expire() {
    let (server, tx, mut rx, leaders, overlap) = election().await;
    let a = candidate(&server, config("a", 3, 2000, 500), &tx, &leaders, &overlap);
    let b = candidate(&server, config("b", 3, 2000, 500), &tx, &leaders, &overlap);
    let stop = CancellationToken::new();
    let run_a = spawn_run(&a, &stop);
    wait_for(&mut rx, &Event::Started("a".into())).await;
    let run_b = spawn_run(&b, &stop);
    wait_for(
        &mut rx,
        &Event::NewLeader {
            observer: "b".into(),
            leader: "a".into(),
        },
    )
    .await;

    // every Lease write fails from now on
    server.faults().fail_next_matching(
        1_000_000,
        Failure::InternalError,
        FaultScope {
            verb: Some(Verb::Update),
            resource: Some("leases".into()),
        },
    );
    let outcome = tokio::time::timeout(SAFETY, run_a).await.unwrap().unwrap();
    assert!(
        matches!(outcome, Err(LeaderElectionError::Lost { .. })),
        "{outcome:?}"
    );
    assert!(!a.is_leader());
    // when a stopped, the lease it last renewed had not expired: nobody
    // could have acquired it yet
    let spec = lease(&server).await.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    let renewed = spec.renew_time.unwrap().0;
    let expires = renewed.as_second() as f64
        + f64::from(renewed.subsec_nanosecond()) / 1e9
        + f64::from(spec.lease_duration_seconds.unwrap());
    assert!(
        unix_now() < expires,
        "a stopped leading only after its lease expired ({expires})"
    );
    let events: Vec<Event> = std::iter::from_fn(|| rx.try_recv().ok().map(|(_, e)| e)).collect();
    assert!(events.contains(&Event::Stopped("a".into())), "{events:?}");
    assert!(!events.contains(&Event::Started("b".into())), "{events:?}");

    // the server accepts writes again: b takes over after the lease expires
    server.faults().reset();
    wait_for(&mut rx, &Event::Started("b".into())).await;
    assert!(!overlap.load(Ordering::SeqCst), "two leaders at once");
    stop.cancel();
    run_b.await.unwrap().unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_that_meets_a_conflict_is_retried_at_once() {
    let (server, tx, mut rx, leaders, overlap) = election().await;
    let a = candidate(&server, config("a", 3, 2000, 500), &tx, &leaders, &overlap);
    let stop = CancellationToken::new();
    let run_a = spawn_run(&a, &stop);
    wait_for(&mut rx, &Event::Started("a".into())).await;

    // someone else writes the Lease: a's next renewal, over the Lease it
    // wrote last, meets 409
    server.clear_request_log();
    let api = Api::<Lease>::namespaced(client_as(&server, "touch"), "default");
    let mut current = api.get("demo-lock").await.unwrap();
    current
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("touched".into(), "yes".into());
    api.replace("demo-lock", &PostParams::default(), &current)
        .await
        .unwrap();

    let lease_requests = eventually_within("a renewal after a 409", SAFETY, async || {
        let log: Vec<_> = server
            .request_log()
            .into_iter()
            .filter(|r| {
                r.resource.as_deref() == Some("leases.coordination.k8s.io")
                    && r.user_agent != "touch"
            })
            .map(|r| (r.verb, r.status))
            .collect();
        let conflict = log
            .iter()
            .position(|(v, s)| *v == Some(Verb::Update) && *s == 409);
        let i = conflict?;
        let renewed = log[i + 1..]
            .iter()
            .any(|(v, s)| *v == Some(Verb::Update) && *s == 200);
        renewed.then(|| log[i..].to_vec())
    })
    .await;
    // retried at once: read, then write, with no renewal period between
    assert_eq!(
        &lease_requests[..3],
        &[
            (Some(Verb::Update), 409),
            (Some(Verb::Get), 200),
            (Some(Verb::Update), 200)
        ],
        "{lease_requests:?}"
    );
    assert!(a.is_leader());
    let spec = lease(&server).await.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    assert_eq!(spec.lease_transitions, Some(0), "still the same tenure");
    stop.cancel();
    run_a.await.unwrap().unwrap();
    let events: Vec<Event> = std::iter::from_fn(|| rx.try_recv().ok().map(|(_, e)| e)).collect();
    assert_eq!(events, vec![Event::Stopped("a".into())]);
    server.shutdown().await;
}

#[test]
fn the_configuration_is_checked() {
    let ok = LeaderElectionConfig::new("ns", "lock");
    assert!(ok.validate().is_ok());
    assert!(ok.identity.contains('_'), "{}", ok.identity);
    assert_ne!(
        ok.identity,
        LeaderElectionConfig::new("ns", "lock").identity
    );
    for (lease, renew, retry) in [(10, 10_000, 2000), (15, 10_000, 9000), (15, 10_000, 0)] {
        let mut c = ok.clone();
        c.lease_duration = Duration::from_secs(lease);
        c.renew_deadline = Duration::from_millis(renew);
        c.retry_period = Duration::from_millis(retry);
        assert!(c.validate().is_err(), "{c:?}");
    }
    let mut c = ok.clone();
    c.lease_duration = Duration::from_millis(1500);
    assert!(c.validate().is_err());
}

/// Seconds since the Unix epoch, now.
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The standby's requests on the Lease, in order.
fn standby_requests(server: &TestServer) -> Vec<Option<Verb>> {
    let log = server.request_log().into_iter();
    log.filter(|r| {
        r.user_agent == "standby" && r.resource.as_deref() == Some("leases.coordination.k8s.io")
    })
    .map(|r| r.verb)
    .collect()
}

/// With `watch`, a standby sees each renewal as it is written: while the
/// leader renews it makes no request besides its first read and its
/// watch, though the leader's record (6 s) would have expired twice over
/// by the one renewal its read saw; once the leader is gone it takes the
/// Lease. (Without the watch it reads again when that record expires.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watching_standby_follows_renewals_without_polling() {
    let (server, tx, mut rx, leaders, overlap) = election().await;
    let mut leader_config = config("leader", 6, 4000, 300);
    leader_config.release_on_cancel = false;
    let leader = candidate(&server, leader_config, &tx, &leaders, &overlap);
    let leader_stop = CancellationToken::new();
    let run_leader = spawn_run(&leader, &leader_stop);
    wait_for(&mut rx, &Event::Started("leader".into())).await;

    // polls every 40-88 s: only the record's expiry or the watch wakes it
    let mut standby_config = config("standby", 60, 50_000, 40_000);
    standby_config.watch = true;
    let started = tx.clone();
    let standby = LeaderElector::new(client_as(&server, "standby"), standby_config)
        .unwrap()
        .on_started_leading(move |_token| {
            let _ = started.send((Instant::now(), Event::Started("standby".into())));
        });
    let standby = Arc::new(standby);
    let standby_stop = CancellationToken::new();
    let run_standby = spawn_run(&standby, &standby_stop);
    let renewals_after_watch = |server: &TestServer| {
        let log = server.request_log();
        let watch = log
            .iter()
            .position(|r| r.user_agent == "standby" && r.verb == Some(Verb::Watch))?;
        let renewals = log[watch..].iter().filter(|r| {
            r.user_agent == "kcontrol-test" && r.verb == Some(Verb::Update) && r.status == 200
        });
        Some(renewals.count())
    };
    // 30 renewals of 300 ms: more than 6 s of them
    eventually_within(
        "30 renewals after the standby's watch",
        SAFETY,
        async || renewals_after_watch(&server).filter(|n| *n >= 30),
    )
    .await;
    assert_eq!(
        standby_requests(&server),
        [Some(Verb::Get), Some(Verb::Watch)],
        "the standby read the Lease again while it was renewed"
    );

    leader_stop.cancel();
    run_leader.await.unwrap().unwrap();
    wait_for(&mut rx, &Event::Started("standby".into())).await;
    assert!(standby.is_leader());
    assert!(!overlap.load(Ordering::SeqCst));
    standby_stop.cancel();
    run_standby.await.unwrap().unwrap();
    server.shutdown().await;
}
