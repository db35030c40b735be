//! `Health` served over real HTTP on 127.0.0.1 (HL1-HL4).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use support::get;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kcontrol_controller::health::Health;
use kcontrol_controller::SharedRegistry;
use kcontrol_informer::SyncedFn;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

/// (status code, body) of a GET.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_503_until_every_check_passes_and_again_after_shutdown_starts() {
    let health = Health::new();
    let informer = Arc::new(AtomicBool::new(false));
    let handler = Arc::new(AtomicBool::new(false));
    {
        let informer = Arc::clone(&informer);
        health.add_synced(
            "informer-foos",
            Arc::new(SyncedFn(move || informer.load(Ordering::SeqCst))),
        );
    }
    {
        let handler = Arc::clone(&handler);
        health.add_check("handler-foos", move || handler.load(Ordering::SeqCst));
    }
    let shutdown = CancellationToken::new();
    let addr = health
        .serve("127.0.0.1:0".parse().unwrap(), shutdown.clone())
        .await
        .unwrap();

    assert_eq!(get(addr, "/healthz").await, (200, "ok\n".to_owned()));
    let (code, body) = get(addr, "/readyz").await;
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("[-]informer-foos not ready"), "{body}");

    informer.store(true, Ordering::SeqCst);
    let (code, body) = get(addr, "/readyz").await;
    assert_eq!(code, 503, "a handler still unsynced: {body}");
    assert!(body.contains("[+]informer-foos ok"), "{body}");
    assert!(body.contains("[-]handler-foos not ready"), "{body}");

    handler.store(true, Ordering::SeqCst);
    let (code, body) = get(addr, "/readyz").await;
    assert_eq!(code, 200, "{body}");
    assert!(health.is_ready());

    health.shutting_down();
    let (code, body) = get(addr, "/readyz").await;
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("shutdown in progress"), "{body}");
    // still alive while shutting down
    assert_eq!(get(addr, "/healthz").await.0, 200);
    assert_eq!(get(addr, "/nope").await.0, 404);
    assert_eq!(get(addr, "/metrics").await.0, 404, "no registry given");
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_serves_the_registry_given() {
    let mut registry = Registry::default();
    let counter: Counter = Counter::default();
    registry.register("demo_things", "Things.", counter.clone());
    let registry = SharedRegistry::from(registry);
    let health = Health::with_registry(registry);
    let shutdown = CancellationToken::new();
    let addr = health
        .serve("127.0.0.1:0".parse().unwrap(), shutdown.clone())
        .await
        .unwrap();
    counter.inc_by(3);
    let (code, body) = get(addr, "/metrics").await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("demo_things_total 3"), "{body}");
    // no checks at all: ready
    assert_eq!(get(addr, "/readyz").await.0, 200);
    shutdown.cancel();
}
