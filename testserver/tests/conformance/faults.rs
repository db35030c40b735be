//! Fault injection through the library handle and the admin endpoint;
//! the request log and counters.

use crate::client::{Client, Line, WAIT};
use crate::{cm, server};
use kcontrol_testserver::eventually;
use kcontrol_testserver::{Failure, FaultScope, Flapping, Restart, Verb};
use serde_json::json;
use std::time::Duration;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn rv(v: &serde_json::Value) -> String {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn closing_and_limiting_watches() {
    let s = server().await;
    let c = Client::new(&s);
    let start = rv(&c.post(CMS, &cm("a", json!({}))).await.json());
    let mut w1 = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={start}"))
        .await;
    let mut w2 = c
        .stream(&format!(
            "/api/v1/namespaces?watch=true&resourceVersion={start}"
        ))
        .await;
    // a watch counts as open before its response headers are sent, so both
    // are counted by now; polled all the same, the count is what matters
    eventually("both watches registered", async || {
        s.counters().active_watches == 2
    })
    .await;
    s.faults().close_all_watches();
    assert!(w1.ends_within(WAIT).await);
    assert!(w2.ends_within(WAIT).await);
    s.faults().close_watches_after(Some(2));
    let mut w = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={start}"))
        .await;
    for n in ["b", "c", "d"] {
        c.post(CMS, &cm(n, json!({}))).await;
    }
    assert_eq!(
        w.next_event(WAIT).await.unwrap()["object"]["metadata"]["name"],
        "b"
    );
    assert_eq!(
        w.next_event(WAIT).await.unwrap()["object"]["metadata"]["name"],
        "c"
    );
    assert!(w.ends_within(WAIT).await, "closed after two events");
    s.faults().close_watches_after(None);
    assert!(s.counters().watches_opened >= 3);
}

#[tokio::test]
async fn forced_expiry_and_compaction() {
    let s = server().await;
    let c = Client::new(&s);
    let start = rv(&c.post(CMS, &cm("a", json!({}))).await.json());
    s.faults().expire_next_lists(1);
    let r = c.get(CMS).await;
    assert_eq!(
        (r.status, r.json()["reason"].as_str()),
        (410, Some("Expired"))
    );
    assert_eq!(c.get(CMS).await.status, 200, "only the next one");
    s.faults().expire_next_watches(1);
    let mut w = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={start}"))
        .await;
    let e = w.next_event(WAIT).await.unwrap();
    assert_eq!(
        (e["type"].as_str(), e["object"]["code"].as_i64()),
        (Some("ERROR"), Some(410))
    );
    c.post(CMS, &cm("b", json!({}))).await;
    s.faults().compact();
    let mut w = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={start}"))
        .await;
    assert_eq!(
        w.next_event(WAIT).await.unwrap()["object"]["reason"],
        "Expired"
    );
}

#[tokio::test]
async fn injected_errors_latency_and_scopes() {
    let s = server().await;
    let c = Client::new(&s);
    s.faults().fail_next(
        2,
        Failure::TooManyRequests {
            retry_after_secs: 3,
        },
    );
    let r = c.get(CMS).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after").as_deref(), Some("3"));
    assert_eq!(r.json()["reason"], "TooManyRequests");
    assert_eq!(r.json()["details"]["retryAfterSeconds"], 3);
    assert_eq!(c.get("/api/v1/namespaces").await.status, 429);
    assert_eq!(c.get(CMS).await.status, 200);
    s.faults().fail_next(1, Failure::InternalError);
    let r = c.get(CMS).await;
    assert_eq!(
        (r.status, r.json()["reason"].as_str()),
        (500, Some("InternalError"))
    );
    s.faults().fail_next(1, Failure::ServiceUnavailable);
    assert_eq!(c.get(CMS).await.status, 503);
    s.faults().fail_next_matching(
        1,
        Failure::InternalError,
        FaultScope {
            verb: Some(Verb::Create),
            resource: Some("configmaps".into()),
        },
    );
    assert_eq!(c.get(CMS).await.status, 200, "a list is out of scope");
    assert_eq!(c.post(CMS, &cm("x", json!({}))).await.status, 500);
    assert_eq!(c.post(CMS, &cm("x", json!({}))).await.status, 201);
    assert_eq!(
        c.get("/healthz").await.status,
        200,
        "health is never faulted"
    );
    s.faults().set_latency(Duration::from_millis(50));
    assert_eq!(c.get(CMS).await.status, 200);
    s.faults().reset();
}

#[tokio::test]
async fn corrupt_frames_and_paused_delivery() {
    let s = server().await;
    let c = Client::new(&s);
    let start = rv(&c.post(CMS, &cm("a", json!({}))).await.json());
    let mut w = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={start}"))
        .await;
    s.faults().corrupt_next_watch_frames(1);
    c.post(CMS, &cm("b", json!({}))).await;
    c.post(CMS, &cm("c", json!({}))).await;
    assert!(
        matches!(w.next_line(WAIT).await, Some(Line::Garbage(_))),
        "the frame for b is corrupt"
    );
    assert_eq!(
        w.next_event(WAIT).await.unwrap()["object"]["metadata"]["name"],
        "c",
        "the stream goes on"
    );
    s.faults().send_unexpected_kind_frames(1);
    c.post(CMS, &cm("c2", json!({}))).await;
    let e = w.next_event(WAIT).await.unwrap();
    assert_eq!(
        (e["type"].as_str(), e["object"]["kind"].as_str()),
        (Some("ADDED"), Some("Status"))
    );

    s.faults().pause_watches();
    c.post(CMS, &cm("d", json!({}))).await;
    assert!(
        w.next_line(Duration::from_millis(300)).await.is_none(),
        "nothing while paused"
    );
    s.faults().resume_watches();
    assert_eq!(
        w.next_event(WAIT).await.unwrap()["object"]["metadata"]["name"],
        "d"
    );
}

#[tokio::test]
async fn the_admin_endpoint_drives_the_same_faults() {
    let s = server().await;
    let c = Client::new(&s);
    let start = rv(&c.post(CMS, &cm("a", json!({}))).await.json());
    let post = |p: &str| {
        let c = c.clone();
        let p = p.to_owned();
        async move {
            c.send_raw("POST", &format!("/__admin/{p}"), None, None, None)
                .await
        }
    };
    assert_eq!(
        post("fail?count=1&code=429&retryAfter=2&verb=list&resource=configmaps")
            .await
            .status,
        200
    );
    assert_eq!(c.get("/api/v1/namespaces").await.status, 200);
    assert_eq!(c.get(CMS).await.header("retry-after").as_deref(), Some("2"));
    post("expire?lists=1").await;
    assert_eq!(c.get(CMS).await.status, 410);
    let mut w = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={start}"))
        .await;
    eventually("the watch registered before close-watches", || async {
        s.counters().active_watches == 1
    })
    .await;
    post("close-watches").await;
    assert!(w.ends_within(WAIT).await);
    c.post(CMS, &cm("b", json!({}))).await;
    post("compact").await;
    let mut w = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={start}"))
        .await;
    assert_eq!(w.next_event(WAIT).await.unwrap()["type"], "ERROR");
    assert_eq!(post("fail?code=418").await.status, 400);
    assert_eq!(post("nonsense").await.status, 404);
    post("deployment-simulator?enabled=false").await;
    post("reset").await;

    let counters = c.get("/__admin/counters").await.json();
    let lists = counters["byVerbResource"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["verb"] == "list" && e["resource"] == "configmaps")
        .unwrap()["count"]
        .as_u64()
        .unwrap();
    assert_eq!(lists, 2, "the 429 and the 410");
    assert_eq!(s.counters().count("list", "configmaps"), lists);
    assert!(s.counters().by_status.get(&410).copied().unwrap_or(0) >= 1);
    let log = c.get("/__admin/requests").await.json();
    let entry = log["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["verb"] == "create")
        .unwrap()
        .clone();
    assert_eq!(
        (
            entry["resource"].as_str(),
            entry["status"].as_u64(),
            entry["namespace"].as_str()
        ),
        (Some("configmaps"), Some(201), Some("default"))
    );
    let rec = s
        .request_log()
        .into_iter()
        .find(|r| r.verb == Some(Verb::Watch))
        .unwrap();
    assert_eq!(rec.status, 200);
    assert!(rec.query.contains("watch=true"));
    c.send_raw("DELETE", "/__admin/requests", None, None, None)
        .await;
    assert!(s.request_log().len() <= 1);
}

#[tokio::test]
async fn a_watcher_left_behind_the_window_is_closed() {
    let s = kcontrol_testserver::TestServer::builder()
        .history_size(5)
        .start()
        .await
        .unwrap();
    let c = Client::new(&s);
    let start = rv(&c.post(CMS, &cm("a", json!({}))).await.json());
    let mut w = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={start}"))
        .await;
    // its start version is fixed when the watch registers: from then on the
    // evictions below leave it behind whether or not its task ran yet
    eventually("the watch registered before the writes", || async {
        s.counters().active_watches == 1
    })
    .await;
    s.faults().pause_watches();
    for i in 0..10 {
        c.post(CMS, &cm(&format!("n{i}"), json!({}))).await;
    }
    s.faults().resume_watches();
    assert!(
        w.ends_within(WAIT).await,
        "the watcher missed evicted events: its stream ends"
    );
    // re-watching from where it was is now too old
    let mut again = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={start}"))
        .await;
    assert_eq!(again.next_event(WAIT).await.unwrap()["object"]["code"], 410);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_cuts_then_refuses_then_answers_503_then_429_then_410_for_old_versions() {
    let s = server().await;
    let c = Client::new(&s);
    let start = rv(&c.post(CMS, &cm("a", json!({}))).await.json());
    let mut w = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={start}"))
        .await;
    let faults = s.faults().clone();
    let restarting = tokio::spawn(async move {
        faults
            .restart(Restart {
                down: Duration::from_secs(3),
                unavailable: Duration::from_secs(600),
                initializing: Duration::ZERO,
            })
            .await;
    });
    assert!(w.ends_within(WAIT).await, "the watch is cut");
    assert!(
        tokio::net::TcpStream::connect(s.addr()).await.is_err(),
        "the port refuses connections while the server is down"
    );
    tokio::time::timeout(WAIT, restarting)
        .await
        .unwrap()
        .unwrap();
    let r = c.get(CMS).await;
    assert_eq!(
        (r.status, r.header("retry-after").as_deref()),
        (503, Some("1"))
    );
    s.faults().reset();
    s.faults()
        .restart(Restart {
            down: Duration::ZERO,
            unavailable: Duration::ZERO,
            initializing: Duration::from_secs(600),
        })
        .await;
    let list = c.get(CMS).await;
    assert_eq!(
        list.status, 200,
        "lists are served while the watch cache fills"
    );
    let list = list.json();
    assert_eq!(list["items"][0]["metadata"]["name"], "a", "objects survive");
    let now = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(now.parse::<u64>().unwrap() > start.parse::<u64>().unwrap());
    let r = c
        .get(&format!("{CMS}?watch=true&resourceVersion={now}"))
        .await;
    assert_eq!(r.status, 429, "watches wait for the watch cache");
    s.faults().reset();
    let mut old = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={start}"))
        .await;
    assert_eq!(
        old.next_event(WAIT).await.unwrap()["object"]["reason"],
        "Expired",
        "history from before the restart is gone"
    );
    let mut fresh = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={now}"))
        .await;
    c.post(CMS, &cm("b", json!({}))).await;
    assert_eq!(
        fresh.next_event(WAIT).await.unwrap()["object"]["metadata"]["name"],
        "b"
    );
}

#[tokio::test]
async fn a_503_asks_to_come_back_in_a_second() {
    let s = server().await;
    let c = Client::new(&s);
    s.faults().fail_for(
        Duration::from_secs(600),
        Failure::ServiceUnavailable,
        FaultScope {
            verb: Some(Verb::Watch),
            resource: Some("configmaps".into()),
        },
    );
    let r = c.get(&format!("{CMS}?watch=true")).await;
    assert_eq!(
        (r.status, r.header("retry-after").as_deref()),
        (503, Some("1"))
    );
    assert_eq!(r.json()["reason"], "ServiceUnavailable");
    assert_eq!(c.get(CMS).await.status, 200, "lists are served");
}

#[tokio::test]
async fn a_watch_list_window_throttles_watch_lists_only() {
    let s = server().await;
    let c = Client::new(&s);
    c.post(CMS, &cm("a", json!({}))).await;
    s.faults().fail_watch_lists_for(
        Duration::from_secs(600),
        Failure::TooManyRequests {
            retry_after_secs: 1,
        },
    );
    let watch_list =
        format!("{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan");
    let r = c.get(&watch_list).await;
    assert_eq!(
        (r.status, r.header("retry-after").as_deref()),
        (429, Some("1"))
    );
    assert_eq!(c.get(CMS).await.status, 200, "lists are served");
    let mut plain = c.stream(&format!("{CMS}?watch=true")).await;
    assert_eq!(plain.status, 200, "plain watches are served");
    assert_eq!(
        plain.next_event(WAIT).await.unwrap()["object"]["metadata"]["name"],
        "a"
    );
    s.faults().reset();
    let listing = c.stream(&watch_list).await;
    assert_eq!(listing.status, 200);
    // the admin endpoint opens the same window
    let r = c
        .send_raw(
            "POST",
            "/__admin/fail-for?ms=600000&code=429&retryAfter=2&watchList=true",
            None,
            None,
            None,
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(c.get(&watch_list).await.status, 429);
    assert_eq!(
        c.get(&format!("{CMS}?watch=true&timeoutSeconds=1"))
            .await
            .status,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flapping_restarts_the_server_again_and_again() {
    let s = server().await;
    let c = Client::new(&s);
    let start = rv(&c.post(CMS, &cm("a", json!({}))).await.json());
    let mut w = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={start}"))
        .await;
    let faults = s.faults().clone();
    let flapping = tokio::spawn(async move {
        faults
            .flap(Flapping {
                down: Duration::from_millis(300),
                up: Duration::from_millis(300),
                times: 3,
            })
            .await;
    });
    assert!(
        w.ends_within(WAIT).await,
        "the first restart cuts the watch"
    );
    let addr = s.addr();
    eventually("the port refuses connections while down", || async move {
        tokio::net::TcpStream::connect(addr).await.is_err()
    })
    .await;
    tokio::time::timeout(WAIT, flapping).await.unwrap().unwrap();
    assert_eq!(s.faults().restarts(), 3);
    assert_eq!(c.get(CMS).await.status, 200, "up after the last one");
    let mut old = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={start}"))
        .await;
    assert_eq!(
        old.next_event(WAIT).await.unwrap()["object"]["reason"],
        "Expired",
        "history from before the restarts is gone"
    );
}

#[tokio::test]
async fn a_request_sooner_than_its_retry_after_is_counted_by_client() {
    let s = server().await;
    let c = Client::new(&s);
    let send = |agent: &'static str| {
        let c = c.clone();
        async move { c.send_raw_with_agent("GET", CMS, agent).await.status }
    };
    s.faults().fail_next(
        1,
        Failure::TooManyRequests {
            retry_after_secs: 1,
        },
    );
    assert_eq!(send("client-a").await, 429);
    assert_eq!(send("client-b").await, 200, "another client may go on");
    assert_eq!(s.counters().retry_after_violations, 0);
    assert_eq!(send("client-a").await, 200, "served, but too soon");
    assert_eq!(s.counters().retry_after_violations, 1);
    // waiting what was asked is what the counter checks
    s.faults().fail_next(1, Failure::ServiceUnavailable);
    let unavailable = c.send_raw_with_agent("GET", CMS, "client-b").await;
    assert_eq!(unavailable.status, 503);
    let asked: u64 = unavailable
        .header("retry-after")
        .expect("a 503 asks for a wait")
        .parse()
        .unwrap();
    // Wall time on purpose: the server checks the wait against its own
    // `std::time::Instant` clock (it has no clock a test can move), and a
    // client honours `Retry-After` in real seconds. This sleep is the
    // behaviour under test (a client that waits what was asked is not
    // counted), not a wait for an event.
    tokio::time::sleep(Duration::from_secs(asked)).await;
    assert_eq!(send("client-b").await, 200);
    assert_eq!(s.counters().retry_after_violations, 1);
    assert_eq!(
        c.get("/__admin/counters").await.json()["retryAfterViolations"],
        1
    );
    s.clear_request_log();
    assert_eq!(s.counters().retry_after_violations, 0);
}
