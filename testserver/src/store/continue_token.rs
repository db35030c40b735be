//! List continue tokens in kube-apiserver's format: URL-safe base64 (no
//! padding) of `{"v":"meta.k8s.io/v1","rv":<list rv>,"start":"<key>\u0000"}`,
//! the start key relative to the list's key prefix. An `rv` of -1 means
//! "continue at the latest version" (what an expired-token error hands out).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Wire {
    v: String,
    rv: i64,
    start: String,
}

/// A decoded continue token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContinueToken {
    /// The list's resourceVersion; `None` for "latest" (rv -1).
    pub rv: Option<u64>,
    /// First key (inclusive), relative to the list prefix.
    pub start: String,
}

impl ContinueToken {
    /// Encodes a token that continues after `last_key`.
    pub(crate) fn after(last_key: &str, rv: Option<u64>) -> String {
        let wire = Wire {
            v: "meta.k8s.io/v1".into(),
            rv: rv.map_or(-1, |r| i64::try_from(r).unwrap_or(i64::MAX)),
            start: format!("{last_key}\u{0}"),
        };
        let json = serde_json::to_vec(&wire).unwrap_or_default();
        URL_SAFE_NO_PAD.encode(json)
    }

    /// Decodes a token; the error text follows "continue key is not valid: ".
    pub(crate) fn decode(token: &str) -> Result<Self, String> {
        let raw = URL_SAFE_NO_PAD
            .decode(token.trim_end_matches('='))
            .map_err(|e| format!("illegal base64 data: {e}"))?;
        let wire: Wire = serde_json::from_slice(&raw).map_err(|e| e.to_string())?;
        if wire.v != "meta.k8s.io/v1" {
            return Err(format!(
                "server does not recognize this encoded key (version {:?})",
                wire.v
            ));
        }
        if wire.start.is_empty() || wire.start.contains("..") || wire.start.starts_with('/') {
            return Err("continue key is not valid".into());
        }
        let rv = match wire.rv {
            -1 => None,
            r if r > 0 => u64::try_from(r).ok(),
            _ => {
                return Err(
                    "incorrect encoded start resourceVersion (version meta.k8s.io/v1)".into(),
                )
            }
        };
        Ok(Self {
            rv,
            start: wire.start,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_like_kube() {
        let t = ContinueToken::after("default/foo", Some(42));
        let raw = URL_SAFE_NO_PAD.decode(&t).unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&raw),
            "{\"v\":\"meta.k8s.io/v1\",\"rv\":42,\"start\":\"default/foo\\u0000\"}"
        );
        assert_eq!(
            ContinueToken::decode(&t),
            Ok(ContinueToken {
                rv: Some(42),
                start: "default/foo\u{0}".into()
            })
        );
        let latest = ContinueToken::after("x", None);
        assert_eq!(ContinueToken::decode(&latest).map(|t| t.rv), Ok(None));
        assert!(ContinueToken::decode("!!!").is_err());
        assert!(ContinueToken::decode(
            &URL_SAFE_NO_PAD.encode("{\"v\":\"x\",\"rv\":1,\"start\":\"a\"}")
        )
        .is_err());
    }
}
