//! List rules: selectors, limit/continue, resourceVersion semantics,
//! remainingItemCount, List kinds.

use crate::client::Client;
use crate::{cm, server};
use kcontrol_testserver::TestServer;
use serde_json::{json, Value};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

async fn seed(c: &Client, n: usize) {
    for i in 0..n {
        let tier = if i % 2 == 0 { "web" } else { "db" };
        c.post(
            CMS,
            &cm(
                &format!("cm-{i:02}"),
                json!({"tier": tier, "idx": i.to_string()}),
            ),
        )
        .await;
    }
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn selectors_filter_lists() {
    let s = server().await;
    let c = Client::new(&s);
    seed(&c, 6).await;
    c.post(
        "/api/v1/namespaces/kube-system/configmaps",
        &cm("other", json!({"tier": "web"})),
    )
    .await;
    let l = c
        .get(&format!("{CMS}?labelSelector={}", enc("tier=web")))
        .await
        .json();
    assert_eq!(names(&l), ["cm-00", "cm-02", "cm-04"]);
    let l = c
        .get(&format!(
            "{CMS}?labelSelector={}",
            enc("tier in (web,db),idx notin (0,1,2)")
        ))
        .await
        .json();
    assert_eq!(names(&l), ["cm-03", "cm-04", "cm-05"]);
    let l = c
        .get(&format!("{CMS}?labelSelector={}", enc("!idx")))
        .await
        .json();
    assert!(names(&l).is_empty());
    let all = c
        .get("/api/v1/configmaps?fieldSelector=metadata.name%3Dother")
        .await
        .json();
    assert_eq!(names(&all), ["other"]);
    let l = c
        .get(&format!(
            "/api/v1/configmaps?fieldSelector={}",
            enc("metadata.namespace!=default,metadata.name!=kube-root-ca.crt")
        ))
        .await
        .json();
    assert_eq!(names(&l), ["other"]);
    let bad = c.get(&format!("{CMS}?fieldSelector=spec.foo%3Dbar")).await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["message"], "field label not supported: spec.foo");
    assert_eq!(
        c.get(&format!("{CMS}?labelSelector={}", enc("a in (b")))
            .await
            .status,
        400
    );
    // list kinds
    assert_eq!(l["kind"], "ConfigMapList");
    assert_eq!(l["apiVersion"], "v1");
    assert!(rv(&l) > 0);
    let empty = c
        .get("/api/v1/namespaces/kube-public/configmaps")
        .await
        .json();
    assert_eq!(empty["items"], json!([]));
}

#[tokio::test]
async fn pages_are_consistent_snapshots() {
    let s = server().await;
    let c = Client::new(&s);
    seed(&c, 7).await;
    let p1 = c.get(&format!("{CMS}?limit=3")).await.json();
    assert_eq!(names(&p1), ["cm-00", "cm-01", "cm-02"]);
    assert_eq!(p1["metadata"]["remainingItemCount"], 4);
    let token = p1["metadata"]["continue"].as_str().unwrap().to_owned();
    // writes after the first page are not seen by later pages
    c.delete(&format!("{CMS}/cm-04"), None).await;
    c.post(CMS, &cm("cm-03a", json!({}))).await;
    let mut upd = c.get(&format!("{CMS}/cm-05")).await.json();
    upd["data"]["k"] = json!("new");
    c.put(&format!("{CMS}/cm-05"), &upd).await;
    let p2 = c
        .get(&format!("{CMS}?limit=3&continue={token}"))
        .await
        .json();
    assert_eq!(names(&p2), ["cm-03", "cm-04", "cm-05"]);
    assert_eq!(
        rv(&p2),
        rv(&p1),
        "every page reports the first page's resourceVersion"
    );
    assert_eq!(p2["items"][2]["data"]["k"], "cm-05");
    let t2 = p2["metadata"]["continue"].as_str().unwrap().to_owned();
    let p3 = c.get(&format!("{CMS}?limit=3&continue={t2}")).await.json();
    assert_eq!(names(&p3), ["cm-06"]);
    assert!(p3["metadata"].get("continue").is_none());
    assert!(p3["metadata"].get("remainingItemCount").is_none());
    // a selector hides the remaining count
    let sel = c
        .get(&format!("{CMS}?limit=1&labelSelector=tier%3Dweb"))
        .await
        .json();
    assert!(sel["metadata"].get("remainingItemCount").is_none());
    assert!(sel["metadata"]["continue"].is_string());
    // resourceVersion=0 is served from the cache: limit ignored
    let any = c
        .get(&format!("{CMS}?limit=2&resourceVersion=0"))
        .await
        .json();
    assert_eq!(names(&any).len(), 7);
    assert!(any["metadata"].get("continue").is_none());
    // bad tokens and mixing rv with continue
    assert_eq!(c.get(&format!("{CMS}?continue=garbage!")).await.status, 400);
    let mixed = c
        .get(&format!("{CMS}?continue={token}&resourceVersion=5"))
        .await;
    assert_eq!(mixed.status, 400);
    assert_eq!(
        mixed.json()["message"],
        "specifying resource version is not allowed when using continue"
    );
}

#[tokio::test]
async fn expired_continue_tokens_answer_410_with_a_fresh_token() {
    let s = server().await;
    let c = Client::new(&s);
    seed(&c, 5).await;
    let p1 = c.get(&format!("{CMS}?limit=2")).await.json();
    let token = p1["metadata"]["continue"].as_str().unwrap().to_owned();
    c.post(CMS, &cm("late", json!({}))).await;
    s.faults().compact();
    let r = c.get(&format!("{CMS}?limit=2&continue={token}")).await;
    assert_eq!(r.status, 410);
    let body = r.json();
    assert_eq!(body["reason"], "Expired");
    assert_eq!(
        body["message"],
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
    );
    let fresh = body["metadata"]["continue"].as_str().unwrap().to_owned();
    let rest = c
        .get(&format!("{CMS}?limit=10&continue={fresh}"))
        .await
        .json();
    assert_eq!(names(&rest), ["cm-02", "cm-03", "cm-04", "late"]);
}

#[tokio::test]
async fn resource_version_semantics() {
    let s = TestServer::builder()
        .history_size(4)
        .too_large_resource_version_wait(std::time::Duration::from_millis(200))
        .start()
        .await
        .unwrap();
    let c = Client::new(&s);
    let first = c.post(CMS, &cm("a", json!({}))).await.json();
    let at_a = rv(&first);
    c.post(CMS, &cm("b", json!({}))).await;
    // exact read of a past state inside the window
    let past = c
        .get(&format!(
            "{CMS}?resourceVersion={at_a}&resourceVersionMatch=Exact"
        ))
        .await
        .json();
    assert_eq!(names(&past), ["a"]);
    assert_eq!(rv(&past), at_a);
    // not older than: the latest state
    let now = c
        .get(&format!(
            "{CMS}?resourceVersion={at_a}&resourceVersionMatch=NotOlderThan"
        ))
        .await
        .json();
    assert_eq!(names(&now), ["a", "b"]);
    // limit with an rv and no match is an exact read (legacy rule)
    let legacy = c
        .get(&format!("{CMS}?resourceVersion={at_a}&limit=10"))
        .await
        .json();
    assert_eq!(names(&legacy), ["a"]);
    // push the state of `at_a` out of the 4-event window
    for i in 0..5 {
        c.post(CMS, &cm(&format!("f{i}"), json!({}))).await;
    }
    let gone = c
        .get(&format!(
            "{CMS}?resourceVersion={at_a}&resourceVersionMatch=Exact"
        ))
        .await;
    assert_eq!(gone.status, 410);
    assert_eq!(gone.json()["reason"], "Expired");
    assert_eq!(
        gone.json()["message"],
        "The resourceVersion for the provided list is too old."
    );
    // a version from the future: 504 after a bounded wait
    let future = c
        .get(&format!(
            "{CMS}?resourceVersion=999999&resourceVersionMatch=NotOlderThan"
        ))
        .await;
    assert_eq!(future.status, 504);
    assert!(future.json()["message"]
        .as_str()
        .unwrap()
        .starts_with("Too large resource version: 999999, current: "));
    // list option validation
    let r = c.get(&format!("{CMS}?resourceVersionMatch=Exact")).await;
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["message"], "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided");
    assert_eq!(
        c.get(&format!(
            "{CMS}?resourceVersion=0&resourceVersionMatch=Exact"
        ))
        .await
        .status,
        422
    );
    assert_eq!(
        c.get(&format!(
            "{CMS}?resourceVersion=1&resourceVersionMatch=Sometimes"
        ))
        .await
        .status,
        422
    );
    assert_eq!(
        c.get(&format!("{CMS}?sendInitialEvents=true")).await.status,
        422
    );
}
