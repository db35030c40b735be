//! The kubeconfig file format ([`Kubeconfig`]): parsing with serde_yaml,
//! resolving relative paths against the file's folder, and merging several
//! files the way kubectl merges `$KUBECONFIG` (the first file to set a name
//! or `current-context` wins).

use std::path::{Path, PathBuf};

use secrecy::SecretString;
use serde::Deserialize;

use super::ConfigError;
use crate::auth::ExecConfig;
use crate::serde_util::null_as_empty;

/// A kubeconfig: clusters, users and contexts, and the current context.
///
/// Secrets (tokens, passwords, key data, exec environment values) are held
/// as [`SecretString`]s, so `Debug` never shows them.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Kubeconfig {
    /// Named clusters.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub clusters: Vec<NamedCluster>,
    /// Named users (`users` in the file).
    #[serde(default, rename = "users", deserialize_with = "null_as_empty")]
    pub auth_infos: Vec<NamedAuthInfo>,
    /// Named contexts.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub contexts: Vec<NamedContext>,
    /// The context used when none is given.
    #[serde(default)]
    pub current_context: Option<String>,
    /// The files this kubeconfig was read from, in merge order.
    #[serde(skip)]
    pub files: Vec<PathBuf>,
}

/// A cluster with its name.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NamedCluster {
    /// The name contexts refer to.
    pub name: String,
    /// The cluster (absent in a malformed file).
    #[serde(default)]
    pub cluster: Option<Cluster>,
    /// The file this entry came from.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// How to reach a cluster.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Cluster {
    /// The server URL.
    #[serde(default)]
    pub server: Option<String>,
    /// Name to verify the server certificate against, instead of the URL host.
    #[serde(default)]
    pub tls_server_name: Option<String>,
    /// Skip server certificate verification.
    #[serde(default)]
    pub insecure_skip_tls_verify: Option<bool>,
    /// A PEM CA bundle file.
    #[serde(default)]
    pub certificate_authority: Option<String>,
    /// A base64 PEM CA bundle (wins over `certificate-authority`).
    #[serde(default)]
    pub certificate_authority_data: Option<String>,
    /// An HTTP proxy URL (not supported: resolving a context that sets it fails).
    #[serde(default)]
    pub proxy_url: Option<String>,
    /// Extensions; `client.authentication.k8s.io/exec` is passed to exec plugins.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub extensions: Vec<NamedExtension>,
}

/// A named extension object.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NamedExtension {
    /// Extension name.
    pub name: String,
    /// Extension value.
    #[serde(default)]
    pub extension: serde_json::Value,
}

/// A user with its name.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NamedAuthInfo {
    /// The name contexts refer to.
    pub name: String,
    /// The credentials (absent in a malformed file).
    #[serde(default)]
    pub user: Option<AuthInfo>,
    /// The file this entry came from.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// The credentials of a user.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct AuthInfo {
    /// A PEM client certificate file.
    #[serde(default)]
    pub client_certificate: Option<String>,
    /// A base64 PEM client certificate (wins over the file).
    #[serde(default)]
    pub client_certificate_data: Option<String>,
    /// A PEM private key file.
    #[serde(default)]
    pub client_key: Option<String>,
    /// A base64 PEM private key (wins over the file).
    #[serde(default)]
    pub client_key_data: Option<SecretString>,
    /// A bearer token (wins over `tokenFile`).
    #[serde(default)]
    pub token: Option<SecretString>,
    /// A file holding a bearer token, re-read when it changes.
    #[serde(default, rename = "tokenFile")]
    pub token_file: Option<String>,
    /// Basic-auth user name.
    #[serde(default)]
    pub username: Option<String>,
    /// Basic-auth password.
    #[serde(default)]
    pub password: Option<SecretString>,
    /// An exec credential plugin.
    #[serde(default)]
    pub exec: Option<ExecConfig>,
    /// A legacy auth provider (not supported: resolving a user that sets it fails).
    #[serde(default)]
    pub auth_provider: Option<AuthProviderConfig>,
    /// User impersonation (not supported: resolving a user that sets it fails).
    #[serde(default, rename = "as")]
    pub impersonate: Option<String>,
}

/// A legacy `auth-provider` section. Its settings (refresh tokens, client
/// secrets) are kept as secrets.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct AuthProviderConfig {
    /// The provider (`gcp`, `azure`, `oidc`).
    #[serde(default)]
    pub name: String,
    /// Its settings.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub config: std::collections::BTreeMap<String, SecretString>,
}

/// A context with its name.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NamedContext {
    /// The name `current-context` refers to.
    pub name: String,
    /// The context (absent in a malformed file).
    #[serde(default)]
    pub context: Option<Context>,
    /// The file this entry came from.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// A (cluster, user, namespace) triple.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Context {
    /// The cluster's name.
    #[serde(default)]
    pub cluster: String,
    /// The user's name.
    #[serde(default)]
    pub user: Option<String>,
    /// The default namespace.
    #[serde(default)]
    pub namespace: Option<String>,
}

impl Kubeconfig {
    /// Parses a kubeconfig from YAML text. Relative paths stay as they are.
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        parse(text, "<memory>")
    }

    /// Reads one kubeconfig file and resolves its relative paths against the
    /// file's folder.
    pub fn read_from(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ReadKubeconfig {
            path: path.to_owned(),
            source,
        })?;
        let mut config = parse(&text, &path.display().to_string())?;
        let base = path.parent().unwrap_or_else(|| Path::new("."));
        config.resolve_paths(base);
        config.set_source(path);
        Ok(config)
    }

    /// The kubeconfig kubectl would use: the files of `$KUBECONFIG` merged
    /// (missing files skipped), else `~/.kube/config`.
    pub fn read_default() -> Result<Self, ConfigError> {
        match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
            Some(list) => Self::read_merged(std::env::split_paths(&list)),
            None => {
                let path = home_dir()
                    .map(|home| home.join(".kube").join("config"))
                    .ok_or_else(|| {
                        ConfigError::NoKubeconfig(
                            "KUBECONFIG is not set and there is no home directory".to_owned(),
                        )
                    })?;
                if !path.exists() {
                    return Err(ConfigError::NoKubeconfig(format!(
                        "KUBECONFIG is not set and {} does not exist",
                        path.display()
                    )));
                }
                Self::read_from(&path)
            }
        }
    }

    /// Reads and merges several files in order; files that do not exist are
    /// skipped (as kubectl does), and at least one must exist.
    pub fn read_merged(paths: impl IntoIterator<Item = PathBuf>) -> Result<Self, ConfigError> {
        let mut merged: Option<Kubeconfig> = None;
        let mut tried = Vec::new();
        for path in paths {
            if path.as_os_str().is_empty() {
                continue;
            }
            if !path.exists() {
                tried.push(path.display().to_string());
                continue;
            }
            let next = Self::read_from(&path)?;
            merged = Some(match merged {
                Some(current) => current.merge(next),
                None => next,
            });
        }
        merged.ok_or_else(|| {
            ConfigError::NoKubeconfig(format!(
                "none of the KUBECONFIG files exist: {}",
                tried.join(", ")
            ))
        })
    }

    /// Merges `next` into `self` kubectl-style: entries whose name `self`
    /// already has are ignored, and `self`'s `current-context` wins when set.
    #[must_use]
    pub fn merge(mut self, next: Kubeconfig) -> Self {
        fn add<T>(into: &mut Vec<T>, from: Vec<T>, name: impl Fn(&T) -> &str) {
            for item in from {
                if !into.iter().any(|have| name(have) == name(&item)) {
                    into.push(item);
                }
            }
        }
        add(&mut self.clusters, next.clusters, |c| &c.name);
        add(&mut self.auth_infos, next.auth_infos, |u| &u.name);
        add(&mut self.contexts, next.contexts, |c| &c.name);
        if self.current_context.as_deref().unwrap_or("").is_empty() {
            self.current_context = next.current_context;
        }
        self.files.extend(next.files);
        self
    }

    /// Makes every relative file path absolute against `base`.
    fn resolve_paths(&mut self, base: &Path) {
        for cluster in self.clusters.iter_mut().filter_map(|c| c.cluster.as_mut()) {
            resolve(&mut cluster.certificate_authority, base);
        }
        for user in self.auth_infos.iter_mut().filter_map(|u| u.user.as_mut()) {
            resolve(&mut user.client_certificate, base);
            resolve(&mut user.client_key, base);
            resolve(&mut user.token_file, base);
            if let Some(exec) = user.exec.as_mut() {
                // A bare command name is looked up in PATH; a relative path
                // with a separator is relative to the kubeconfig.
                if exec.command.contains('/') || exec.command.contains(std::path::MAIN_SEPARATOR) {
                    let mut command = Some(std::mem::take(&mut exec.command));
                    resolve(&mut command, base);
                    exec.command = command.unwrap_or_default();
                }
            }
        }
    }

    fn set_source(&mut self, path: &Path) {
        for c in &mut self.clusters {
            c.source = Some(path.to_owned());
        }
        for u in &mut self.auth_infos {
            u.source = Some(path.to_owned());
        }
        for c in &mut self.contexts {
            c.source = Some(path.to_owned());
        }
        self.files = vec![path.to_owned()];
    }
}

fn parse(text: &str, origin: &str) -> Result<Kubeconfig, ConfigError> {
    serde_yaml::from_str::<Option<Kubeconfig>>(text)
        .map(Option::unwrap_or_default)
        .map_err(|source| ConfigError::ParseKubeconfig {
            path: origin.to_owned(),
            source,
        })
}

fn resolve(path: &mut Option<String>, base: &Path) {
    if let Some(p) = path.as_mut() {
        if !p.is_empty() && Path::new(p.as_str()).is_relative() {
            *p = base.join(p.as_str()).display().to_string();
        }
    }
}

/// `$HOME` (or `%USERPROFILE%` on Windows).
pub(crate) fn home_dir() -> Option<PathBuf> {
    let var = if cfg!(windows) { "USERPROFILE" } else { "HOME" };
    std::env::var_os(var)
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"
apiVersion: v1
kind: Config
current-context: a
clusters:
- name: c1
  cluster:
    server: https://one:6443
    certificate-authority: ca.pem
users:
- name: u1
  user:
    tokenFile: tok
    client-certificate: /abs/cert.pem
contexts:
- name: a
  context: {cluster: c1, user: u1, namespace: ns1}
"#;

    const TWO: &str = r#"
current-context: b
clusters:
- name: c1
  cluster: {server: "https://ignored"}
- name: c2
  cluster: {server: "https://two"}
users:
contexts:
- name: b
  context: {cluster: c2}
"#;

    #[test]
    fn merge_keeps_first_definitions() {
        let merged = Kubeconfig::from_yaml(ONE)
            .unwrap()
            .merge(Kubeconfig::from_yaml(TWO).unwrap());
        assert_eq!(merged.current_context.as_deref(), Some("a"));
        assert_eq!(merged.clusters.len(), 2);
        let c1 = merged.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(c1.server.as_deref(), Some("https://one:6443"));
        assert_eq!(merged.contexts.len(), 2);
    }

    #[test]
    fn relative_paths_resolve_against_the_folder() {
        let mut config = Kubeconfig::from_yaml(ONE).unwrap();
        config.resolve_paths(Path::new("/etc/kube"));
        let cluster = config.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(
            cluster.certificate_authority.as_deref(),
            Some("/etc/kube/ca.pem")
        );
        let user = config.auth_infos[0].user.as_ref().unwrap();
        assert_eq!(user.token_file.as_deref(), Some("/etc/kube/tok"));
        assert_eq!(user.client_certificate.as_deref(), Some("/abs/cert.pem"));
    }

    #[test]
    fn empty_documents_are_empty_configs() {
        assert!(Kubeconfig::from_yaml("").unwrap().clusters.is_empty());
        assert!(Kubeconfig::from_yaml("# only a comment\n")
            .unwrap()
            .contexts
            .is_empty());
    }

    #[test]
    fn parse_errors_name_the_field() {
        let err = Kubeconfig::from_yaml(
            "clusters:\n- name: x\n  cluster:\n    insecure-skip-tls-verify: [1]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("insecure-skip-tls-verify"), "{err}");
        assert!(err.contains("<memory>"), "{err}");
    }
}
