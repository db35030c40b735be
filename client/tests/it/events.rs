//! The event recorder against kcontrol-testserver over real HTTP: repeats
//! become patches of one Event's count, the per-object spam filter holds a
//! hot loop to its burst, similar messages are combined, a vanished Event
//! is created anew, and transient failures are retried.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::events::{EventType, PublishError, Recorder};
use kcontrol_client::{Client, Config, Kubeconfig, KubeconfigOptions};
use kcontrol_indexer::Object;
use kcontrol_testserver::{Failure, FaultScope, TestServer, Verb};
use serde_json::Value;

fn client(server: &TestServer) -> Client {
    let kubeconfig = Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let config = Config::from_custom_kubeconfig(&kubeconfig, &KubeconfigOptions::default())
        .unwrap()
        .with_rate_limit(None);
    Client::new(config).unwrap()
}

fn configmap(name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.meta_mut().name = Some(name.into());
    cm.meta_mut().namespace = Some("default".into());
    cm.meta_mut().uid = Some(format!("uid-{name}"));
    cm
}

/// The Events about `object` stored on the server.
fn events_about(server: &TestServer, object: &str) -> Vec<Value> {
    server
        .objects()
        .list("events", Some("default"))
        .unwrap()
        .items
        .iter()
        .map(|o| o.value().clone())
        .filter(|e| e["involvedObject"]["name"] == object)
        .collect()
}

fn recorder(server: &TestServer) -> Recorder {
    Recorder::builder(client(server), "events-test")
        .retries(5, Duration::from_millis(20))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeats_patch_one_event_and_count() {
    let server = TestServer::start().await.unwrap();
    let recorder = recorder(&server);
    let cm = configmap("settings");
    for _ in 0..3 {
        recorder.event(&cm, EventType::Normal, "Synced", "settings synced");
    }
    recorder.flush().await;

    let events = events_about(&server, "settings");
    assert_eq!(events.len(), 1, "{events:#?}");
    let e = &events[0];
    assert_eq!(e["count"], 3);
    assert_eq!(e["reason"], "Synced");
    assert_eq!(e["type"], "Normal");
    assert_eq!(e["source"]["component"], "events-test");
    assert_eq!(e["involvedObject"]["kind"], "ConfigMap");
    assert_eq!(e["involvedObject"]["uid"], "uid-settings");
    let stats = recorder.stats();
    assert_eq!((stats.created, stats.patched), (1, 2), "{stats:?}");
    let counters = server.counters();
    assert_eq!(counters.count("create", "events"), 1);
    assert_eq!(counters.count("patch", "events"), 2);

    // A different type or message about the same object is a new Event.
    recorder.event(&cm, EventType::Warning, "Synced", "settings synced");
    recorder.event(&cm, EventType::Normal, "Synced", "other message");
    recorder.flush().await;
    assert_eq!(events_about(&server, "settings").len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_loop_is_held_to_the_spam_burst() {
    let server = TestServer::start().await.unwrap();
    let recorder = recorder(&server);
    let hot = configmap("hot");
    // Distinct reasons, so nothing is counted or combined: only the spam
    // filter stands between the loop and the server.
    for i in 0..40 {
        recorder.event(&hot, EventType::Warning, &format!("Reason{i}"), "failed");
    }
    recorder.event(&configmap("calm"), EventType::Normal, "Synced", "ok");
    recorder.flush().await;

    assert_eq!(events_about(&server, "hot").len(), 25);
    assert_eq!(events_about(&server, "calm").len(), 1);
    let stats = recorder.stats();
    assert_eq!(stats.filtered, 15, "{stats:?}");
    assert_eq!(stats.recorded, 41);
    assert_eq!(stats.processed(), 41);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn similar_messages_are_combined() {
    let server = TestServer::start().await.unwrap();
    let recorder = recorder(&server);
    let cm = configmap("flappy");
    for i in 0..12 {
        recorder.event(
            &cm,
            EventType::Warning,
            "Failed",
            format!("attempt {i} failed"),
        );
    }
    recorder.flush().await;

    let events = events_about(&server, "flappy");
    // nine events as they were, then one combined event counted three times
    assert_eq!(events.len(), 10, "{events:#?}");
    let combined: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["message"]
                .as_str()
                .unwrap()
                .starts_with("(combined from similar events): ")
        })
        .collect();
    assert_eq!(combined.len(), 1);
    assert_eq!(combined[0]["count"], 3);
    assert_eq!(
        combined[0]["message"],
        "(combined from similar events): attempt 11 failed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_event_is_created_anew() {
    let server = TestServer::start().await.unwrap();
    let recorder = recorder(&server);
    let cm = configmap("gone");
    recorder.event(&cm, EventType::Normal, "Synced", "ok");
    recorder.flush().await;
    let first = events_about(&server, "gone");
    let name = first[0]["metadata"]["name"].as_str().unwrap().to_owned();
    server.objects().delete("events", "default", &name).unwrap();

    recorder.event(&cm, EventType::Normal, "Synced", "ok");
    recorder.flush().await;
    let events = events_about(&server, "gone");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["count"], 2, "the count goes on");
    let counters = server.counters();
    assert_eq!(counters.count("patch", "events"), 1);
    assert_eq!(counters.count("create", "events"), 2);
    assert_eq!(recorder.stats().failed, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_failures_are_retried() {
    let server = TestServer::start().await.unwrap();
    let recorder = recorder(&server);
    server.faults().fail_next_matching(
        2,
        Failure::InternalError,
        FaultScope {
            verb: Some(Verb::Create),
            resource: Some("events".into()),
        },
    );
    recorder.event(&configmap("a"), EventType::Normal, "Synced", "ok");
    recorder.event(&configmap("b"), EventType::Normal, "Synced", "ok");
    recorder.event(&configmap("c"), EventType::Normal, "Synced", "ok");
    recorder.flush().await;

    for name in ["a", "b", "c"] {
        assert_eq!(events_about(&server, name).len(), 1, "{name}");
    }
    let stats = recorder.stats();
    assert_eq!(stats.retried, 2, "{stats:?}");
    assert_eq!((stats.created, stats.failed), (3, 0), "{stats:?}");
    let mut statuses: Vec<u16> = server
        .request_log()
        .iter()
        .filter(|r| r.resource.as_deref() == Some("events"))
        .map(|r| r.status)
        .collect();
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 201, 201, 500, 500]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_failures_are_given_up_at_once() {
    let server = TestServer::start().await.unwrap();
    let recorder = recorder(&server);
    let mut bad = configmap("x");
    bad.meta_mut().namespace = Some("Not_A_Namespace".into());
    recorder.event(&bad, EventType::Normal, "Synced", "ok");
    recorder.flush().await;
    let stats = recorder.stats();
    assert_eq!(
        (stats.failed, stats.retried, stats.created),
        (1, 0, 0),
        "{stats:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_recorder_with_events_queued_warns_and_flush_leaves_none() {
    let server = TestServer::start().await.unwrap();
    // every write takes long: the writer holds the first event, the rest
    // stay queued
    server.faults().set_latency(Duration::from_secs(30));
    let r = recorder(&server);
    for i in 0..4 {
        r.event(
            &configmap(&format!("cm-{i}")),
            EventType::Normal,
            "Synced",
            "synced",
        );
    }
    let (logs, guard) = support::logs::capture();
    drop(r);
    drop(guard);
    let text = logs.text();
    assert!(
        text.contains("WARN") && text.contains("flush"),
        "no warning on drop: {text}"
    );
    // flushed first: nothing queued, nothing said
    server.faults().set_latency(Duration::ZERO);
    let r = recorder(&server);
    r.event(&configmap("flushed"), EventType::Normal, "Synced", "synced");
    tokio::time::timeout(Duration::from_secs(30), r.flush())
        .await
        .unwrap();
    let (logs, guard) = support::logs::capture();
    drop(r);
    drop(guard);
    assert!(!logs.text().contains("WARN"), "{}", logs.text());
}

/// An awaited event is on the server when `publish` returns: no flush, no
/// polling. A transient failure is retried before it returns; the spam
/// filter and a permanent refusal are errors, not silent drops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_returns_once_the_event_is_written() {
    let server = TestServer::start().await.unwrap();
    let recorder = recorder(&server);
    let cm = configmap("finalized");
    recorder
        .publish(&cm, EventType::Normal, "Deleted", "cleaned up")
        .await
        .unwrap();
    let events = events_about(&server, "finalized");
    assert_eq!(events.len(), 1, "written before publish returned");
    assert_eq!(events[0]["reason"], "Deleted");

    // buffered and awaited events share one ordered path: the repeat is a patch
    recorder.event(&cm, EventType::Normal, "Deleted", "cleaned up");
    recorder
        .publish(&cm, EventType::Normal, "Deleted", "cleaned up")
        .await
        .unwrap();
    assert_eq!(events_about(&server, "finalized")[0]["count"], 3);

    server.faults().fail_next_matching(
        1,
        Failure::InternalError,
        FaultScope {
            verb: Some(Verb::Create),
            resource: Some("events".into()),
        },
    );
    recorder
        .publish(&configmap("retried"), EventType::Normal, "Synced", "ok")
        .await
        .unwrap();
    assert_eq!(events_about(&server, "retried").len(), 1);
    assert_eq!(recorder.stats().retried, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_reports_what_was_not_written() {
    let server = TestServer::start().await.unwrap();
    let recorder = recorder(&server);
    let mut bad = configmap("x");
    bad.meta_mut().namespace = Some("Not_A_Namespace".into());
    let refused = recorder
        .publish(&bad, EventType::Normal, "Synced", "ok")
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, PublishError::Write(e) if e.api_error().is_some()),
        "{refused:?}"
    );

    let hot = configmap("hot");
    for i in 0..25 {
        recorder.event(&hot, EventType::Warning, &format!("Reason{i}"), "failed");
    }
    let filtered = recorder
        .publish(&hot, EventType::Warning, "OneTooMany", "failed")
        .await
        .unwrap_err();
    assert!(matches!(filtered, PublishError::Filtered), "{filtered:?}");
    assert_eq!(events_about(&server, "hot").len(), 25);
}
