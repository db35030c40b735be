//! The client's safe defaults (issue 16, SECURITY.md): TLS verification on
//! unless `insecure-skip-tls-verify` (which warns), credentials never sent
//! over plain `http://` unless allowed, bounded response sizes with a typed
//! error, a warning for a shared private key file, and no secret in any
//! `Debug`, `Display` or log line (tracing output captured at TRACE level
//! while real requests run).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::os::unix::fs::PermissionsExt;

use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::{
    Api, Auth, AuthError, Client, Config, ConfigError, Error, ExecConfig, Kubeconfig,
    KubeconfigOptions, ListParams, SecretString, TlsErrorKind,
};
use support::logs::capture;
use support::{b64, configmap, json, status, write, Pki, TestServer};

fn ok(_: &support::Recorded) -> http::Response<support::Body> {
    json(200, configmap("ns1", "a", "1"))
}

async fn get(client: &Client) -> Result<ConfigMap, Error> {
    Api::<ConfigMap>::namespaced(client.clone(), "ns1")
        .get("a")
        .await
}

fn kubeconfig_for(server: &str, cluster_extra: &str, user: &str) -> Kubeconfig {
    Kubeconfig::from_yaml(&format!(
        "current-context: c\nclusters:\n- name: k\n  cluster:\n    server: \"{server}\"\n{cluster_extra}users:\n- name: u\n  user:\n{user}contexts:\n- name: c\n  context: {{cluster: k, user: u}}\n"
    ))
    .unwrap()
}

#[tokio::test]
async fn tls_is_verified_by_default() {
    let config = Config::new("https://127.0.0.1:1".parse().unwrap());
    assert!(!config.tls.insecure_skip_verify);
    let resolved = Config::from_custom_kubeconfig(
        &kubeconfig_for("https://k.example", "", "    token: t\n"),
        &KubeconfigOptions::default(),
    )
    .unwrap();
    assert!(!resolved.tls.insecure_skip_verify);

    // A server whose certificate no configured CA signed is refused.
    let pki = Pki::new();
    let server = TestServer::https(pki.server_config(false), ok).await;
    let client = Client::try_from(Config::new(server.url().parse().unwrap())).unwrap();
    match get(&client).await.unwrap_err() {
        Error::Tls(tls) => assert_eq!(tls.kind, TlsErrorKind::UnknownCa),
        other => panic!("expected a TLS verification failure, got {other}"),
    }
    assert!(
        server.requests().is_empty(),
        "no request crossed the failed handshake"
    );
}

#[tokio::test]
async fn insecure_skip_tls_verify_is_honoured_with_a_warning() {
    let pki = Pki::new_for(&["somewhere.else"]);
    let server = TestServer::https(pki.server_config(false), ok).await;
    let kubeconfig = kubeconfig_for(
        &server.url(),
        "    insecure-skip-tls-verify: true\n",
        "    username: alice\n",
    );
    let (logs, _guard) = capture();
    let config =
        Config::from_custom_kubeconfig(&kubeconfig, &KubeconfigOptions::default()).unwrap();
    assert!(config.tls.insecure_skip_verify);
    get(&Client::try_from(config).unwrap()).await.unwrap();
    let text = logs.text();
    let warning = text
        .lines()
        .find(|l| l.contains("insecure-skip-tls-verify"))
        .unwrap_or_else(|| panic!("no warning logged: {text}"));
    assert!(warning.contains("WARN"), "{warning}");
}

/// Every kind of credential, with `secret` in it; the exec plugin gets it
/// in its environment and prints it (not a valid credential).
fn every_credential(dir: &std::path::Path, secret: &str) -> Vec<Auth> {
    let token_file = write(dir, "token", secret);
    let exec: ExecConfig = serde_yaml::from_str(&format!(
        "apiVersion: client.authentication.k8s.io/v1\ncommand: /bin/sh\nargs: [-c, 'echo \"$TOKEN\"; echo \"$TOKEN\" >&2; exit 1']\nenv: [{{name: TOKEN, value: \"{secret}\"}}]\n"
    ))
    .unwrap();
    vec![
        Auth::Bearer(SecretString::from(secret)),
        Auth::Basic {
            username: "alice".into(),
            password: SecretString::from(secret),
        },
        Auth::TokenFile(token_file.into()),
        Auth::Exec(Box::new(exec)),
    ]
}

#[tokio::test]
async fn credentials_are_not_sent_over_plain_http_unless_allowed() {
    let server = TestServer::http(ok).await;
    let dir = tempfile::tempdir().unwrap();
    let http_url: http::Uri = server.url().parse().unwrap();
    for auth in every_credential(dir.path(), "SECRET-over-http") {
        let refused = Client::try_from(Config::new(http_url.clone()).with_auth(auth.clone()))
            .expect_err("credentials over http:// must be refused");
        let text = refused.to_string();
        assert!(
            matches!(&refused, Error::Config(ConfigError::Invalid { field, .. }) if field == "server"),
            "{refused:?}"
        );
        assert!(text.contains("clear text"), "{text}");
        assert!(text.contains("allow_http_credentials"), "{text}");
        assert!(!text.contains("SECRET"), "{text}");
        // https:// and the explicit opt-in are accepted.
        Client::try_from(
            Config::new("https://127.0.0.1:1".parse().unwrap()).with_auth(auth.clone()),
        )
        .unwrap();
        Client::try_from(
            Config::new(http_url.clone())
                .with_auth(auth)
                .with_http_credentials_allowed(true),
        )
        .unwrap();
    }
    assert!(server.requests().is_empty());

    // The same through a kubeconfig: refused, unless opted in.
    let kubeconfig = kubeconfig_for(&server.url(), "", "    token: SECRET-kc\n");
    let config =
        Config::from_custom_kubeconfig(&kubeconfig, &KubeconfigOptions::default()).unwrap();
    assert!(!config.allow_http_credentials);
    assert!(Client::try_from(config.clone()).is_err());
    let client = Client::try_from(config.with_http_credentials_allowed(true)).unwrap();
    get(&client).await.unwrap();
    assert_eq!(
        server.last().header("authorization").as_deref(),
        Some("Bearer SECRET-kc")
    );

    // No credentials: plain HTTP is fine.
    get(&Client::try_from(Config::new(http_url)).unwrap())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_response_over_the_size_limit_is_a_typed_error() {
    let items: Vec<_> = (0..100)
        .map(|i| configmap("ns1", &format!("cm-{i}"), "1"))
        .collect();
    let list = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMapList",
        "metadata": {"resourceVersion": "9"}, "items": items,
    });
    let size = serde_json::to_vec(&list).unwrap().len();
    let server = TestServer::http(move |_| json(200, list.clone())).await;
    let api = |limit: usize| {
        Api::<ConfigMap>::namespaced(
            Client::try_from(server.config().with_max_response_size(limit)).unwrap(),
            "ns1",
        )
    };
    let err = api(size - 1)
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::ResponseTooLarge { limit } if limit == size - 1),
        "{err:?}"
    );
    assert!(err.to_string().contains("maximum response size"), "{err}");
    assert_eq!(
        api(size)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        100
    );
    assert_eq!(
        Config::new("https://x".parse().unwrap()).max_response_size,
        kcontrol_client::DEFAULT_MAX_RESPONSE_SIZE
    );
}

#[tokio::test]
async fn an_error_body_is_read_to_a_bound_only() {
    let huge = "x".repeat(3 * 1024 * 1024);
    let server = TestServer::http(move |_| support::bytes(500, huge.clone())).await;
    let err = get(&Client::try_from(server.config()).unwrap())
        .await
        .unwrap_err();
    let api = err.api_error().unwrap_or_else(|| panic!("{err:?}"));
    assert_eq!(api.code(), 500);
    assert!(
        api.to_string().len() < 1024,
        "the message holds a bounded snippet at most"
    );
}

#[test]
fn a_shared_private_key_file_is_warned_about() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let cert = write(dir.path(), "client.crt", &pki.client_cert_pem);
    let key = write(dir.path(), "client.key", &pki.client_key_pem);
    let kubeconfig = kubeconfig_for(
        "https://k.example",
        "",
        &format!("    client-certificate: {cert}\n    client-key: {key}\n"),
    );
    let warnings_for = |mode: u32| {
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
        let (logs, _guard) = capture();
        let config =
            Config::from_custom_kubeconfig(&kubeconfig, &KubeconfigOptions::default()).unwrap();
        assert!(config.tls.client_identity.is_some());
        logs.text()
            .lines()
            .filter(|l| l.contains("WARN") && l.contains("private key file"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    for mode in [0o640, 0o604, 0o644] {
        let warnings = warnings_for(mode);
        assert_eq!(warnings.len(), 1, "mode {mode:o}: {warnings:?}");
        assert!(warnings[0].contains(&key), "{warnings:?}");
        assert!(warnings[0].contains(&format!("{mode:o}")), "{warnings:?}");
        assert!(!warnings[0].contains("PRIVATE KEY"), "{warnings:?}");
    }
    assert!(warnings_for(0o600).is_empty());
    assert!(warnings_for(0o400).is_empty());
}

const SECRET: &str = "Sx9-SECRET-VALUE-2f7";

/// Renders every configuration, credential and error type holding
/// [`SECRET`] (`Debug` and `Display`), runs requests with each credential
/// (and a 401 retry, a failing exec plugin, a bad token file) while every
/// crate logs at TRACE level, and searches all of it for the secret.
#[tokio::test]
async fn no_secret_in_debug_display_or_logs() {
    let (logs, _guard) = capture();
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let key_body = pki.client_key_pem.lines().nth(1).unwrap().to_owned();
    let mut rendered = String::new();
    macro_rules! render {
        ($what:expr) => {
            rendered.push_str(&format!("{:?}\n", $what))
        };
    }

    // Configurations and credentials.
    let server = TestServer::http(|req| {
        if req
            .header("authorization")
            .is_some_and(|a| a.ends_with("-ok"))
        {
            json(200, configmap("ns1", "a", "1"))
        } else {
            status(401, "Unauthorized", "Unauthorized")
        }
    })
    .await;
    for auth in every_credential(dir.path(), SECRET) {
        render!(&auth);
        let config = server.config().with_auth(auth);
        render!(&config);
        let client = Client::try_from(config).unwrap();
        render!(&client);
        // 401 (and for the token file a refresh and a retry): nothing logged
        // may hold the credential.
        if let Err(e) = get(&client).await {
            render!(&e);
            rendered.push_str(&e.to_string());
        }
    }
    let accepted = server
        .config()
        .with_auth(Auth::Bearer(SecretString::from(format!("{SECRET}-ok"))));
    let client = Client::try_from(accepted).unwrap();
    get(&client).await.unwrap();

    // A kubeconfig holding the secret in every secret field.
    let yaml = format!(
        r#"current-context: token
clusters:
- name: k
  cluster: {{server: "https://k.example"}}
users:
- name: token
  user: {{token: {SECRET}, client-certificate-data: {cert}, client-key-data: {key}}}
- name: basic
  user: {{username: alice, password: {SECRET}}}
- name: exec
  user: {{exec: {{apiVersion: client.authentication.k8s.io/v1, command: plugin, env: [{{name: API_KEY, value: {SECRET}}}]}}}}
- name: provider
  user: {{auth-provider: {{name: oidc, config: {{refresh-token: {SECRET}}}}}}}
contexts:
- {{name: token, context: {{cluster: k, user: token}}}}
- {{name: basic, context: {{cluster: k, user: basic}}}}
- {{name: exec, context: {{cluster: k, user: exec}}}}
- {{name: provider, context: {{cluster: k, user: provider}}}}
"#,
        cert = b64(&pki.client_cert_pem),
        key = b64(&pki.client_key_pem),
    );
    let kubeconfig = Kubeconfig::from_yaml(&yaml).unwrap();
    render!(&kubeconfig);
    for context in ["token", "basic", "exec", "provider"] {
        let options = KubeconfigOptions {
            context: Some(context.into()),
            ..Default::default()
        };
        match Config::from_custom_kubeconfig(&kubeconfig, &options) {
            Ok(config) => {
                render!(&config);
                render!(&config.tls);
                render!(&config.tls.client_identity);
            }
            Err(e) => {
                render!(&e);
                rendered.push_str(&e.to_string());
            }
        }
    }

    // Errors built from inputs that hold the secret.
    let mut errors: Vec<Error> = Vec::new();
    for (field, value) in [
        ("token", format!("[{SECRET}]")),
        ("token", format!("{{{SECRET}: 1}}")),
        ("client-key-data", format!("\"{SECRET}!\"")),
        ("client-key-data", b64(SECRET)),
        ("password", format!("{{a: {SECRET}}}")),
    ] {
        let text = format!(
            "current-context: c\nclusters: [{{name: k, cluster: {{server: \"https://k\"}}}}]\nusers: [{{name: u, user: {{username: x, client-certificate-data: {}, {field}: {value}}}}}]\ncontexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n",
            b64(&pki.client_cert_pem)
        );
        match Kubeconfig::from_yaml(&text) {
            Ok(kc) => match Config::from_custom_kubeconfig(&kc, &KubeconfigOptions::default()) {
                Ok(config) => render!(&config),
                Err(e) => errors.push(e.into()),
            },
            Err(e) => errors.push(e.into()),
        }
    }
    for server_url in [
        format!("https://alice:{SECRET}@k.example:6443"),
        format!("https://alice:{SECRET}@[::1"),
    ] {
        let kc = kubeconfig_for(&server_url, "", "    username: alice\n");
        errors.push(
            Config::from_custom_kubeconfig(&kc, &KubeconfigOptions::default())
                .unwrap_err()
                .into(),
        );
    }
    let with_userinfo = Config::new(
        format!("https://alice:{SECRET}@127.0.0.1:1")
            .parse()
            .unwrap(),
    );
    render!(&with_userinfo);
    errors.push(Client::try_from(with_userinfo).unwrap_err());
    let bad_token_file = write(dir.path(), "bad-token", &format!("{SECRET}\u{7}\n"));
    let client = Client::try_from(
        server
            .config()
            .with_auth(Auth::TokenFile(bad_token_file.into())),
    )
    .unwrap();
    errors.push(get(&client).await.unwrap_err());
    errors.push(
        Client::try_from(
            Config::new("https://k".parse().unwrap())
                .with_auth(Auth::Bearer(SecretString::from(format!("{SECRET}\n\u{0}")))),
        )
        .unwrap_err(),
    );
    errors.push(Error::Auth(AuthError::InvalidHeader("bearer token")));
    for e in &errors {
        render!(e);
        rendered.push_str(&format!("{e}\n"));
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            rendered.push_str(&format!("{s} {s:?}\n"));
            source = s.source();
        }
    }

    let logged = logs.text();
    assert!(
        logged.contains("API request"),
        "TRACE logging is captured: {logged}"
    );
    assert!(rendered.contains("alice"), "non-secrets are shown");
    for (what, text) in [("Debug/Display", &rendered), ("log", &logged)] {
        for secret in [SECRET, &key_body] {
            if let Some(at) = text.find(secret) {
                let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
                let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
                panic!(
                    "the secret leaked into {what} output: {}",
                    &text[start..end]
                );
            }
        }
    }
}
