//! Writes that converge in one call, against the in-process API server,
//! counted in the server's request log: `create_or_update` (CT19) and
//! apply of owned objects only when what it manages differs (CT20).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::ByteString;
use kcontrol_client::{Api, Patch, PatchParams, PostParams};
use kcontrol_controller::converge::{apply_owned_if_changed, APPLIED_DIGEST_ANNOTATION};
use kcontrol_controller::owner::is_controlled_by;
use kcontrol_controller::{create_or_update, Operation};
use kcontrol_testserver::{TestServer, Verb};
use serde_json::json;

/// Writes (create, update, patch, delete) to `resource` since the last
/// clear of the request log.
fn writes(server: &TestServer, resource: &str) -> usize {
    server
        .request_log()
        .iter()
        .filter(|r| r.resource.as_deref() == Some(resource))
        .filter(|r| {
            matches!(
                r.verb,
                Some(Verb::Create | Verb::Update | Verb::Patch | Verb::Delete)
            )
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct19_create_or_update_creates_updates_only_on_change_and_says_which() {
    let (server, client) = support::server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let set = |value: &'static str| {
        move |cm: &mut ConfigMap| {
            cm.data
                .get_or_insert_with(Default::default)
                .insert("k".into(), value.into());
        }
    };

    let (op, created) = create_or_update(&api, "settings", set("1")).await.unwrap();
    assert_eq!(op, Operation::Created);
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(created.data.unwrap()["k"], "1");

    server.clear_request_log();
    for _ in 0..5 {
        let (op, _) = create_or_update(&api, "settings", set("1")).await.unwrap();
        assert_eq!(op, Operation::Unchanged);
    }
    assert_eq!(writes(&server, "configmaps"), 0, "unchanged: no write");

    let (op, updated) = create_or_update(&api, "settings", set("2")).await.unwrap();
    assert_eq!(op, Operation::Updated);
    assert_eq!(updated.data.unwrap()["k"], "2");
    assert_eq!(writes(&server, "configmaps"), 1);

    // mutate may not rename the object
    let err = create_or_update(&api, "settings", |cm: &mut ConfigMap| {
        cm.metadata.name = Some("other".into());
    })
    .await
    .unwrap_err();
    assert!(err.to_string().contains("must not change"), "{err}");
    assert!(api.get_opt("other").await.unwrap().is_none());
    server.shutdown().await;
}

fn owned_secret(value: &str, extra: Option<&str>) -> Secret {
    let mut secret = Secret::default();
    secret.metadata.name = Some("creds".into());
    secret.metadata.labels = Some([("app".to_owned(), "demo".to_owned())].into());
    secret.type_ = Some("Opaque".into());
    let mut data = BTreeMap::from([("key".to_owned(), ByteString(value.as_bytes().to_vec()))]);
    if let Some(extra) = extra {
        data.insert("extra".into(), ByteString(extra.as_bytes().to_vec()));
    }
    secret.data = Some(data);
    secret
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct20_apply_of_owned_objects_writes_only_when_what_it_manages_differs() {
    let (server, client) = support::server().await;
    let owners: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut owner = ConfigMap::default();
    owner.metadata.name = Some("owner".into());
    let owner = owners.create(&PostParams::default(), &owner).await.unwrap();
    let api: Api<Secret> = Api::namespaced(client.clone(), "default");
    let live = || async { api.get_opt("creds").await.unwrap() };

    // absent: created, owned, digest annotated
    let op = apply_owned_if_changed(&api, &owner, owned_secret("a", Some("x")), "ct", None)
        .await
        .unwrap();
    assert_eq!(op, Operation::Created);
    let stored = live().await.unwrap();
    assert!(is_controlled_by(&stored, &owner));
    assert!(stored
        .metadata
        .annotations
        .unwrap()
        .contains_key(APPLIED_DIGEST_ANNOTATION));

    // the same again, many times: nothing sent, whatever the server added
    // and whatever other managers changed in fields this one does not own
    let other = json!({"metadata": {"labels": {"team": "x"}, "annotations": {"note": "y"}}});
    api.patch("creds", &PatchParams::default(), &Patch::Merge(&other))
        .await
        .unwrap();
    server.clear_request_log();
    for _ in 0..10 {
        let current = live().await;
        let op = apply_owned_if_changed(
            &api,
            &owner,
            owned_secret("a", Some("x")),
            "ct",
            current.as_ref(),
        )
        .await
        .unwrap();
        assert_eq!(op, Operation::Unchanged);
    }
    assert_eq!(
        writes(&server, "secrets"),
        0,
        "steady state: 0 writes in 10 reconciles"
    );

    // someone changed a field it manages: taken back, in one write
    let meddle = json!({"data": {"key": ByteString(b"meddled".to_vec())}});
    api.patch("creds", &PatchParams::default(), &Patch::Merge(&meddle))
        .await
        .unwrap();
    server.clear_request_log();
    let current = live().await;
    let op = apply_owned_if_changed(
        &api,
        &owner,
        owned_secret("a", Some("x")),
        "ct",
        current.as_ref(),
    )
    .await
    .unwrap();
    assert_eq!(op, Operation::Updated);
    assert_eq!(writes(&server, "secrets"), 1);
    let data = live().await.unwrap().data.unwrap();
    assert_eq!(data["key"].0, b"a");
    // the other manager's label is still there
    assert_eq!(live().await.unwrap().metadata.labels.unwrap()["team"], "x");

    // it stops setting a field: the digest changes, so the apply goes out
    // and server-side apply removes the field
    let current = live().await;
    let op = apply_owned_if_changed(
        &api,
        &owner,
        owned_secret("a", None),
        "ct",
        current.as_ref(),
    )
    .await
    .unwrap();
    assert_eq!(op, Operation::Updated);
    let data = live().await.unwrap().data.unwrap();
    assert!(!data.contains_key("extra"), "{data:?}");
    let current = live().await;
    let op = apply_owned_if_changed(
        &api,
        &owner,
        owned_secret("a", None),
        "ct",
        current.as_ref(),
    )
    .await
    .unwrap();
    assert_eq!(op, Operation::Unchanged);
    server.shutdown().await;
}
