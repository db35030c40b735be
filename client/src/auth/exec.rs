//! Exec credential plugins (`client.authentication.k8s.io/v1` and
//! `v1beta1`): run the command with `KUBERNETES_EXEC_INFO`, read an
//! `ExecCredential` from its stdout, cache the token (or client certificate)
//! until `expirationTimestamp`, and run it again after a 401.
//!
//! The plugin's stdout is secret: it never appears in errors, logs or `Debug`.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use http::HeaderValue;
use k8s_openapi::jiff::Timestamp;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::{bearer_header, AuthError};
use crate::config::ClientIdentity;
use crate::serde_util::null_as_empty;
use crate::tls::ClientCertSlot;

/// The API versions of `ExecCredential` this client speaks.
const SUPPORTED_VERSIONS: [&str; 2] = [
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
];

/// How much of a failing plugin's stderr an error keeps.
const STDERR_LIMIT: usize = 1024;

/// A kubeconfig `exec` section.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecConfig {
    /// `client.authentication.k8s.io/v1` or `.../v1beta1`.
    #[serde(default)]
    pub api_version: String,
    /// The command: a name looked up in `PATH`, or a path (relative paths
    /// resolve against the kubeconfig's folder).
    pub command: String,
    /// Arguments.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub args: Vec<String>,
    /// Extra environment variables (values are treated as secrets).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub env: Vec<ExecEnvVar>,
    /// Shown when the command cannot be found.
    #[serde(default)]
    pub install_hint: Option<String>,
    /// Pass the cluster (server, CA, extension config) in `KUBERNETES_EXEC_INFO`.
    #[serde(default)]
    pub provide_cluster_info: bool,
    /// Whether the plugin may prompt. kcontrol has no terminal to offer:
    /// `Always` is refused.
    #[serde(default)]
    pub interactive_mode: Option<ExecInteractiveMode>,
    /// The cluster description passed when `provide_cluster_info` is set
    /// (filled in when a kubeconfig context is resolved).
    #[serde(skip)]
    pub cluster: Option<serde_json::Value>,
}

/// One environment variable for an exec plugin. `Debug` hides the value.
#[derive(Clone, Debug, Deserialize)]
pub struct ExecEnvVar {
    /// Variable name.
    pub name: String,
    /// Variable value.
    pub value: SecretString,
}

/// `interactiveMode` of an exec plugin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum ExecInteractiveMode {
    /// Never prompts.
    Never,
    /// May prompt if a terminal is available (kcontrol offers none).
    IfAvailable,
    /// Must prompt (refused).
    Always,
}

/// The `ExecCredential` a plugin prints.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecCredential {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    status: Option<ExecCredentialStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecCredentialStatus {
    #[serde(default)]
    expiration_timestamp: Option<String>,
    #[serde(default)]
    token: Option<SecretString>,
    #[serde(default)]
    client_certificate_data: Option<String>,
    #[serde(default)]
    client_key_data: Option<SecretString>,
}

/// Credentials from one plugin run.
struct Credentials {
    header: Option<HeaderValue>,
    expires: Option<SystemTime>,
}

impl Credentials {
    fn is_valid(&self) -> bool {
        self.expires.is_none_or(|at| SystemTime::now() < at)
    }
}

/// A timestamp as a `SystemTime` (times before 1970 clamp to the epoch).
fn system_time(at: Timestamp) -> SystemTime {
    let secs = u64::try_from(at.as_second()).unwrap_or(0);
    let nanos = u32::try_from(at.subsec_nanosecond()).unwrap_or(0);
    UNIX_EPOCH + Duration::new(secs, nanos)
}

pub(crate) struct ExecAuthenticator {
    config: ExecConfig,
    cached: tokio::sync::Mutex<Option<Credentials>>,
    cert_slot: Arc<ClientCertSlot>,
}

impl ExecAuthenticator {
    pub(crate) fn new(config: ExecConfig, cert_slot: Arc<ClientCertSlot>) -> Self {
        Self {
            config,
            cached: tokio::sync::Mutex::new(None),
            cert_slot,
        }
    }

    fn error(&self, message: impl Into<String>) -> AuthError {
        AuthError::Exec {
            command: self.config.command.clone(),
            message: message.into(),
        }
    }

    /// The cached token if still valid, else runs the plugin (one run at a
    /// time: concurrent callers wait for it).
    pub(crate) async fn authorization(&self) -> Result<Option<HeaderValue>, AuthError> {
        let mut cached = self.cached.lock().await;
        if let Some(creds) = cached.as_ref().filter(|c| c.is_valid()) {
            return Ok(creds.header.clone());
        }
        let creds = self.run().await?;
        let header = creds.header.clone();
        *cached = Some(creds);
        Ok(header)
    }

    /// After a 401: drops the cached credentials unless another request
    /// already replaced the ones that failed.
    pub(crate) async fn invalidate(&self, used: Option<&HeaderValue>) -> bool {
        let mut cached = self.cached.lock().await;
        if cached.as_ref().is_some_and(|c| c.header.as_ref() == used) {
            *cached = None;
        }
        true
    }

    fn exec_info(&self) -> String {
        let mut spec = serde_json::json!({ "interactive": false });
        if self.config.provide_cluster_info {
            if let (Some(cluster), Some(map)) = (&self.config.cluster, spec.as_object_mut()) {
                map.insert("cluster".to_owned(), cluster.clone());
            }
        }
        serde_json::json!({
            "apiVersion": self.config.api_version,
            "kind": "ExecCredential",
            "spec": spec,
        })
        .to_string()
    }

    async fn run(&self) -> Result<Credentials, AuthError> {
        if !SUPPORTED_VERSIONS.contains(&self.config.api_version.as_str()) {
            return Err(self.error(format!(
                "apiVersion {:?} is not supported (use one of {})",
                self.config.api_version,
                SUPPORTED_VERSIONS.join(", ")
            )));
        }
        if self.config.interactive_mode == Some(ExecInteractiveMode::Always) {
            return Err(self.error(
                "interactiveMode Always needs a terminal, which kcontrol does not provide",
            ));
        }
        let mut command = tokio::process::Command::new(&self.config.command);
        command
            .args(&self.config.args)
            .envs(
                self.config
                    .env
                    .iter()
                    .map(|v| (&v.name, v.value.expose_secret())),
            )
            .env("KUBERNETES_EXEC_INFO", self.exec_info())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        tracing::debug!(command = %self.config.command, "running exec credential plugin");
        let output = command.output().await.map_err(|e| self.spawn_error(&e))?;
        if !output.status.success() {
            let end = output.stderr.len().min(STDERR_LIMIT);
            let stderr = String::from_utf8_lossy(output.stderr.get(..end).unwrap_or_default());
            return Err(self.error(format!(
                "exited with {}; stderr: {}",
                output.status,
                self.redact(stderr.trim(), &output.stdout)
            )));
        }
        self.parse(&output.stdout)
    }

    /// The plugin's stderr for an error message, with every secret the
    /// client knows of replaced by `[REDACTED]`: the values of the
    /// environment given to the plugin, and whatever it printed on stdout
    /// (which may hold a token even when the plugin fails).
    fn redact(&self, stderr: &str, stdout: &[u8]) -> String {
        let stdout = String::from_utf8_lossy(stdout);
        let secrets = self
            .config
            .env
            .iter()
            .map(|v| v.value.expose_secret())
            .chain(stdout.lines().map(str::trim))
            .filter(|secret| !secret.is_empty());
        let mut text = stderr.to_owned();
        for secret in secrets {
            if text.contains(secret) {
                text = text.replace(secret, "[REDACTED]");
            }
        }
        text
    }

    fn spawn_error(&self, e: &std::io::Error) -> AuthError {
        let mut message = format!("cannot run it: {e}");
        if e.kind() == std::io::ErrorKind::NotFound {
            if let Some(hint) = &self.config.install_hint {
                message.push_str("\n\n");
                message.push_str(hint.trim());
            }
        }
        self.error(message)
    }

    /// Parses the plugin's stdout. Errors never quote it: serde messages can
    /// echo values, so only the position and category are kept.
    fn parse(&self, stdout: &[u8]) -> Result<Credentials, AuthError> {
        let credential: ExecCredential = serde_json::from_slice(stdout).map_err(|e| {
            self.error(format!(
                "its output is not a valid ExecCredential ({:?} error at line {} column {})",
                e.classify(),
                e.line(),
                e.column()
            ))
        })?;
        if credential.api_version.as_deref() != Some(self.config.api_version.as_str()) {
            return Err(self.error(format!(
                "it returned apiVersion {:?}, the kubeconfig asks for {:?}",
                credential.api_version.unwrap_or_default(),
                self.config.api_version
            )));
        }
        if credential
            .kind
            .as_deref()
            .is_some_and(|k| k != "ExecCredential")
        {
            return Err(self.error("its output is not of kind ExecCredential"));
        }
        let status = credential
            .status
            .ok_or_else(|| self.error("its ExecCredential has no status"))?;
        let expires = match &status.expiration_timestamp {
            Some(text) => Some(system_time(text.parse::<Timestamp>().map_err(|_| {
                self.error("its expirationTimestamp is not an RFC 3339 time")
            })?)),
            None => None,
        };
        let header = status
            .token
            .as_ref()
            .filter(|t| !t.expose_secret().is_empty())
            .map(|t| bearer_header(t.expose_secret()))
            .transpose()?;
        let has_cert = self.install_certificate(&status)?;
        if header.is_none() && !has_cert {
            return Err(self
                .error("its ExecCredential has neither a token nor a client certificate and key"));
        }
        Ok(Credentials { header, expires })
    }

    /// Installs a client certificate from the credential, if it has one.
    fn install_certificate(&self, status: &ExecCredentialStatus) -> Result<bool, AuthError> {
        let (cert, key) = match (&status.client_certificate_data, &status.client_key_data) {
            (None, None) => return Ok(false),
            (Some(cert), Some(key)) => (cert, key),
            _ => return Err(self.error("its ExecCredential has a client certificate without a key, or a key without a certificate")),
        };
        let identity = ClientIdentity::from_pem(cert.as_bytes(), key.expose_secret().as_bytes())
            .map_err(|e| self.error(format!("its client certificate is unusable: {e}")))?;
        self.cert_slot
            .set(&identity)
            .map_err(|e| self.error(format!("its client certificate is unusable: {e}")))?;
        Ok(true)
    }
}

/// Base64 of a PEM bundle, for the `certificate-authority-data` field of
/// `KUBERNETES_EXEC_INFO`.
pub(crate) fn base64_pem(pem: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(pem)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authenticator(api_version: &str) -> ExecAuthenticator {
        let config = ExecConfig {
            api_version: api_version.to_owned(),
            command: "unused".to_owned(),
            ..ExecConfig::default()
        };
        ExecAuthenticator::new(config, Arc::new(ClientCertSlot::new()))
    }

    #[test]
    fn parses_tokens_and_expiry() {
        let auth = authenticator("client.authentication.k8s.io/v1");
        let creds = auth
            .parse(br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t0k","expirationTimestamp":"2000-01-01T00:00:00Z"}}"#)
            .unwrap();
        assert_eq!(creds.header.as_ref().unwrap(), "Bearer t0k");
        assert!(!creds.is_valid());
    }

    #[test]
    fn stderr_is_redacted_of_known_secrets() {
        let config: ExecConfig = serde_json::from_value(serde_json::json!({
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "unused",
            "env": [{"name": "KEY", "value": "env-sekrit"}, {"name": "EMPTY", "value": ""}],
        }))
        .unwrap();
        let auth = ExecAuthenticator::new(config, Arc::new(ClientCertSlot::new()));
        let text = auth.redact(
            "bad key env-sekrit; printed out-sekrit; plain words",
            b"out-sekrit\n\n",
        );
        assert_eq!(text, "bad key [REDACTED]; printed [REDACTED]; plain words");
    }

    #[test]
    fn errors_never_quote_the_output() {
        let auth = authenticator("client.authentication.k8s.io/v1");
        for out in [
            &br#"{"apiVersion":"client.authentication.k8s.io/v1","status":{"token":123456789}}"#[..],
            br#"{"apiVersion":"client.authentication.k8s.io/v1","status":{"token":"sekrit","expirationTimestamp":"sekrit-time"}}"#,
            br#"not json sekrit"#,
            br#"{"apiVersion":"client.authentication.k8s.io/v1beta1","status":{"token":"sekrit"}}"#,
        ] {
            let err = auth.parse(out).err().unwrap().to_string();
            assert!(!err.contains("sekrit") && !err.contains("123456789"), "{err}");
        }
    }

    #[test]
    fn exec_info_carries_cluster_only_when_asked() {
        let mut auth = authenticator("client.authentication.k8s.io/v1beta1");
        auth.config.cluster = Some(serde_json::json!({"server": "https://x"}));
        assert!(!auth.exec_info().contains("https://x"));
        auth.config.provide_cluster_info = true;
        let info: serde_json::Value = serde_json::from_str(&auth.exec_info()).unwrap();
        assert_eq!(info["spec"]["cluster"]["server"], "https://x");
        assert_eq!(info["spec"]["interactive"], false);
    }
}
