//! Watch rules: start versions, the history window and 410, bookmarks,
//! timeouts, sendInitialEvents, selectors.

use crate::client::{Client, WAIT};
use crate::{cm, server};
use kcontrol_testserver::TestServer;
use serde_json::json;
use std::time::Duration;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn rv_of(v: &serde_json::Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn watch_from_a_version_sees_later_events_in_order() {
    let s = server().await;
    let c = Client::new(&s);
    let a = c.post(CMS, &cm("a", json!({}))).await.json();
    let start = rv_of(&a);
    let mut w = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={start}"))
        .await;
    assert_eq!(w.status, 200);
    c.post(CMS, &cm("b", json!({}))).await;
    let mut upd = a.clone();
    upd["data"]["k"] = json!("x");
    c.put(&format!("{CMS}/a"), &upd).await;
    let del = c.delete(&format!("{CMS}/b"), None).await;
    assert_eq!(del.status, 200);
    let e1 = w.next_event(WAIT).await.unwrap();
    let e2 = w.next_event(WAIT).await.unwrap();
    let e3 = w.next_event(WAIT).await.unwrap();
    assert_eq!(
        (
            e1["type"].as_str(),
            e1["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("b"))
    );
    assert_eq!(
        (e2["type"].as_str(), e2["object"]["data"]["k"].as_str()),
        (Some("MODIFIED"), Some("x"))
    );
    assert_eq!(e3["type"], "DELETED");
    assert!(rv_of(&e1["object"]) > start && rv_of(&e2["object"]) > rv_of(&e1["object"]));
    assert!(
        rv_of(&e3["object"]) > rv_of(&e2["object"]),
        "a DELETED object carries the deletion's resourceVersion"
    );
    // watches of another namespace see nothing of this one
    let mut other = c
        .stream(&format!(
            "/api/v1/namespaces/kube-system/configmaps?watch=1&resourceVersion={start}"
        ))
        .await;
    assert!(other.next_event(Duration::from_millis(300)).await.is_none());
    // the legacy /watch/ path works too
    let mut legacy = c
        .stream(&format!(
            "/api/v1/watch/namespaces/default/configmaps?resourceVersion={start}"
        ))
        .await;
    assert_eq!(legacy.next_event(WAIT).await.unwrap()["type"], "ADDED");
}

#[tokio::test]
async fn watch_without_version_starts_with_the_current_state() {
    let s = server().await;
    let c = Client::new(&s);
    c.post(CMS, &cm("a", json!({}))).await;
    c.post(CMS, &cm("b", json!({}))).await;
    for rv in ["", "0"] {
        let mut w = c
            .stream(&format!("{CMS}?watch=true&resourceVersion={rv}"))
            .await;
        let names: Vec<String> = [
            w.next_event(WAIT).await.unwrap(),
            w.next_event(WAIT).await.unwrap(),
        ]
        .iter()
        .map(|e| {
            assert_eq!(e["type"], "ADDED");
            e["object"]["metadata"]["name"].as_str().unwrap().to_owned()
        })
        .collect();
        assert_eq!(names, ["a", "b"]);
    }
}

#[tokio::test]
async fn too_old_versions_get_an_error_event() {
    let s = TestServer::builder().history_size(3).start().await.unwrap();
    let c = Client::new(&s);
    let first = rv_of(&c.post(CMS, &cm("a", json!({}))).await.json());
    for i in 0..5 {
        c.post(CMS, &cm(&format!("n{i}"), json!({}))).await;
    }
    let mut w = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={first}"))
        .await;
    assert_eq!(w.status, 200, "kube answers 200 and an ERROR event");
    let e = w.next_event(WAIT).await.unwrap();
    assert_eq!(e["type"], "ERROR");
    assert_eq!(e["object"]["kind"], "Status");
    assert_eq!(e["object"]["code"], 410);
    assert_eq!(e["object"]["reason"], "Expired");
    let msg = e["object"]["message"].as_str().unwrap();
    let prefix = format!("too old resource version: {first} (");
    assert!(msg.starts_with(&prefix) && msg.ends_with(')'), "{msg}");
    let oldest: u64 = msg[prefix.len()..msg.len() - 1].parse().unwrap();
    assert!(oldest > first);
    assert!(w.ends_within(WAIT).await);
    // from the reported version the watch works
    let mut ok = c
        .stream(&format!("{CMS}?watch=true&resourceVersion={oldest}"))
        .await;
    assert_ne!(ok.next_event(WAIT).await.unwrap()["type"], "ERROR");
}

#[tokio::test]
async fn send_initial_events_ends_with_an_annotated_bookmark() {
    let s = server().await;
    let c = Client::new(&s);
    for n in ["a", "b", "c"] {
        c.post(CMS, &cm(n, json!({}))).await;
    }
    let mut w = c
        .stream(&format!("{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion="))
        .await;
    for n in ["a", "b", "c"] {
        let e = w.next_event(WAIT).await.unwrap();
        assert_eq!(
            (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()),
            (Some("ADDED"), Some(n))
        );
    }
    let b = w.next_event(WAIT).await.unwrap();
    assert_eq!(b["type"], "BOOKMARK");
    assert_eq!(b["object"]["kind"], "ConfigMap");
    assert_eq!(
        b["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    // kube-apiserver's bookmark metadata: the resourceVersion and the
    // annotation, nothing else (no `creationTimestamp: null`)
    let keys: Vec<&String> = b["object"]["metadata"]
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    assert_eq!(keys, ["annotations", "resourceVersion"], "{b}");
    let bookmark_rv = rv_of(&b["object"]);
    c.post(CMS, &cm("d", json!({}))).await;
    let e = w.next_non_bookmark(WAIT).await.unwrap();
    assert_eq!(e["object"]["metadata"]["name"], "d");
    assert!(rv_of(&e["object"]) > bookmark_rv);
    let bad = c
        .get(&format!("{CMS}?watch=true&sendInitialEvents=true"))
        .await;
    assert_eq!(bad.status, 422);
    assert_eq!(
        bad.json()["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    );
}

#[tokio::test]
async fn bookmarks_are_periodic_and_precede_the_timeout() {
    let s = TestServer::builder()
        .bookmark_interval(Duration::from_millis(200))
        .start()
        .await
        .unwrap();
    let c = Client::new(&s);
    let rv = rv_of(&c.post(CMS, &cm("a", json!({}))).await.json());
    let mut w = c
        .stream(&format!(
            "{CMS}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=3"
        ))
        .await;
    let mut bookmarks = Vec::new();
    while let Some(e) = w.next_event(WAIT).await {
        assert_eq!(e["type"], "BOOKMARK");
        let keys: Vec<&String> = e["object"]["metadata"]
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["resourceVersion"], "{e}");
        bookmarks.push(rv_of(&e["object"]));
    }
    assert!(bookmarks.len() >= 2, "{bookmarks:?}");
    assert!(bookmarks.iter().all(|b| *b >= rv));
    // without allowWatchBookmarks: none, and the watch ends at timeoutSeconds
    let mut quiet = c
        .stream(&format!(
            "{CMS}?watch=true&resourceVersion={rv}&timeoutSeconds=1"
        ))
        .await;
    assert!(quiet.ends_within(WAIT).await);
    // the pre-timeout bookmark arrives even when the period is long
    let s2 = TestServer::start().await.unwrap();
    let c2 = Client::new(&s2);
    let rv2 = rv_of(&c2.post(CMS, &cm("a", json!({}))).await.json());
    let mut w2 = c2
        .stream(&format!(
            "{CMS}?watch=true&resourceVersion={rv2}&allowWatchBookmarks=true&timeoutSeconds=3"
        ))
        .await;
    let e = w2.next_event(WAIT).await.unwrap();
    assert_eq!(e["type"], "BOOKMARK");
    assert!(w2.ends_within(WAIT).await);
}

#[tokio::test]
async fn selectors_on_watch_turn_departures_into_deletes() {
    let s = server().await;
    let c = Client::new(&s);
    let a = c.post(CMS, &cm("a", json!({"app": "web"}))).await.json();
    let start = rv_of(&a);
    let mut w = c
        .stream(&format!(
            "{CMS}?watch=true&resourceVersion={start}&labelSelector=app%3Dweb"
        ))
        .await;
    let mut fw = c
        .stream(&format!(
            "{CMS}?watch=true&resourceVersion={start}&fieldSelector=metadata.name%3Db"
        ))
        .await;
    // leaves the selection: DELETED with the old content and the new version
    let mut away = a.clone();
    away["metadata"]["labels"] = json!({"app": "db"});
    let moved = c.put(&format!("{CMS}/a"), &away).await.json();
    let e = w.next_event(WAIT).await.unwrap();
    assert_eq!(e["type"], "DELETED");
    assert_eq!(e["object"]["metadata"]["labels"]["app"], "web");
    assert_eq!(
        e["object"]["metadata"]["resourceVersion"],
        moved["metadata"]["resourceVersion"]
    );
    // comes back: ADDED
    let mut back = moved.clone();
    back["metadata"]["labels"] = json!({"app": "web"});
    c.put(&format!("{CMS}/a"), &back).await;
    assert_eq!(w.next_event(WAIT).await.unwrap()["type"], "ADDED");
    // a non-matching object is never seen; b by name is
    c.post(CMS, &cm("c", json!({"app": "db"}))).await;
    c.post(CMS, &cm("b", json!({"app": "db"}))).await;
    let e = fw.next_event(WAIT).await.unwrap();
    assert_eq!(
        (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()),
        (Some("ADDED"), Some("b"))
    );
    c.delete(&format!("{CMS}/a"), None).await;
    assert_eq!(w.next_event(WAIT).await.unwrap()["type"], "DELETED");
    assert!(w.next_event(Duration::from_millis(200)).await.is_none());
}

#[tokio::test]
async fn watch_tables_for_kubectl() {
    let s = server().await;
    let c = Client::new(&s);
    c.post(CMS, &cm("a", json!({}))).await;
    let mut w = c
        .stream_as(
            &format!("{CMS}?watch=true"),
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .await;
    let e = w.next_event(WAIT).await.unwrap();
    assert_eq!(e["type"], "ADDED");
    assert_eq!(e["object"]["kind"], "Table");
    assert_eq!(e["object"]["rows"][0]["cells"][0], "a");
}
