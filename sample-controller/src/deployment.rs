//! The Deployment a Foo owns: how it is built ([`new_deployment`], owned
//! through [`kcontrol_controller::owner::new_controller_ref`]) and what "in
//! sync" means ([`is_converged`]). Ownership is checked with
//! [`kcontrol_controller::owner::is_controlled_by`].

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kcontrol_controller::owner::{is_controlled_by, new_controller_ref};
use kcontrol_indexer::Object;

use crate::foo::Foo;

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
    Deployment {
        metadata: ObjectMeta {
            name: Some(foo.spec.deployment_name.clone()),
            namespace: foo.namespace().map(str::to_owned),
            labels: Some(labels.clone()),
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
pub fn spec_replicas(deployment: &Deployment) -> i32 {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1)
}

/// `status.availableReplicas` of a Deployment (0 when unset).
pub fn available_replicas(deployment: &Deployment) -> i32 {
    deployment
        .status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

/// Whether the Deployment controller has reported on the Deployment's
/// current generation (`status.observedGeneration` caught up): before
/// that, its status says nothing yet (no replica counted is not "0
/// available", it is "not looked at").
pub fn status_observed(deployment: &Deployment) -> bool {
    let generation = deployment.metadata.generation.unwrap_or(0);
    deployment
        .status
        .as_ref()
        .and_then(|s| s.observed_generation)
        .is_some_and(|observed| observed >= generation)
}

/// Whether `foo` is in sync with `deployment`: the Deployment is the Foo's,
/// has the replicas asked for, all of them available, and the Foo's status
/// reports them.
pub fn is_converged(foo: &Foo, deployment: &Deployment) -> bool {
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
