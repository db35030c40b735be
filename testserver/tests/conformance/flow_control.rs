//! The admission limit (priority and fairness, simplified): at most K API
//! requests in flight, 429 with `Retry-After: 1` beyond; a request holds
//! its seat until its answer is out, a watch only until its initial
//! events are; the builder option and the admin call set the same limit.

use crate::client::{Client, WAIT};
use crate::cm;
use kcontrol_testserver::try_eventually;
use kcontrol_testserver::TestServer;
use serde_json::json;
use std::time::Duration;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

async fn in_flight_reaches(s: &TestServer, n: u64) -> bool {
    try_eventually(format!("{n} requests in flight"), async || {
        s.counters().in_flight == n
    })
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_the_limit_get_429_with_retry_after_until_a_seat_frees() {
    let s = TestServer::builder()
        .max_requests_in_flight(2)
        .start()
        .await
        .unwrap();
    let c = Client::new(&s);
    c.post(CMS, &cm("a", json!({}))).await;
    // two slow lists take both seats
    s.faults().set_latency(Duration::from_secs(2));
    let slow: Vec<_> = (0..2)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { c.get(CMS).await.status })
        })
        .collect();
    assert!(in_flight_reaches(&s, 2).await, "{:?}", s.counters());
    let r = c.get(CMS).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after").as_deref(), Some("1"));
    assert!(String::from_utf8_lossy(&r.body).contains("Too many requests"));
    assert_eq!(s.counters().rejected_in_flight, 1);
    assert_eq!(
        c.get("/healthz").await.status,
        200,
        "health checks take no seat"
    );
    for h in slow {
        assert_eq!(h.await.unwrap(), 200, "admitted requests are served");
    }
    assert!(in_flight_reaches(&s, 0).await);
    s.faults().set_latency(Duration::ZERO);
    assert_eq!(c.get(CMS).await.status, 200, "a freed seat is taken again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_takes_no_seat_once_streaming_a_watch_list_until_its_initial_events_are_out() {
    let s = TestServer::start().await.unwrap();
    let c = Client::new(&s);
    // about 10 MB of initial events: more than the connection buffers, so
    // a client that does not read holds the WatchList in its initial phase
    let big = "x".repeat(1000);
    s.objects()
        .bulk_load(
            "configmaps",
            "default",
            (0..10_000).map(|i| {
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i}")}, "data": {"v": big}})
            }),
        )
        .unwrap();
    s.faults().limit_in_flight(Some(1));
    let rv = c.get(CMS).await.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    // a plain watch: streaming, seatless
    let plain = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={rv}"))
        .await;
    assert_eq!(plain.status, 200);
    assert!(in_flight_reaches(&s, 0).await, "{:?}", s.counters());
    assert_eq!(c.get(CMS).await.status, 200, "the watch holds no seat");
    // a WatchList not read from: its seat is held
    let mut listing = c
        .stream(&format!(
            "{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
        ))
        .await;
    assert_eq!(listing.status, 200);
    assert!(in_flight_reaches(&s, 1).await, "{:?}", s.counters());
    assert_eq!(
        c.get(CMS).await.status,
        429,
        "the only seat is the WatchList's"
    );
    // read it to its end bookmark: the seat is free again
    let mut added = 0;
    loop {
        let e = listing.next_event(WAIT).await.expect("initial events");
        if e["type"] == "BOOKMARK" {
            assert_eq!(
                e["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
                "true"
            );
            break;
        }
        added += 1;
    }
    assert_eq!(added, 10_000);
    assert!(in_flight_reaches(&s, 0).await, "{:?}", s.counters());
    assert_eq!(c.get(&format!("{CMS}?limit=1")).await.status, 200);
    assert_eq!(s.counters().active_watches, 2, "both watches still stream");
    drop(plain);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_endpoint_sets_and_lifts_the_limit() {
    let s = TestServer::start().await.unwrap();
    let c = Client::new(&s);
    let post = |p: &str| {
        let c = c.clone();
        let p = p.to_owned();
        async move {
            c.send_raw("POST", &format!("/__admin/{p}"), None, None, None)
                .await
        }
    };
    assert_eq!(post("max-in-flight?limit=1").await.status, 200);
    s.faults().set_latency(Duration::from_secs(2));
    let slow = {
        let c = c.clone();
        tokio::spawn(async move { c.get(CMS).await.status })
    };
    assert!(in_flight_reaches(&s, 1).await);
    assert_eq!(c.get(CMS).await.status, 429);
    assert_eq!(
        c.get("/__admin/counters").await.json()["rejectedInFlight"],
        1,
        "admin calls take no seat"
    );
    assert_eq!(slow.await.unwrap(), 200);
    s.faults().set_latency(Duration::ZERO);
    assert_eq!(post("max-in-flight?limit=0").await.status, 200);
    assert_eq!(post("max-in-flight?limit=x").await.status, 400);
    let all: Vec<_> = (0..20)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { c.get(CMS).await.status })
        })
        .collect();
    for h in all {
        assert_eq!(h.await.unwrap(), 200, "no limit any more");
    }
}
