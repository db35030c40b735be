//! RF1 with RF9: a list (or WatchList) that fails after delivering part of
//! its objects into the FIFO is retried at a version not older than what it
//! delivered (`resourceVersionMatch=NotOlderThan`), so a lagging API server
//! replica cannot make handlers see objects go back in time or vanish.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_reflector::ReflectorConfig;
use kcontrol_testserver::{TestServer, Verb};

use crate::support::*;

/// Seeds 2000 objects, then (after the version returned) creates ten
/// objects that sort first and updates four early ones: a replica frozen at
/// the returned version has the old states and lacks the new objects.
fn seed_then_move_on(server: &TestServer) -> u64 {
    bulk_seed(server, 2000);
    let old = bump_version(server);
    for i in 0..10 {
        server
            .objects()
            .create("configmaps", NS, configmap(&format!("a-new-{i}"), "v"))
            .unwrap();
    }
    for name in ["bulk-0", "bulk-1", "bulk-10", "bulk-100"] {
        update(server, name, "newer");
    }
    old
}

/// Cuts the first request matching `is_target` after 64 KiB of its body
/// (the objects that sort first are delivered); the requests after it find
/// a replica frozen at `old` for their next `lagging` lists and watches.
fn cut_then_lag(
    proxy: &Proxy,
    server: &TestServer,
    old: u64,
    lagging: u64,
    is_target: impl Fn(&str) -> bool + Send + Sync + 'static,
) {
    let faults = server.faults().clone();
    let step = AtomicUsize::new(0);
    proxy.set_rule(move |_, _, q| match step.load(Ordering::SeqCst) {
        0 if is_target(q) => {
            step.store(1, Ordering::SeqCst);
            Action::ForwardThen {
                query: q.to_owned(),
                after_bytes: 64 * 1024,
                then: Then::Cut,
            }
        }
        1 => {
            step.store(2, Ordering::SeqCst);
            faults.serve_from_lagging_replica(lagging, old);
            Action::Forward(q.to_owned())
        }
        _ => Action::Forward(q.to_owned()),
    });
}

fn assert_never_back_in_time(h: &Harness) {
    let (regressions, deleted) = {
        let popped = h.popped.lock().unwrap();
        (popped.regressions.clone(), popped.deleted.clone())
    };
    assert!(
        regressions.is_empty(),
        "handlers saw objects go back: {:?}",
        &regressions[..regressions.len().min(5)]
    );
    assert!(
        deleted.is_empty(),
        "handlers saw existing objects deleted: {:?}",
        &deleted[..deleted.len().min(5)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf1_a_list_cut_short_is_retried_not_older_than_what_it_delivered() {
    let server = server().await;
    let old = seed_then_move_on(&server);
    let proxy = Proxy::start(server.url()).await;
    cut_then_lag(&proxy, &server, old, 3, |q| param(q, "watch").is_none());
    let h = Harness::for_url(
        &proxy.url(),
        ReflectorConfig::<ConfigMap>::default().watch_config(fast_watch()),
    );
    h.synced().await;
    h.converge(&server).await;
    assert_never_back_in_time(&h);
    let lists = requests(&server, Verb::List);
    assert!(lists.len() >= 2, "{lists:?}");
    // the retry asked for the version the cut list had delivered, at least
    let retry = &lists[1];
    assert_eq!(
        param(&retry.query, "resourceVersionMatch").as_deref(),
        Some("NotOlderThan"),
        "{}",
        retry.query
    );
    let asked: u64 = param(&retry.query, "resourceVersion")
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        asked > old,
        "the retry asked for {asked}, the replica is at {old}"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf1_the_list_fallback_after_a_cut_watch_list_is_not_older_than_its_events() {
    let server = server().await;
    let old = seed_then_move_on(&server);
    let proxy = Proxy::start(server.url()).await;
    // the first WatchList stream is cut after its first objects (the new
    // ones, which sort first); the list the reflector falls back to in the
    // same attempt is the next request a watch cache serves, and a replica
    // frozen at `old` (before those objects) serves it
    let faults = server.faults().clone();
    let cut = AtomicBool::new(false);
    proxy.set_rule(move |_, _, q| {
        if param(q, "sendInitialEvents").is_some() && !cut.swap(true, Ordering::SeqCst) {
            faults.serve_from_lagging_replica(1, old);
            return Action::ForwardThen {
                query: q.to_owned(),
                after_bytes: 64 * 1024,
                then: Then::Cut,
            };
        }
        Action::Forward(q.to_owned())
    });
    let h = Harness::for_url(
        &proxy.url(),
        ReflectorConfig::<ConfigMap>::default().watch_config(fast_watch().use_watch_list(true)),
    );
    h.synced().await;
    h.converge(&server).await;
    assert_never_back_in_time(&h);
    let lists = requests(&server, Verb::List);
    assert!(lists.len() >= 2, "{lists:?}");
    // the fallback asked for the version the stream had delivered, at
    // least: the replica could not serve it (504) ...
    let fallback = &lists[0];
    assert_eq!(
        param(&fallback.query, "resourceVersionMatch").as_deref(),
        Some("NotOlderThan"),
        "{}",
        fallback.query
    );
    let asked: u64 = param(&fallback.query, "resourceVersion")
        .unwrap()
        .parse()
        .unwrap();
    assert!(asked > old, "asked for {asked}, the replica is at {old}");
    assert_eq!(fallback.status, 504, "the lagging replica answered it");
    // ... asking for a second (RF5): the same list, sent again, found a
    // replica that had caught up
    let again = &lists[1];
    assert_eq!(again.query, fallback.query);
    assert_eq!(again.status, 200);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lagging_replica_fault_serves_an_older_state() {
    let server = server().await;
    seed(&server, 3);
    let old = bump_version(&server);
    update(&server, "cm-0", "newer");
    server.faults().serve_from_lagging_replica(2, old);
    let api: kcontrol_client::Api<ConfigMap> =
        kcontrol_client::Api::namespaced(client_for(server.url()), NS);
    let lp = kcontrol_client::ListParams::default().resource_version("0");
    let stale = api.list(&lp).await.unwrap();
    assert_eq!(stale.resource_version(), Some(old.to_string().as_str()));
    let cm0 = stale
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some("cm-0"))
        .unwrap();
    assert_eq!(cm0.data.as_ref().unwrap()["value"], "v0");
    // newer than the replica: 504 Too large resource version
    let newer = kcontrol_client::ListParams::default()
        .resource_version(&(old + 1).to_string())
        .resource_version_match(kcontrol_client::ResourceVersionMatch::NotOlderThan);
    let err = api.list(&newer).await.unwrap_err();
    assert!(err.is_too_large_resource_version(), "{err}");
    // used up: fresh again
    let fresh = api.list(&lp).await.unwrap();
    assert!(fresh.resource_version().unwrap().parse::<u64>().unwrap() > old);
}
