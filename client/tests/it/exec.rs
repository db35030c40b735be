//! Exec credential plugins: shell scripts written by the tests, configured
//! through a kubeconfig (relative command path, args, env,
//! provideClusterInfo). Tokens are cached until `expirationTimestamp`, the
//! plugin runs again after expiry and after a 401, client certificates from
//! a plugin work, and failures are explained without leaking the output.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::{Api, Client, Config, Error, KubeconfigOptions};
use support::{configmap, json, Pki, TestServer};

/// Tests here write executables and run them; serialising them keeps a
/// concurrent fork from holding a script open for writing (ETXTBSY).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const PLUGIN: &str = r#"#!/bin/sh
set -e
n=$(cat "$PLUGIN_DIR/count" 2>/dev/null || echo 0)
n=$((n+1))
echo "$n" > "$PLUGIN_DIR/count"
echo "$@" > "$PLUGIN_DIR/args"
printf '%s' "$KUBERNETES_EXEC_INFO" > "$PLUGIN_DIR/exec_info"
echo "$PLUGIN_SECRET" > "$PLUGIN_DIR/env_seen"
if [ "$1" = "--fail" ]; then
  echo "the identity provider said no" >&2
  echo '{"status":{"token":"leaked-stdout-token"}}'
  exit 3
fi
if [ "$1" = "--cert" ]; then
  cat "$PLUGIN_DIR/credential.json"
  exit 0
fi
expiry=$(cat "$PLUGIN_DIR/expiry")
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"exec-token-%s","expirationTimestamp":"%s"}}\n' "$n" "$expiry"
"#;

fn kubeconfig(
    dir: &Path,
    server: &str,
    ca_pem: Option<&str>,
    args: &[&str],
    command: &str,
) -> String {
    let ca = ca_pem
        .map(|pem| format!("    certificate-authority-data: {}\n", support::b64(pem)))
        .unwrap_or_default();
    let args = args
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"apiVersion: v1
kind: Config
current-context: c
clusters:
- name: k
  cluster:
    server: {server}
{ca}    extensions:
    - name: client.authentication.k8s.io/exec
      extension: {{audience: test-audience}}
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: {command}
      args: [{args}]
      env:
      - name: PLUGIN_DIR
        value: {dir}
      - name: PLUGIN_SECRET
        value: env-secret-value
      installHint: "install it with: apt-get install kcontrol-test-plugin"
      provideClusterInfo: true
      interactiveMode: Never
contexts:
- name: c
  context: {{cluster: k, user: u, namespace: ns1}}
"#,
        dir = dir.display()
    )
}

/// Writes the plugin under `dir/bin` and a kubeconfig naming it by a path
/// relative to the kubeconfig's folder; returns the resolved config.
fn setup(dir: &Path, server: &str, ca_pem: Option<&str>, args: &[&str]) -> Config {
    let script = support::write(dir, "bin/plugin.sh", PLUGIN);
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let kubeconfig_path = support::write(
        dir,
        "kube/config",
        &kubeconfig(dir, server, ca_pem, args, "../bin/plugin.sh"),
    );
    let options = KubeconfigOptions {
        path: Some(kubeconfig_path.into()),
        ..Default::default()
    };
    Config::from_kubeconfig(&options)
        .unwrap()
        .with_rate_limit(None)
        .with_http_credentials_allowed(true)
}

fn runs(dir: &Path) -> u32 {
    std::fs::read_to_string(dir.join("count"))
        .map(|c| c.trim().parse().unwrap())
        .unwrap_or(0)
}

async fn revoking_server(revoked: Arc<Mutex<HashSet<String>>>) -> TestServer {
    TestServer::http(move |req| {
        let auth = req.header("authorization").unwrap_or_default();
        if auth.starts_with("Bearer exec-token-") && !revoked.lock().unwrap().contains(&auth) {
            json(200, configmap("ns1", "a", "1"))
        } else {
            support::status(401, "Unauthorized", "Unauthorized")
        }
    })
    .await
}

async fn get(client: &Client) -> Result<ConfigMap, Error> {
    Api::<ConfigMap>::namespaced(client.clone(), "ns1")
        .get("a")
        .await
}

#[tokio::test]
async fn tokens_are_cached_until_expiry_and_refreshed_after_a_401() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let revoked = Arc::new(Mutex::new(HashSet::new()));
    let server = revoking_server(revoked.clone()).await;
    let config = setup(dir.path(), &server.url(), None, &["--mode", "token"]);
    assert!(!format!("{config:?}").contains("env-secret-value"));
    let client = Client::try_from(config).unwrap();

    // Already expired when issued: every request runs the plugin again.
    std::fs::write(dir.path().join("expiry"), "2000-01-01T00:00:00Z").unwrap();
    get(&client).await.unwrap();
    get(&client).await.unwrap();
    assert_eq!(runs(dir.path()), 2);

    // Valid for a long time: cached.
    std::fs::write(dir.path().join("expiry"), "2999-01-01T00:00:00Z").unwrap();
    get(&client).await.unwrap();
    assert_eq!(runs(dir.path()), 3);
    for _ in 0..3 {
        get(&client).await.unwrap();
    }
    assert_eq!(runs(dir.path()), 3, "a valid token is reused");

    // The server stops accepting the cached token: 401, run again, retry.
    revoked.lock().unwrap().insert("Bearer exec-token-3".into());
    get(&client).await.unwrap();
    assert_eq!(runs(dir.path()), 4);
    let seen: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r.header("authorization").unwrap())
        .collect();
    assert_eq!(seen.last().unwrap(), "Bearer exec-token-4");
    assert_eq!(seen[seen.len() - 2], "Bearer exec-token-3");

    // What the plugin was given.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("args"))
            .unwrap()
            .trim(),
        "--mode token"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("env_seen"))
            .unwrap()
            .trim(),
        "env-secret-value"
    );
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("exec_info")).unwrap())
            .unwrap();
    assert_eq!(info["apiVersion"], "client.authentication.k8s.io/v1");
    assert_eq!(info["kind"], "ExecCredential");
    assert_eq!(info["spec"]["interactive"], false);
    assert_eq!(info["spec"]["cluster"]["server"], server.url());
    assert_eq!(
        info["spec"]["cluster"]["config"]["audience"],
        "test-audience"
    );
}

#[tokio::test]
async fn concurrent_requests_run_the_plugin_once() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = revoking_server(Arc::new(Mutex::new(HashSet::new()))).await;
    let client = Client::try_from(setup(dir.path(), &server.url(), None, &[])).unwrap();
    std::fs::write(dir.path().join("expiry"), "2999-01-01T00:00:00Z").unwrap();
    let results = futures::future::join_all((0..8).map(|_| get(&client))).await;
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(runs(dir.path()), 1);
}

#[tokio::test]
async fn client_certificates_from_the_plugin() {
    let _serial = SERIAL.lock().await;
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let credential = serde_json::json!({
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"clientCertificateData": pki.client_cert_pem, "clientKeyData": pki.client_key_pem}
    });
    std::fs::write(dir.path().join("credential.json"), credential.to_string()).unwrap();
    let server = TestServer::https(pki.server_config(true), |req| {
        assert!(req.header("authorization").is_none());
        json(200, configmap("ns1", "a", "1"))
    })
    .await;
    let client = Client::try_from(setup(
        dir.path(),
        &server.url(),
        Some(&pki.ca_pem),
        &["--cert"],
    ))
    .unwrap();
    get(&client).await.unwrap();
    get(&client).await.unwrap();
    assert_eq!(runs(dir.path()), 1, "no expiry: cached");
}

#[tokio::test]
async fn a_failing_plugin_is_explained_without_its_output() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = revoking_server(Arc::new(Mutex::new(HashSet::new()))).await;
    let client = Client::try_from(setup(dir.path(), &server.url(), None, &["--fail"])).unwrap();
    let err = get(&client).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Auth(_)), "{text}");
    assert!(text.contains("exit status: 3"), "{text}");
    assert!(
        text.contains("the identity provider said no"),
        "stderr is shown: {text}"
    );
    assert!(
        !text.contains("leaked-stdout-token"),
        "stdout is not: {text}"
    );
    assert!(!format!("{err:?}").contains("leaked-stdout-token"));
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_missing_plugin_shows_the_install_hint() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let path = support::write(
        dir.path(),
        "config",
        &kubeconfig(
            dir.path(),
            "http://127.0.0.1:1",
            None,
            &[],
            "kcontrol-no-such-plugin",
        ),
    );
    let config = Config::from_kubeconfig(&KubeconfigOptions {
        path: Some(path.into()),
        ..Default::default()
    })
    .unwrap()
    .with_http_credentials_allowed(true);
    let err = get(&Client::try_from(config).unwrap()).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("kcontrol-no-such-plugin"), "{text}");
    assert!(
        text.contains("apt-get install kcontrol-test-plugin"),
        "{text}"
    );
}
