//! The in-cluster configuration: the API server from
//! `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT`, and the pod's
//! service-account token (a token file, re-read as it rotates), CA bundle
//! and namespace.

use std::path::Path;

use super::{parse_pem_certs, Config, ConfigError};
use crate::auth::Auth;

/// Where Kubernetes mounts the service-account files.
const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

pub(super) fn load() -> Result<Config, ConfigError> {
    load_from(
        std::env::var("KUBERNETES_SERVICE_HOST").ok(),
        std::env::var("KUBERNETES_SERVICE_PORT").ok(),
        Path::new(SERVICE_ACCOUNT_DIR),
    )
}

/// The configuration from the given environment values and service-account folder.
pub(super) fn load_from(
    host: Option<String>,
    port: Option<String>,
    dir: &Path,
) -> Result<Config, ConfigError> {
    let (Some(host), Some(port)) = (
        host.filter(|h| !h.is_empty()),
        port.filter(|p| !p.is_empty()),
    ) else {
        return Err(ConfigError::InCluster(
            "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not running in a pod)".to_owned(),
        ));
    };
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host
    };
    let url = format!("https://{host}:{port}");
    let uri: http::Uri = url
        .parse()
        .map_err(|e| ConfigError::InCluster(format!("{url} is not a valid server URL ({e})")))?;

    let token_path = dir.join("token");
    match std::fs::read_to_string(&token_path) {
        Ok(token) if !token.trim().is_empty() => {}
        Ok(_) => {
            return Err(ConfigError::InCluster(format!(
                "the token file {} is empty",
                token_path.display()
            )))
        }
        Err(e) => {
            return Err(ConfigError::InCluster(format!(
                "cannot read the token file {}: {e}",
                token_path.display()
            )))
        }
    }

    let mut config = Config::new(uri).with_auth(Auth::TokenFile(token_path));
    let ca_path = dir.join("ca.crt");
    match std::fs::read(&ca_path) {
        Ok(pem) => config.tls.root_certs = parse_pem_certs(&pem, &ca_path.display().to_string())?,
        Err(e) => {
            tracing::warn!(path = %ca_path.display(), error = %e, "no service-account CA; using the system trust store")
        }
    }
    if let Ok(ns) = std::fs::read_to_string(dir.join("namespace")) {
        if !ns.trim().is_empty() {
            config.default_namespace = ns.trim().to_owned();
        }
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_the_environment_and_a_token() {
        let dir = tempfile::tempdir().unwrap();
        let err = load_from(None, Some("443".into()), dir.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("KUBERNETES_SERVICE_HOST"), "{err}");
        let err = load_from(Some("10.0.0.1".into()), Some("443".into()), dir.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("token"), "{err}");
    }

    #[test]
    fn reads_token_namespace_and_ipv6_hosts() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "abc").unwrap();
        std::fs::write(dir.path().join("namespace"), "kube-system\n").unwrap();
        let config = load_from(Some("fd00::1".into()), Some("443".into()), dir.path()).unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://[fd00::1]:443/");
        assert_eq!(config.default_namespace, "kube-system");
        assert!(matches!(config.auth, Auth::TokenFile(_)));
    }
}
