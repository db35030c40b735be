//! Server-side apply of owned objects: `owner::apply_owned` creates the
//! object with its controller reference, records the controller as the
//! `Apply` manager of its fields, updates it on the next apply, and takes
//! back a field another manager changed (force), against the testserver's
//! field management.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcontrol_client::{Api, Client, Patch, PatchParams};
use kcontrol_controller::owner::{apply_owned, is_controlled_by};
use kcontrol_testserver::TestServer;
use serde_json::json;

fn secret(value: &str) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some("app".into());
    s.string_data = Some(BTreeMap::from([("user".to_owned(), value.to_owned())]));
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_owned_creates_updates_and_takes_fields_back() {
    let server = TestServer::start().await.unwrap();
    let client = Client::from_kubeconfig_yaml(&server.kubeconfig()).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("app".into());
    let owner = cms.create(&Default::default(), &cm).await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(client, "default");

    let created = apply_owned(&secrets, &owner, secret("admin"), "my-controller")
        .await
        .unwrap();
    assert!(is_controlled_by(&created, &owner));
    let managers: Vec<(String, String)> = created
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| {
            (
                m.manager.clone().unwrap_or_default(),
                m.operation.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        managers.contains(&("my-controller".to_owned(), "Apply".to_owned())),
        "{managers:?}"
    );

    // someone else takes a field; the controller's next apply takes it back
    secrets
        .patch(
            "app",
            &PatchParams::apply("someone-else").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "app"}, "stringData": {"user": "intruder"}})),
        )
        .await
        .unwrap();
    let applied = apply_owned(&secrets, &owner, secret("root"), "my-controller")
        .await
        .unwrap();
    let data = applied.data.clone().unwrap_or_default();
    assert_eq!(data.get("user").map(|b| b.0.as_slice()), Some(&b"root"[..]));
    assert!(is_controlled_by(&applied, &owner));

    let nameless = apply_owned(&secrets, &owner, Secret::default(), "my-controller").await;
    assert!(nameless.is_err());
}
