//! The Deployment a Foo owns: how it is built ([`new_deployment`], owned
//! through [`kcontrol_controller::owner::new_controller_ref`]), how it is
//! cached ([`LeanDeployment`]: only what the sync handler reads) and what
//! "in sync" means ([`is_converged`]). Ownership is checked with
//! [`kcontrol_controller::owner::is_controlled_by`].
//!
//! The controller writes k8s-openapi [`Deployment`]s and reads
//! [`LeanDeployment`]s from its cache: a cached Deployment is its compact
//! metadata (ownerReferences included), `spec.replicas` and two status
//! fields, instead of the whole object with its pod template. The readers
//! here ([`spec_replicas`], [`available_replicas`], [`status_observed`],
//! [`is_converged`]) take either, through [`DeploymentView`].

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kcontrol_controller::owner::{is_controlled_by, new_controller_ref};
use kcontrol_indexer::compact::CompactMeta;
use kcontrol_indexer::Object;
use serde::Deserialize;

use crate::foo::Foo;

/// The part of a Deployment's spec the controller reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct LeanDeploymentSpec {
    /// `spec.replicas`.
    #[serde(default)]
    pub replicas: Option<i32>,
}

/// The part of a Deployment's status the controller reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeanDeploymentStatus {
    /// `status.availableReplicas`.
    #[serde(default)]
    pub available_replicas: Option<i32>,
    /// `status.observedGeneration`.
    #[serde(default)]
    pub observed_generation: Option<i64>,
}

kcontrol_indexer::lean_resource! {
    /// A Deployment as the controller caches it: compact metadata
    /// (ownerReferences included), `spec.replicas`,
    /// `status.availableReplicas` and `status.observedGeneration`; the pod
    /// template and everything else is skipped while decoding.
    pub struct LeanDeployment {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        plural: "deployments",
        scope: Namespaced,
        fields {
            /// `spec`, as far as read.
            spec: LeanDeploymentSpec = "spec",
            /// `status`, as far as read.
            status: LeanDeploymentStatus = "status",
        }
    }
}

/// The lean form of a Deployment the API returned (a create's or an
/// update's result).
impl From<&Deployment> for LeanDeployment {
    fn from(d: &Deployment) -> Self {
        Self {
            metadata: CompactMeta::from(&d.metadata),
            spec: LeanDeploymentSpec {
                replicas: d.spec.as_ref().and_then(|s| s.replicas),
            },
            status: LeanDeploymentStatus {
                available_replicas: d.status.as_ref().and_then(|s| s.available_replicas),
                observed_generation: d.status.as_ref().and_then(|s| s.observed_generation),
            },
        }
    }
}

/// What the controller reads of a Deployment, from a k8s-openapi
/// [`Deployment`] or a cached [`LeanDeployment`].
pub trait DeploymentView: kcontrol_indexer::KubeObject {
    /// `spec.replicas`, as set.
    fn replicas_field(&self) -> Option<i32>;
    /// `status.availableReplicas`, as set.
    fn available_replicas_field(&self) -> Option<i32>;
    /// `status.observedGeneration`, as set.
    fn observed_generation_field(&self) -> Option<i64>;
}

impl DeploymentView for Deployment {
    fn replicas_field(&self) -> Option<i32> {
        self.spec.as_ref().and_then(|s| s.replicas)
    }
    fn available_replicas_field(&self) -> Option<i32> {
        self.status.as_ref().and_then(|s| s.available_replicas)
    }
    fn observed_generation_field(&self) -> Option<i64> {
        self.status.as_ref().and_then(|s| s.observed_generation)
    }
}

impl DeploymentView for LeanDeployment {
    fn replicas_field(&self) -> Option<i32> {
        self.spec.replicas
    }
    fn available_replicas_field(&self) -> Option<i32> {
        self.status.available_replicas
    }
    fn observed_generation_field(&self) -> Option<i64> {
        self.status.observed_generation
    }
}

/// The image of the Foo's Deployment.
pub const IMAGE: &str = "nginx:latest";

/// The labels of the Deployment, its selector and its pods:
/// `app=nginx`, `controller=<foo name>`.
pub fn labels(foo: &Foo) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app".to_owned(), "nginx".to_owned()),
        (
            "controller".to_owned(),
            foo.name().unwrap_or_default().to_owned(),
        ),
    ])
}

/// The Deployment `foo` asks for: `spec.deploymentName` in the Foo's
/// namespace, `spec.replicas` pods of nginx, owned by the Foo.
pub fn new_deployment(foo: &Foo) -> Deployment {
    let labels = labels(foo);
    // sharded: the Deployment is created in its Foo's shard, so that the
    // replica reconciling the Foo caches it at once
    let mut own_labels = labels.clone();
    own_labels.extend(
        foo.labels()
            .iter()
            .filter(|(k, _)| k.starts_with(kcontrol_controller::sharding::SHARD_LABEL_PREFIX))
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    Deployment {
        metadata: ObjectMeta {
            name: Some(foo.spec.deployment_name.clone()),
            namespace: foo.namespace().map(str::to_owned),
            labels: Some(own_labels),
            // the controller reference, with blockOwnerDeletion: a foreground
            // deletion of the Foo waits for the Deployment
            owner_references: Some(vec![new_controller_ref(foo)]),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: foo.spec.replicas,
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "nginx".to_owned(),
                        image: Some(IMAGE.to_owned()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

/// `spec.replicas` of a Deployment (1 when unset, the API default).
pub fn spec_replicas<D: DeploymentView + ?Sized>(deployment: &D) -> i32 {
    deployment.replicas_field().unwrap_or(1)
}

/// `status.availableReplicas` of a Deployment (0 when unset).
pub fn available_replicas<D: DeploymentView + ?Sized>(deployment: &D) -> i32 {
    deployment.available_replicas_field().unwrap_or(0)
}

/// Whether the Deployment controller has reported on the Deployment's
/// current generation (`status.observedGeneration` caught up): before
/// that, its status says nothing yet (no replica counted is not "0
/// available", it is "not looked at").
pub fn status_observed<D: DeploymentView + ?Sized>(deployment: &D) -> bool {
    let generation = kcontrol_indexer::KubeObject::generation(deployment).unwrap_or(0);
    deployment
        .observed_generation_field()
        .is_some_and(|observed| observed >= generation)
}

/// Whether `foo` is in sync with `deployment`: the Deployment is the Foo's,
/// has the replicas asked for, all of them available, and the Foo's status
/// reports them.
pub fn is_converged<D: DeploymentView + ?Sized>(foo: &Foo, deployment: &D) -> bool {
    let desired = foo.desired_replicas();
    is_controlled_by(deployment, foo)
        && spec_replicas(deployment) == desired
        && available_replicas(deployment) == desired
        && foo.available_replicas() == desired
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::DeploymentStatus;
    use kcontrol_indexer::Object;

    pub(crate) fn foo(name: &str, replicas: i32) -> Foo {
        let mut foo = Foo::with_deployment("ns", name, &format!("{name}-deploy"), replicas);
        foo.meta_mut().uid = Some(format!("uid-{name}"));
        foo
    }

    #[test]
    fn the_deployment_is_owned_labelled_and_sized() {
        let f = foo("a", 3);
        let d = new_deployment(&f);
        assert_eq!(d.name(), Some("a-deploy"));
        assert_eq!(d.namespace(), Some("ns"));
        assert_eq!(d.labels()["app"], "nginx");
        assert_eq!(d.labels()["controller"], "a");
        let spec = d.spec.as_ref().unwrap();
        assert_eq!(spec.replicas, Some(3));
        assert_eq!(
            spec.selector.match_labels.as_ref(),
            d.metadata.labels.as_ref()
        );
        let pod = spec.template.spec.as_ref().unwrap();
        assert_eq!(pod.containers[0].image.as_deref(), Some("nginx:latest"));
        let owner = d.controller_ref().unwrap();
        assert_eq!(owner.kind, "Foo");
        assert_eq!(owner.api_version, "samplecontroller.k8s.io/v1alpha1");
        assert_eq!(owner.uid, "uid-a");
        assert_eq!(owner.block_owner_deletion, Some(true));
        assert!(is_controlled_by(&d, &f));
        assert!(!is_controlled_by(&d, &foo("b", 3)));
    }

    #[test]
    fn the_lean_deployment_keeps_what_the_sync_handler_reads() {
        let f = foo("a", 2);
        let mut d = new_deployment(&f);
        d.metadata.generation = Some(3);
        d.status = Some(DeploymentStatus {
            available_replicas: Some(1),
            observed_generation: Some(3),
            ..DeploymentStatus::default()
        });
        let wire = serde_json::to_value(&d).unwrap();
        let lean: LeanDeployment = serde_json::from_value(wire).unwrap();
        for view in [&lean, &LeanDeployment::from(&d)] {
            assert_eq!(spec_replicas(view), 2);
            assert_eq!(available_replicas(view), 1);
            assert!(status_observed(view));
            assert!(is_controlled_by(view, &f));
            assert!(!is_controlled_by(view, &foo("b", 2)));
            assert_eq!(view.metadata.name(), Some("a-deploy"));
        }
        let bare: LeanDeployment =
            serde_json::from_str(r#"{"metadata":{"name":"x","generation":2}}"#).unwrap();
        assert_eq!(spec_replicas(&bare), 1);
        assert_eq!(available_replicas(&bare), 0);
        assert!(!status_observed(&bare));
    }

    #[test]
    fn converged_needs_every_replica_available_and_reported() {
        let mut f = foo("a", 2);
        let mut d = new_deployment(&f);
        assert!(!is_converged(&f, &d));
        d.status = Some(DeploymentStatus {
            available_replicas: Some(2),
            ..DeploymentStatus::default()
        });
        assert!(
            !is_converged(&f, &d),
            "the Foo's status does not say so yet"
        );
        f.status = Some(crate::foo::FooStatus {
            available_replicas: 2,
        });
        assert!(is_converged(&f, &d));
        f.spec.replicas = Some(3);
        assert!(!is_converged(&f, &d));
    }
}
