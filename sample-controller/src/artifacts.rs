//! The manifests of `artifacts/examples/`, built into the binary (so it runs
//! from any directory), and installing the Foo CRD on a server.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kcontrol_client::{Api, Client, PostParams};

/// `artifacts/examples/crd.yaml`: the Foo CustomResourceDefinition.
pub const CRD_YAML: &str = include_str!("../../artifacts/examples/crd.yaml");

/// `artifacts/examples/example-foo.yaml`: one Foo.
pub const EXAMPLE_FOO_YAML: &str = include_str!("../../artifacts/examples/example-foo.yaml");

/// Installing the CRD failed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The embedded manifest does not parse (a build with a broken file).
    #[error("artifacts/examples/crd.yaml is not a valid CustomResourceDefinition: {0}")]
    Manifest(#[from] serde_yaml::Error),
    /// The server refused the CRD or could not be reached.
    #[error("creating the Foo CustomResourceDefinition: {0}")]
    Create(#[source] kcontrol_client::Error),
    /// The server did not report the CRD `Established` in time.
    #[error("the Foo CustomResourceDefinition was not Established within {0:?}")]
    NotEstablished(Duration),
}

/// The Foo CRD from the embedded manifest.
pub fn foo_crd() -> Result<CustomResourceDefinition, serde_yaml::Error> {
    serde_yaml::from_str(CRD_YAML)
}

/// Whether a CRD's `Established` condition is `True`.
pub fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

/// Creates the Foo CRD (an existing one is kept) and waits until the
/// server reports it `Established`, at most `timeout`.
pub async fn install_foo_crd(client: &Client, timeout: Duration) -> Result<(), InstallError> {
    let crd = foo_crd()?;
    let name = crd.metadata.name.clone().unwrap_or_default();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    match api.create(&PostParams::default(), &crd).await {
        Ok(_) => tracing::info!(%name, "created the Foo CustomResourceDefinition"),
        Err(e) if e.is_already_exists() => tracing::info!(%name, "the Foo CRD already exists"),
        Err(e) => return Err(InstallError::Create(e)),
    }
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match api.get(&name).await {
            Ok(current) if is_established(&current) => return Ok(()),
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "reading the Foo CRD"),
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(InstallError::NotEstablished(timeout));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_manifest_defines_foo_with_status_and_replica_bounds() {
        let crd = foo_crd().unwrap();
        assert_eq!(crd.spec.group, crate::foo::GROUP);
        assert_eq!(crd.spec.names.plural, "foos");
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, crate::foo::VERSION);
        assert!(version.subresources.as_ref().unwrap().status.is_some());
        let schema = serde_json::to_value(&version.schema).unwrap();
        let replicas = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"];
        assert_eq!(replicas["minimum"], 1.0);
        assert_eq!(replicas["maximum"], 10.0);
        assert!(!is_established(&crd));
    }
}
