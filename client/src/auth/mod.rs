//! Credentials: the [`Auth`] a [`Config`](crate::Config) carries, and the
//! authenticator a [`Client`](crate::Client) runs before each request
//! (static headers, a token file re-read when it rotates, an exec plugin
//! whose output is cached until it expires).

mod exec;
mod token_file;

use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine;
use http::HeaderValue;
use secrecy::{ExposeSecret, SecretString};

pub(crate) use exec::base64_pem;
pub use exec::{ExecConfig, ExecEnvVar, ExecInteractiveMode};

use crate::tls::ClientCertSlot;
use exec::ExecAuthenticator;
use token_file::TokenFile;

/// How the client authenticates. `Debug` never shows a secret.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum Auth {
    /// No credentials beyond a client certificate, if the TLS config has one.
    #[default]
    None,
    /// HTTP basic auth.
    Basic {
        /// User name.
        username: String,
        /// Password.
        password: SecretString,
    },
    /// A fixed bearer token.
    Bearer(SecretString),
    /// A bearer token read from a file, re-read when the file changes (and at
    /// least every minute), as projected service-account tokens rotate.
    TokenFile(PathBuf),
    /// An exec credential plugin (`client.authentication.k8s.io/v1` or `v1beta1`).
    Exec(Box<ExecConfig>),
}

/// Why credentials could not be obtained. Never contains a secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The token file could not be read.
    #[error("cannot read token file {path}: {source}")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The token file is empty.
    #[error("token file {0} is empty")]
    EmptyTokenFile(PathBuf),
    /// A token or password holds characters not allowed in an HTTP header.
    #[error("the {0} contains characters not allowed in an HTTP header")]
    InvalidHeader(&'static str),
    /// The exec plugin failed or printed something unusable.
    #[error("exec plugin {command}: {message}")]
    Exec {
        /// The command.
        command: String,
        /// What went wrong (never the plugin's output).
        message: String,
    },
}

/// Turns a token into an `Authorization: Bearer` header marked sensitive.
pub(crate) fn bearer_header(token: &str) -> Result<HeaderValue, AuthError> {
    let mut value = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
        .map_err(|_| AuthError::InvalidHeader("bearer token"))?;
    value.set_sensitive(true);
    Ok(value)
}

fn basic_header(username: &str, password: &SecretString) -> Result<HeaderValue, AuthError> {
    let raw = format!("{username}:{}", password.expose_secret());
    let encoded = base64::engine::general_purpose::STANDARD.encode(raw);
    let mut value = HeaderValue::from_str(&format!("Basic {encoded}"))
        .map_err(|_| AuthError::InvalidHeader("basic auth credentials"))?;
    value.set_sensitive(true);
    Ok(value)
}

/// What a [`Client`](crate::Client) runs to get the `Authorization` header.
pub(crate) enum Authenticator {
    None,
    Static(HeaderValue),
    TokenFile(TokenFile),
    Exec(ExecAuthenticator),
}

impl Authenticator {
    /// Prepares the authenticator; exec plugins that return client
    /// certificates install them into `cert_slot`.
    pub(crate) fn new(auth: &Auth, cert_slot: Arc<ClientCertSlot>) -> Result<Self, AuthError> {
        Ok(match auth {
            Auth::None => Self::None,
            Auth::Basic { username, password } => Self::Static(basic_header(username, password)?),
            Auth::Bearer(token) => Self::Static(bearer_header(token.expose_secret())?),
            Auth::TokenFile(path) => Self::TokenFile(TokenFile::new(path.clone())),
            Auth::Exec(config) => Self::Exec(ExecAuthenticator::new((**config).clone(), cert_slot)),
        })
    }

    /// The `Authorization` header for the next request, if any.
    pub(crate) async fn authorization(&self) -> Result<Option<HeaderValue>, AuthError> {
        match self {
            Self::None => Ok(None),
            Self::Static(value) => Ok(Some(value.clone())),
            Self::TokenFile(file) => file.header().map(Some),
            Self::Exec(exec) => exec.authorization().await,
        }
    }

    /// Called after a 401 answer to a request sent with `used`: forgets
    /// cached credentials and says whether a retry may succeed (new
    /// credentials can be had).
    pub(crate) async fn refresh_after_unauthorized(&self, used: Option<&HeaderValue>) -> bool {
        match self {
            Self::None | Self::Static(_) => false,
            Self::TokenFile(file) => file.changed_since(used),
            Self::Exec(exec) => exec.invalidate(used).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_secrets() {
        let auth = Auth::Basic {
            username: "alice".into(),
            password: SecretString::from("hunter2"),
        };
        let text = format!("{auth:?}");
        assert!(text.contains("alice"));
        assert!(!text.contains("hunter2"));
        let text = format!("{:?}", Auth::Bearer(SecretString::from("tok-123")));
        assert!(!text.contains("tok-123"));
    }

    #[test]
    fn headers_are_sensitive() {
        let h = bearer_header("abc\n").unwrap();
        assert_eq!(h.to_str().unwrap(), "Bearer abc");
        assert!(h.is_sensitive());
        let b = basic_header("a", &SecretString::from("b")).unwrap();
        assert_eq!(b.to_str().unwrap(), "Basic YTpi");
        assert!(bearer_header("bad\u{7f}token").is_err());
    }
}
