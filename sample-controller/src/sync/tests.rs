//! The sync handler's contract, step by step, against the in-memory
//! backend; and a model test: after any sequence of outside changes, syncing
//! converges with one Deployment per Foo and writes nothing once in sync.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kcontrol_client::events::EventType;
use kcontrol_indexer::Object;
use proptest::prelude::*;

use super::fake::FakeBackend;
use super::*;
use crate::deployment::{new_deployment, spec_replicas};

fn handler() -> SyncHandler<FakeBackend> {
    SyncHandler::new(FakeBackend::default())
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

fn synced(report: SyncReport) -> Result<SyncOutcome, String> {
    Ok(SyncOutcome::Synced(report))
}

fn sync(h: &SyncHandler<FakeBackend>, key: &str) -> Result<SyncOutcome, String> {
    block_on(h.sync(key)).map_err(|e| e.to_string())
}

#[test]
fn a_missing_foo_is_done() {
    let h = handler();
    assert_eq!(sync(&h, "ns/nope"), Ok(SyncOutcome::FooGone));
    assert!(h.backend().writes().is_empty());
}

#[test]
fn bad_keys_and_empty_deployment_names_are_dropped() {
    let h = handler();
    h.backend().put_foo(Foo::with_deployment("ns", "a", "", 1));
    assert_eq!(
        sync(&h, "ns/a"),
        Ok(SyncOutcome::Dropped(DropReason::NoDeploymentName))
    );
    for bad in ["a/b/c", "", "no-namespace"] {
        assert_eq!(
            sync(&h, bad),
            Ok(SyncOutcome::Dropped(DropReason::MalformedKey)),
            "{bad:?}"
        );
    }
    assert!(h.backend().writes().is_empty());
    assert_eq!(h.stats().dropped, 4);
    assert_eq!(h.stats().sync_errors, 0);
}

#[test]
fn the_happy_path_takes_three_writes() {
    let h = handler();
    h.backend()
        .put_foo(Foo::with_deployment("ns", "a", "web", 3));
    // 1: the Deployment is created; nothing is available yet, and the Foo
    // has no status, which reads as 0: no status write.
    assert_eq!(
        sync(&h, "ns/a"),
        synced(SyncReport {
            created: true,
            ..SyncReport::default()
        })
    );
    let d = h.backend().deployment("ns/web").unwrap();
    assert_eq!(spec_replicas(d.as_ref()), 3);
    assert!(h.backend().events().is_empty());
    // 2: the Deployment's watch event: still nothing to write.
    assert_eq!(sync(&h, "ns/a"), synced(SyncReport::default()));
    // 3: the rollout finished: the status is written, the Foo converged.
    h.backend().roll_out("ns/web");
    assert_eq!(
        sync(&h, "ns/a"),
        synced(SyncReport {
            status_written: true,
            converged: true,
            ..SyncReport::default()
        })
    );
    assert_eq!(h.backend().foo("ns/a").unwrap().available_replicas(), 3);
    // 4: the Foo's own update event (and every resync): no write, no event.
    assert_eq!(
        sync(&h, "ns/a"),
        synced(SyncReport {
            converged: true,
            ..SyncReport::default()
        })
    );
    assert_eq!(h.backend().writes(), ["create ns/web", "status ns/a"]);
    let events = h.backend().events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0],
        (
            "ns/a".to_owned(),
            EventType::Normal,
            "Synced".to_owned(),
            "Foo synced successfully".to_owned()
        )
    );
    let stats = h.stats();
    assert_eq!(
        (stats.syncs, stats.deployments_created, stats.status_updates),
        (4, 1, 1)
    );
}

#[test]
fn a_deployment_that_never_becomes_available_gives_status_0_and_a_synced_event() {
    let h = handler();
    h.backend()
        .put_foo(Foo::with_deployment("ns", "a", "web", 2));
    assert!(matches!(sync(&h, "ns/a"), Ok(SyncOutcome::Synced(r)) if r.created));
    // the Deployment controller has not looked yet: nothing to report
    assert_eq!(sync(&h, "ns/a"), synced(SyncReport::default()));
    assert!(h.backend().foo("ns/a").unwrap().status.is_none());
    // it has, and nothing is available (no nodes): the Foo says 0
    h.backend().observe_unavailable("ns/web");
    assert_eq!(
        sync(&h, "ns/a"),
        synced(SyncReport {
            status_written: true,
            ..SyncReport::default()
        })
    );
    let foo = h.backend().foo("ns/a").unwrap();
    assert_eq!(foo.status.as_ref().map(|s| s.available_replicas), Some(0));
    let events = h.backend().events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (events[0].1, events[0].2.as_str()),
        (EventType::Normal, "Synced")
    );
    // resyncs write nothing more
    assert_eq!(sync(&h, "ns/a"), synced(SyncReport::default()));
    assert_eq!(h.backend().writes(), ["create ns/web", "status ns/a"]);
}

#[test]
fn a_foreign_deployment_is_an_error_and_a_warning() {
    let h = handler();
    h.backend()
        .put_foo(Foo::with_deployment("ns", "a", "web", 1));
    let mut foreign = Deployment::default();
    foreign.metadata.name = Some("web".into());
    foreign.metadata.namespace = Some("ns".into());
    h.backend().put_deployment(foreign);
    let err = sync(&h, "ns/a").unwrap_err();
    assert_eq!(
        err,
        "Resource \"web\" already exists and is not managed by Foo"
    );
    let events = h.backend().events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].1, EventType::Warning);
    assert_eq!(events[0].2, "ErrResourceExists");
    assert_eq!(events[0].3, err);
    assert!(h.backend().writes().is_empty());
    assert_eq!(h.stats().sync_errors, 1);
}

#[test]
fn a_deployment_of_an_earlier_foo_of_the_same_name_is_foreign() {
    let h = handler();
    let old = h
        .backend()
        .put_foo(Foo::with_deployment("ns", "a", "web", 1));
    h.backend().put_deployment(new_deployment(&old));
    let mut recreated = Foo::with_deployment("ns", "a", "web", 1);
    recreated.metadata.uid = Some("a-new-uid".into());
    h.backend().put_foo(recreated);
    assert!(sync(&h, "ns/a").unwrap_err().contains("not managed by Foo"));
}

#[test]
fn replicas_are_followed_and_the_rest_of_the_deployment_kept() {
    let h = handler();
    let foo = h
        .backend()
        .put_foo(Foo::with_deployment("ns", "a", "web", 1));
    let mut existing = new_deployment(&foo);
    existing
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("note".into(), "kept".into());
    h.backend().put_deployment(existing);
    h.backend().roll_out("ns/web");
    let mut scaled = Foo::clone(&foo);
    scaled.spec.replicas = Some(4);
    h.backend().put_foo(scaled);

    let outcome = sync(&h, "ns/a").unwrap();
    assert_eq!(
        outcome,
        SyncOutcome::Synced(SyncReport {
            scaled: true,
            status_written: true,
            ..SyncReport::default()
        }),
        "status 1 is written while the Deployment scales to 4"
    );
    let d = h.backend().deployment("ns/web").unwrap();
    assert_eq!(spec_replicas(d.as_ref()), 4);
    assert_eq!(d.annotations()["note"], "kept");
    // every status write is reported, as upstream reports every sync
    assert_eq!(h.backend().events().len(), 1);
    h.backend().roll_out("ns/web");
    assert!(matches!(
        sync(&h, "ns/a"),
        Ok(SyncOutcome::Synced(SyncReport {
            converged: true,
            status_written: true,
            ..
        }))
    ));
    assert_eq!(h.backend().foo("ns/a").unwrap().available_replicas(), 4);
    let events = h.backend().events();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events.iter().all(|e| e.2 == "Synced"));
}

#[test]
fn a_failed_create_is_a_warning_and_a_retried_error() {
    let h = handler();
    h.backend()
        .put_foo(Foo::with_deployment("ns", "a", "web", 1));
    h.backend().fail_next_creates(&[500]);
    let err = sync(&h, "ns/a").unwrap_err();
    assert!(err.starts_with("creating Deployment \"web\""), "{err}");
    let events = h.backend().events();
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].1, events[0].2.as_str()),
        (EventType::Warning, "FailedCreate")
    );
    assert!(events[0].3.contains("Error creating Deployment \"web\""));
    // the retry succeeds
    assert!(sync(&h, "ns/a").is_ok());
    assert_eq!(h.backend().deployment_count(), 1);
}

#[test]
fn already_exists_means_a_stale_cache_and_no_warning() {
    let h = handler();
    h.backend()
        .put_foo(Foo::with_deployment("ns", "a", "web", 1));
    h.backend().fail_next_creates(&[409]);
    assert!(sync(&h, "ns/a").is_err());
    assert!(h.backend().events().is_empty());
}

#[test]
fn a_status_conflict_is_retried() {
    struct Stale(FakeBackend, Arc<Foo>);
    impl Backend for Stale {
        fn get_foo(&self, _: &str, _: &str) -> Option<Arc<Foo>> {
            Some(Arc::clone(&self.1))
        }
        fn get_deployment(&self, ns: &str, name: &str) -> Option<Arc<LeanDeployment>> {
            self.0.get_deployment(ns, name)
        }
        async fn create_deployment(
            &self,
            d: &Deployment,
        ) -> Result<Deployment, kcontrol_client::Error> {
            self.0.create_deployment(d).await
        }
        async fn scale_deployment(
            &self,
            d: &LeanDeployment,
            replicas: i32,
        ) -> Result<Deployment, kcontrol_client::Error> {
            self.0.scale_deployment(d, replicas).await
        }
        async fn replace_foo_status(&self, foo: &Foo) -> Result<Foo, kcontrol_client::Error> {
            self.0.replace_foo_status(foo).await
        }
        fn record(&self, foo: &Foo, t: EventType, reason: &str, message: String) {
            self.0.record(foo, t, reason, message);
        }
    }
    let backend = FakeBackend::default();
    let stale = backend.put_foo(Foo::with_deployment("ns", "a", "web", 2));
    backend.put_deployment(new_deployment(&stale));
    backend.roll_out("ns/web");
    backend.put_foo(Foo::clone(&stale)); // a newer resourceVersion on the server
    let h = SyncHandler::new(Stale(backend, stale));
    let err = block_on(h.sync("ns/a")).unwrap_err();
    assert!(matches!(err, SyncError::UpdateStatus { .. }), "{err}");
    assert!(err.to_string().contains("Conflict"), "{err}");
}

/// Outside changes the model test applies between syncs.
#[derive(Clone, Debug)]
enum Change {
    Scale(usize, i32),
    DeleteDeployment(usize),
    RollOut(usize),
    Sync(usize),
}

fn change(foos: usize) -> impl Strategy<Value = Change> {
    prop_oneof![
        (0..foos, 1..=10i32).prop_map(|(i, r)| Change::Scale(i, r)),
        (0..foos).prop_map(Change::DeleteDeployment),
        (0..foos).prop_map(Change::RollOut),
        (0..foos).prop_map(Change::Sync),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_history_converges_and_then_writes_nothing(
        changes in proptest::collection::vec(change(3), 0..40)
    ) {
        let h = handler();
        let keys: Vec<String> = (0..3).map(|i| format!("ns/foo-{i}")).collect();
        for i in 0..3 {
            h.backend().put_foo(Foo::with_deployment("ns", &format!("foo-{i}"), &format!("deploy-{i}"), 1));
        }
        for c in &changes {
            match *c {
                Change::Scale(i, r) => {
                    let mut foo = Foo::clone(&h.backend().foo(&keys[i]).unwrap());
                    foo.spec.replicas = Some(r);
                    h.backend().put_foo(foo);
                }
                Change::DeleteDeployment(i) => h.backend().delete_deployment(&format!("ns/deploy-{i}")),
                Change::RollOut(i) => h.backend().roll_out(&format!("ns/deploy-{i}")),
                Change::Sync(i) => { let _ = block_on(h.sync(&keys[i])); }
            }
        }
        // Let the controller and the simulator finish: sync, roll out, sync.
        for key in &keys {
            for _ in 0..3 {
                prop_assert!(block_on(h.sync(key)).is_ok());
                let deploy = h.backend().foo(key).unwrap().spec.deployment_name.clone();
                h.backend().roll_out(&format!("ns/{deploy}"));
            }
            prop_assert!(block_on(h.sync(key)).is_ok());
        }
        prop_assert_eq!(h.backend().deployment_count(), 3);
        for key in &keys {
            let foo = h.backend().foo(key).unwrap();
            let deploy = h.backend().deployment(&format!("ns/{}", foo.spec.deployment_name)).unwrap();
            prop_assert!(crate::deployment::is_converged(&foo, deploy.as_ref()), "{key} not converged");
            prop_assert_eq!(foo.available_replicas(), foo.desired_replicas());
        }
        // In sync: another round writes nothing and records nothing.
        let (writes, events) = (h.backend().writes().len(), h.backend().events().len());
        for key in &keys {
            let outcome = block_on(h.sync(key));
            let quiet = SyncReport { converged: true, ..SyncReport::default() };
            prop_assert_eq!(outcome.ok(), Some(SyncOutcome::Synced(quiet)));
        }
        prop_assert_eq!(h.backend().writes().len(), writes);
        prop_assert_eq!(h.backend().events().len(), events);
        prop_assert!(h.backend().events().iter().all(|e| e.1 == EventType::Normal));
    }
}
