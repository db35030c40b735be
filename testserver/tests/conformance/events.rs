//! `events.k8s.io/v1`: discovery, and one storage with `core/v1` Events.

use crate::client::{Client, WAIT};
use crate::server;
use serde_json::json;

const V1: &str = "/apis/events.k8s.io/v1/namespaces/default/events";
const CORE: &str = "/api/v1/namespaces/default/events";

#[tokio::test]
async fn events_k8s_io_is_served_from_core_events() {
    let s = server().await;
    let c = Client::new(&s);
    let groups = c.get("/apis").await.json();
    let g = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "events.k8s.io")
        .cloned()
        .unwrap();
    assert_eq!(g["preferredVersion"]["groupVersion"], "events.k8s.io/v1");
    let list = c.get("/apis/events.k8s.io/v1").await.json();
    assert_eq!(list["resources"][0]["name"], "events");
    assert_eq!(list["resources"][0]["kind"], "Event");
    assert_eq!(list["resources"][0]["shortNames"], json!(["ev"]));

    let mut w = c.stream(&format!("{CORE}?watch=true")).await;
    let ev = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
        "eventTime": "2026-11-25T10:00:00.000000Z", "type": "Warning", "reason": "Failed", "note": "it broke",
        "action": "Sync", "reportingController": "ctl", "reportingInstance": "ctl-0",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}});
    let r = c.post(V1, &ev).await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    assert_eq!(r.json()["apiVersion"], "events.k8s.io/v1");
    assert_eq!(r.json()["note"], "it broke");
    // the core watch sees the same object in core/v1 shape
    let added = w.next_non_bookmark(WAIT).await.unwrap();
    assert_eq!(added["type"], "ADDED");
    assert_eq!(added["object"]["apiVersion"], "v1");
    assert_eq!(added["object"]["message"], "it broke");
    assert_eq!(added["object"]["reportingComponent"], "ctl");
    assert_eq!(added["object"]["involvedObject"]["name"], "p");

    // a merge patch through events.k8s.io/v1 uses that version's names
    let r = c
        .patch(
            &format!("{V1}/e1"),
            "application/merge-patch+json",
            r#"{"note":"fixed","series":{"count":2,"lastObservedTime":"2026-11-25T10:00:09.000000Z"}}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    let core = c.get(&format!("{CORE}/e1")).await.json();
    assert_eq!(core["message"], "fixed");
    assert_eq!(core["series"]["count"], 2);
    // a table through events.k8s.io/v1
    let t = c
        .get_as(V1, "application/json;as=Table;v=v1;g=meta.k8s.io")
        .await
        .json();
    let cells = t["rows"][0]["cells"].as_array().unwrap();
    assert_eq!(
        cells.get(..5).unwrap(),
        ["e1", "Warning", "Failed", "pod/p", "fixed"]
    );
    // create rules of events.k8s.io/v1 (core/v1 has none of them)
    let r = c
        .post(V1, &json!({"metadata": {"name": "bad"}, "type": "Normal"}))
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["details"]["group"], "events.k8s.io");
    // deleting through either group deletes the one object
    assert_eq!(c.delete(&format!("{V1}/e1"), None).await.status, 200);
    assert_eq!(c.get(&format!("{CORE}/e1")).await.status, 404);
}
