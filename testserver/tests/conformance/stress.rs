//! Stress: 8 writer threads make 100,000 writes while 4 HTTP watchers
//! watch; every watcher sees every event, in resourceVersion order, with no
//! gap and nothing extra.

use crate::client::Client;
use kcontrol_testserver::TestServer;
use serde_json::json;
use std::time::Duration;

const WRITERS: usize = 8;
const WATCHERS: usize = 4;
const WRITES_PER_WRITER: usize = 12_500;

fn writer(objects: kcontrol_testserver::Objects, id: usize) -> Vec<(u64, &'static str)> {
    let mut rvs = Vec::with_capacity(WRITES_PER_WRITER);
    let mut obj = json!({});
    for k in 0..WRITES_PER_WRITER {
        let name = format!("w{id}-{}", k / 5);
        match k % 5 {
            0 => {
                let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"writer": id.to_string()}}, "data": {"n": "0"}});
                let o = objects
                    .create("configmaps", "stress", body)
                    .expect("create");
                rvs.push((o.resource_version(), "ADDED"));
                obj = o.value().clone();
            }
            1..=3 => {
                obj["data"]["n"] = json!(k.to_string());
                let o = objects
                    .update("configmaps", "stress", obj.clone())
                    .expect("update");
                rvs.push((o.resource_version(), "MODIFIED"));
                obj = o.value().clone();
            }
            _ => {
                let o = objects
                    .delete("configmaps", "stress", &name)
                    .expect("delete");
                rvs.push((o.resource_version(), "DELETED"));
            }
        }
    }
    rvs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_watcher_sees_every_write_in_order() {
    let s = TestServer::builder()
        .history_size(250_000)
        .request_log_capacity(0)
        .start()
        .await
        .unwrap();
    let c = Client::new(&s);
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "stress"}});
    assert_eq!(c.post("/api/v1/namespaces", &ns).await.status, 201);
    let start = s.objects().resource_version();
    let total = WRITERS * WRITES_PER_WRITER;
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let mut w = c.stream(&format!("/api/v1/namespaces/stress/configmaps?watch=true&resourceVersion={start}&allowWatchBookmarks=true")).await;
        assert_eq!(w.status, 200);
        watchers.push(tokio::spawn(async move {
            let mut seen: Vec<(u64, String)> = Vec::with_capacity(total);
            while seen.len() < total {
                let Some(e) = w.next_event(Duration::from_secs(60)).await else {
                    break;
                };
                if e["type"] == "BOOKMARK" {
                    continue;
                }
                let rv = e["object"]["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                seen.push((rv, e["type"].as_str().unwrap().to_owned()));
            }
            seen
        }));
    }
    let objects = s.objects();
    let writers: Vec<_> = (0..WRITERS)
        .map(|id| {
            let o = objects.clone();
            std::thread::spawn(move || writer(o, id))
        })
        .collect();
    let mut expected: Vec<(u64, String)> = writers
        .into_iter()
        .flat_map(|h| h.join().expect("writer"))
        .map(|(rv, t)| (rv, t.to_owned()))
        .collect();
    expected.sort();
    assert_eq!(expected.len(), total);
    assert!(
        expected.windows(2).all(|p| p[0].0 < p[1].0),
        "resourceVersions are unique"
    );
    for (i, w) in watchers.into_iter().enumerate() {
        let seen = tokio::time::timeout(Duration::from_secs(90), w)
            .await
            .expect("watcher in time")
            .expect("watcher");
        assert_eq!(
            seen.len(),
            total,
            "watcher {i} saw {} of {total} events",
            seen.len()
        );
        assert!(
            seen.windows(2).all(|p| p[0].0 < p[1].0),
            "watcher {i}: resourceVersion order"
        );
        assert!(
            seen == expected,
            "watcher {i}: the events are exactly the writes"
        );
    }
    assert!(objects
        .list("configmaps", Some("stress"))
        .unwrap()
        .items
        .is_empty());
}
