//! The kubeconfig that points `kubectl`, client-go style clients and this
//! project's client at a running server.

use serde_json::json;

/// Credentials the kubeconfig carries.
pub(crate) struct KubeconfigUser<'a> {
    pub token: Option<&'a str>,
    pub client_cert_pem: Option<&'a str>,
    pub client_key_pem: Option<&'a str>,
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A kubeconfig (YAML) with one cluster, user and context, all named
/// `kcontrol-testserver`, and `default` as the context's namespace.
pub(crate) fn render(server: &str, ca_pem: Option<&str>, user: &KubeconfigUser<'_>) -> String {
    let mut cluster = json!({"server": server});
    if let Some(ca) = ca_pem {
        cluster["certificate-authority-data"] = json!(b64(ca));
    }
    let mut u = json!({});
    if let Some(t) = user.token {
        u["token"] = json!(t);
    }
    if let (Some(c), Some(k)) = (user.client_cert_pem, user.client_key_pem) {
        u["client-certificate-data"] = json!(b64(c));
        u["client-key-data"] = json!(b64(k));
    }
    let name = "kcontrol-testserver";
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": u}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {}
    });
    serde_yaml::to_string(&doc).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_a_loadable_kubeconfig() {
        let y = render(
            "https://127.0.0.1:1234",
            Some("PEM"),
            &KubeconfigUser {
                token: Some("t0k"),
                client_cert_pem: None,
                client_key_pem: None,
            },
        );
        let v: serde_json::Value = serde_yaml::from_str(&y).unwrap_or_default();
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:1234"
        );
        assert_eq!(
            v["clusters"][0]["cluster"]["certificate-authority-data"],
            b64("PEM")
        );
        assert_eq!(v["users"][0]["user"]["token"], "t0k");
        assert_eq!(v["current-context"], "kcontrol-testserver");
    }
}
