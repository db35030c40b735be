//! The soak's verdict on a server state: for every Foo, the Deployments it
//! owns (by the uid of their controller owner reference), and for every
//! Deployment, whether a live Foo owns it.
//!
//! - **lost**: a Foo that owns no Deployment;
//! - **duplicated**: a Foo that owns more than one;
//! - **orphaned**: a Deployment without a controller owner reference to a
//!   Foo that exists now. The testserver runs the garbage collector (as
//!   kube-controller-manager does): when a Foo is removed, or a Deployment
//!   is written with an owner that does not exist, the Deployment is
//!   deleted (background propagation). So once the state has settled, a
//!   Deployment whose owner is gone is one the collector (or the controller
//!   writing it) got wrong; Deployments being deleted are not counted;
//! - **mismatched**: a Foo owning one Deployment with other replicas;
//! - **unsynced**: a Foo whose `status.availableReplicas` is not its
//!   replicas (the Deployment status simulator makes them available).
//!
//! Converged: none of the five.
// the resource is named Foo
#![allow(clippy::disallowed_names)]

use std::collections::HashMap;

use serde_json::Value;

/// What the check found; `examples` names a few offenders for the log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Foos checked.
    pub foos: usize,
    /// Deployments checked.
    pub deployments: usize,
    /// Foos owning no Deployment.
    pub lost: usize,
    /// Foos owning more than one Deployment.
    pub duplicated: usize,
    /// Deployments owned by no existing Foo.
    pub orphaned: usize,
    /// Foos whose one Deployment has other replicas.
    pub mismatched: usize,
    /// Foos whose status does not report their replicas available.
    pub unsynced: usize,
    /// Up to [`MAX_EXAMPLES`] offenders, as `what name`.
    pub examples: Vec<String>,
}

/// Offenders named in [`Verdict::examples`] at most.
pub const MAX_EXAMPLES: usize = 8;

impl Verdict {
    /// Every Foo has its one Deployment with its replicas, reported in its
    /// status, and no Deployment is orphaned.
    pub fn converged(&self) -> bool {
        self.lost == 0
            && self.duplicated == 0
            && self.orphaned == 0
            && self.mismatched == 0
            && self.unsynced == 0
    }

    fn note(&mut self, what: &str, name: &str) {
        if self.examples.len() < MAX_EXAMPLES {
            self.examples.push(format!("{what} {name}"));
        }
    }
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .fold(v, |v, key| &v[*key])
        .as_str()
        .unwrap_or("")
}

fn deleting(v: &Value) -> bool {
    !v["metadata"]["deletionTimestamp"].is_null()
}

/// The uid of the Foo named by the object's controller owner reference.
fn controlling_foo_uid(deployment: &Value) -> Option<&str> {
    deployment["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["controller"].as_bool() == Some(true))
        .filter(|r| r["kind"] == sample_controller::foo::KIND)
        .filter(|r| {
            str_at(r, &["apiVersion"])
                .split('/')
                .next()
                .is_some_and(|g| g == sample_controller::foo::GROUP)
        })
        .and_then(|r| r["uid"].as_str())
}

/// A Foo's desired replicas: `spec.replicas`, 1 when absent (as the
/// controller reads it).
fn desired_replicas(foo: &Value) -> i64 {
    foo["spec"]["replicas"].as_i64().unwrap_or(1)
}

/// Checks the Foos and Deployments of one namespace (as JSON, the way the
/// server stores them).
pub fn check(foos: &[&Value], deployments: &[&Value]) -> Verdict {
    let mut verdict = Verdict {
        foos: foos.len(),
        deployments: deployments.len(),
        ..Verdict::default()
    };
    let live: HashMap<&str, &Value> = foos
        .iter()
        .filter(|f| !deleting(f))
        .map(|f| (str_at(f, &["metadata", "uid"]), *f))
        .filter(|(uid, _)| !uid.is_empty())
        .collect();
    let mut owned: HashMap<&str, Vec<&Value>> = HashMap::new();
    for d in deployments.iter().filter(|d| !deleting(d)) {
        match controlling_foo_uid(d).filter(|uid| live.contains_key(uid)) {
            Some(uid) => owned.entry(uid).or_default().push(d),
            None => {
                verdict.orphaned += 1;
                verdict.note("orphaned", str_at(d, &["metadata", "name"]));
            }
        }
    }
    for foo in foos.iter().filter(|f| !deleting(f)) {
        let name = str_at(foo, &["metadata", "name"]);
        let want = desired_replicas(foo);
        match owned
            .get(str_at(foo, &["metadata", "uid"]))
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            [] => {
                verdict.lost += 1;
                verdict.note("lost", name);
            }
            [one] => {
                if one["spec"]["replicas"].as_i64().unwrap_or(1) != want {
                    verdict.mismatched += 1;
                    verdict.note("mismatched", name);
                }
            }
            _ => {
                verdict.duplicated += 1;
                verdict.note("duplicated", name);
            }
        }
        if foo["status"]["availableReplicas"].as_i64() != Some(want) {
            verdict.unsynced += 1;
            verdict.note("unsynced", name);
        }
    }
    verdict
}

/// Checks the server's Foos and Deployments in `namespace`.
pub fn check_server(objects: &kcontrol_testserver::Objects, namespace: &str) -> Verdict {
    let list = |resource: &str| {
        objects
            .list(resource, Some(namespace))
            .map(|l| l.items)
            .unwrap_or_default()
    };
    let (foos, deployments) = (
        list(crate::controller::FOO_RESOURCE),
        list("deployments.apps"),
    );
    let foos: Vec<&Value> = foos.iter().map(|f| f.value()).collect();
    let deployments: Vec<&Value> = deployments.iter().map(|d| d.value()).collect();
    check(&foos, &deployments)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn foo(name: &str, uid: &str, replicas: i64, available: Option<i64>) -> Value {
        let mut foo = json!({
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "Foo",
            "metadata": {"name": name, "namespace": "default", "uid": uid},
            "spec": {"deploymentName": name, "replicas": replicas},
        });
        if let Some(a) = available {
            foo["status"] = json!({"availableReplicas": a});
        }
        foo
    }

    fn deployment(name: &str, owner_uid: Option<&str>, replicas: i64) -> Value {
        let mut d = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default", "uid": format!("d-{name}")},
            "spec": {"replicas": replicas},
        });
        if let Some(uid) = owner_uid {
            d["metadata"]["ownerReferences"] = json!([{
                "apiVersion": "samplecontroller.k8s.io/v1alpha1",
                "kind": "Foo",
                "name": name,
                "uid": uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }]);
        }
        d
    }

    fn run(foos: &[Value], deployments: &[Value]) -> Verdict {
        check(
            &foos.iter().collect::<Vec<_>>(),
            &deployments.iter().collect::<Vec<_>>(),
        )
    }

    #[test]
    fn a_converged_state_passes() {
        let v = run(
            &[foo("a", "u1", 2, Some(2)), foo("b", "u2", 1, Some(1))],
            &[
                deployment("a", Some("u1"), 2),
                deployment("b", Some("u2"), 1),
            ],
        );
        assert!(v.converged(), "{v:?}");
        assert_eq!((v.foos, v.deployments), (2, 2));
        assert!(v.examples.is_empty());
        assert!(run(&[], &[]).converged());
    }

    #[test]
    fn a_foo_without_its_deployment_is_lost() {
        let v = run(
            &[foo("a", "u1", 2, Some(2)), foo("b", "u2", 1, Some(1))],
            &[deployment("a", Some("u1"), 2)],
        );
        assert_eq!((v.lost, v.duplicated, v.orphaned), (1, 0, 0), "{v:?}");
        assert!(!v.converged());
        assert_eq!(v.examples, ["lost b"]);
    }

    /// A Foo recreated with the same name is another Foo (another uid): the
    /// old one's Deployment is not the new one's, so the new Foo is lost and
    /// the Deployment orphaned until the controller and the collector act.
    #[test]
    fn a_deployment_of_a_previous_foo_of_the_same_name_counts_for_neither() {
        let v = run(
            &[foo("a", "u-new", 2, Some(2))],
            &[deployment("a", Some("u-old"), 2)],
        );
        assert_eq!((v.lost, v.orphaned), (1, 1), "{v:?}");
    }

    #[test]
    fn two_deployments_owned_by_one_foo_are_duplicated() {
        let v = run(
            &[foo("a", "u1", 2, Some(2))],
            &[
                deployment("a", Some("u1"), 2),
                deployment("a-2", Some("u1"), 2),
            ],
        );
        assert_eq!((v.lost, v.duplicated, v.orphaned), (0, 1, 0), "{v:?}");
        assert!(!v.converged());
        assert_eq!(v.examples, ["duplicated a"]);
    }

    #[test]
    fn deployments_without_a_live_owner_are_orphaned() {
        let mut other_kind = deployment("c", Some("u1"), 1);
        other_kind["metadata"]["ownerReferences"][0]["kind"] = json!("ReplicaSet");
        let mut not_controller = deployment("d", Some("u1"), 1);
        not_controller["metadata"]["ownerReferences"][0]["controller"] = json!(false);
        let mut deleting = deployment("e", Some("gone"), 1);
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let v = run(
            &[foo("a", "u1", 2, Some(2))],
            &[
                deployment("a", Some("u1"), 2),
                deployment("b", Some("gone"), 1),
                deployment("free", None, 1),
                other_kind,
                not_controller,
                deleting,
            ],
        );
        assert_eq!((v.lost, v.duplicated, v.orphaned), (0, 0, 4), "{v:?}");
        assert!(!v.converged());
        assert_eq!(
            v.examples,
            ["orphaned b", "orphaned free", "orphaned c", "orphaned d"]
        );
    }

    #[test]
    fn other_replicas_or_a_stale_status_are_not_converged() {
        let v = run(
            &[foo("a", "u1", 3, Some(3)), foo("b", "u2", 2, Some(1))],
            &[
                deployment("a", Some("u1"), 1),
                deployment("b", Some("u2"), 2),
            ],
        );
        assert_eq!((v.mismatched, v.unsynced), (1, 1), "{v:?}");
        assert_eq!((v.lost, v.duplicated, v.orphaned), (0, 0, 0));
        assert!(!v.converged());
        let no_status = run(
            &[foo("a", "u1", 1, None)],
            &[deployment("a", Some("u1"), 1)],
        );
        assert_eq!(no_status.unsynced, 1);
    }

    /// The same check reading a real server's store: each fault is reported.
    /// Deployments are created as a client would; the one with a controller
    /// reference to a missing Foo would be garbage collected at once, so the
    /// orphan here has no owner reference at all.
    #[test]
    fn the_server_state_is_read_and_each_fault_reported() {
        let server = kcontrol_testserver::TestServer::builder()
            .deployment_simulator(None)
            .start_blocking()
            .unwrap();
        let objects = server.objects();
        objects
            .create(
                "customresourcedefinitions.apiextensions.k8s.io",
                "",
                crate::controller::crd_json().unwrap(),
            )
            .unwrap();
        let mut uids = Vec::new();
        for (name, available) in [("ok", 2), ("lost", 2), ("dup", 2)] {
            let mut new = foo(name, "", 2, None);
            new["metadata"].as_object_mut().unwrap().remove("uid");
            let stored = objects
                .create(crate::controller::FOO_RESOURCE, "default", new)
                .unwrap();
            let mut v = stored.value().clone();
            v["status"] = json!({"availableReplicas": available});
            objects
                .update_status(crate::controller::FOO_RESOURCE, "default", v)
                .unwrap();
            uids.push(stored.uid().to_owned());
        }
        for (name, owner) in [("ok", 0), ("dup", 2), ("dup-2", 2)] {
            let mut d = deployment(name, Some(&uids[owner]), 2);
            d["metadata"]["ownerReferences"][0]["name"] =
                json!(if owner == 0 { "ok" } else { "dup" });
            d["spec"]["selector"] = json!({"matchLabels": {"app": "nginx"}});
            d["spec"]["template"] = json!({
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]},
            });
            objects.create("deployments.apps", "default", d).unwrap();
        }
        let mut free = objects
            .get("deployments.apps", "default", "dup-2")
            .unwrap()
            .value()
            .clone();
        free["metadata"]["name"] = json!("free");
        for field in [
            "ownerReferences",
            "uid",
            "resourceVersion",
            "creationTimestamp",
        ] {
            free["metadata"].as_object_mut().unwrap().remove(field);
        }
        objects.create("deployments.apps", "default", free).unwrap();

        let v = check_server(&objects, "default");
        assert_eq!((v.foos, v.deployments), (3, 4), "{v:?}");
        assert_eq!((v.lost, v.duplicated, v.orphaned), (1, 1, 1), "{v:?}");
        assert_eq!((v.mismatched, v.unsynced), (0, 0), "{v:?}");
        assert!(!v.converged());
    }
}
