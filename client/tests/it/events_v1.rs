//! `events.k8s.io/v1` Events through the kcontrol client against
//! kcontrol-testserver over real HTTP: created (201), read, listed and
//! watched in that group, and the same stored Events served through
//! `core/v1` (and `core/v1` Events through `events.k8s.io/v1`), with the
//! fields converted as kube-apiserver converts them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference};
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kcontrol_client::{
    Api, Client, Config, Kubeconfig, KubeconfigOptions, ListParams, PostParams, WatchEvent,
    WatchParams,
};
use kcontrol_indexer::Object;
use kcontrol_testserver::TestServer;

fn client(server: &TestServer) -> Client {
    let kubeconfig = Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let config = Config::from_custom_kubeconfig(&kubeconfig, &KubeconfigOptions::default())
        .unwrap()
        .with_rate_limit(None);
    Client::new(config).unwrap()
}

fn time(s: &str) -> MicroTime {
    MicroTime(s.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_v1_share_storage_with_core_v1() {
    let server = TestServer::start().await.unwrap();
    let c = client(&server);
    let v1: Api<Event> = Api::namespaced(c.clone(), "default");
    let core: Api<CoreEvent> = Api::namespaced(c, "default");

    let start = v1.list(&ListParams::default()).await.unwrap();
    let rv = start.metadata.resource_version.clone().unwrap();
    let mut watch = v1.watch(&WatchParams::default(), &rv).await.unwrap();

    let mut ev = Event::default();
    ev.meta_mut().name = Some("foo.synced".into());
    ev.event_time = Some(time("2026-11-25T10:00:00.123456Z"));
    ev.reason = Some("Synced".into());
    ev.note = Some("Foo synced successfully".into());
    ev.type_ = Some("Normal".into());
    ev.action = Some("Sync".into());
    ev.reporting_controller = Some("sample-controller".into());
    ev.reporting_instance = Some("sample-controller-0".into());
    ev.regarding = Some(ObjectReference {
        kind: Some("Foo".into()),
        name: Some("example-foo".into()),
        namespace: Some("default".into()),
        api_version: Some("samplecontroller.k8s.io/v1alpha1".into()),
        ..ObjectReference::default()
    });
    ev.series = Some(EventSeries {
        count: 2,
        last_observed_time: time("2026-11-25T10:00:05.000000Z"),
    });
    let created = v1.create(&PostParams::default(), &ev).await.unwrap();
    assert_eq!(created.note.as_deref(), Some("Foo synced successfully"));
    assert_eq!(
        created.reporting_controller.as_deref(),
        Some("sample-controller")
    );
    let got = v1.get("foo.synced").await.unwrap();
    assert_eq!(got.regarding, ev.regarding);
    assert_eq!(got.series.as_ref().map(|s| s.count), Some(2));
    assert_eq!(got.event_time, ev.event_time);

    // the same object through core/v1
    let old = core.get("foo.synced").await.unwrap();
    assert_eq!(old.reason.as_deref(), Some("Synced"));
    assert_eq!(old.message.as_deref(), Some("Foo synced successfully"));
    assert_eq!(
        old.reporting_component.as_deref(),
        Some("sample-controller")
    );
    assert_eq!(
        old.reporting_instance.as_deref(),
        Some("sample-controller-0")
    );
    assert_eq!(old.involved_object.name.as_deref(), Some("example-foo"));
    assert_eq!(old.action.as_deref(), Some("Sync"));
    assert_eq!(old.type_.as_deref(), Some("Normal"));
    assert_eq!(old.event_time, ev.event_time);
    assert_eq!(old.series.as_ref().and_then(|s| s.count), Some(2));
    assert_eq!(old.metadata.resource_version, got.metadata.resource_version);

    // the watch in events.k8s.io/v1 saw the create in its own shape
    let first = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match watch.next().await {
                Some(Ok(WatchEvent::Added(e))) => return e,
                Some(Ok(WatchEvent::Bookmark(_))) => continue,
                other => panic!("expected ADDED, got {other:?}"),
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(first.note.as_deref(), Some("Foo synced successfully"));

    // a core/v1 Event shows up in events.k8s.io/v1
    let mut legacy = CoreEvent::default();
    legacy.meta_mut().name = Some("legacy".into());
    legacy.involved_object = ObjectReference {
        kind: Some("ConfigMap".into()),
        name: Some("settings".into()),
        ..ObjectReference::default()
    };
    legacy.reason = Some("Updated".into());
    legacy.message = Some("settings updated".into());
    legacy.count = Some(3);
    legacy.reporting_component = Some("kubelet".into());
    core.create(&PostParams::default(), &legacy).await.unwrap();
    let all = v1.list(&ListParams::default()).await.unwrap();
    let seen = all
        .items
        .iter()
        .find(|e| e.meta().name.as_deref() == Some("legacy"))
        .cloned()
        .unwrap();
    assert_eq!(seen.note.as_deref(), Some("settings updated"));
    assert_eq!(seen.deprecated_count, Some(3));
    assert_eq!(seen.reporting_controller.as_deref(), Some("kubelet"));
    assert_eq!(
        seen.regarding.and_then(|r| r.name).as_deref(),
        Some("settings")
    );
    assert_eq!(all.items.len(), 2);

    // events.k8s.io/v1's create rules: eventTime is required
    let mut bad = ev.clone();
    bad.meta_mut().name = Some("bad".into());
    bad.meta_mut().resource_version = None;
    bad.event_time = None;
    let err = v1.create(&PostParams::default(), &bad).await.unwrap_err();
    assert!(
        err.to_string().contains("eventTime: Required value"),
        "{err}"
    );
}
