//! Kubeconfig loading: kubectl-style merging of several files, context,
//! cluster and user overrides, relative paths, every credential kind, errors
//! that name the file and the field, secrets kept out of `Debug`, and
//! proptest fuzzing of the parser.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::PathBuf;

use k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_client::{
    Api, Auth, Client, Config, ConfigError, ExposeSecret, Kubeconfig, KubeconfigOptions,
};
use proptest::prelude::*;
use support::{b64, configmap, json, write, Pki, TestServer};

fn options(path: &str) -> KubeconfigOptions {
    KubeconfigOptions {
        path: Some(path.into()),
        ..Default::default()
    }
}

const FIRST: &str = r#"
apiVersion: v1
kind: Config
current-context: first-ctx
clusters:
- name: shared
  cluster: {server: "https://first.example:6443", insecure-skip-tls-verify: true}
users:
- name: shared-user
  user: {token: first-token}
contexts:
- name: first-ctx
  context: {cluster: shared, user: shared-user, namespace: first-ns}
"#;

const SECOND: &str = r#"
current-context: second-ctx
clusters:
- name: shared
  cluster: {server: "https://second.example:6443"}
- name: only-second
  cluster: {server: "https://only-second.example"}
users:
- name: shared-user
  user: {token: second-token}
- name: other-user
  user: {username: bob, password: pw}
contexts:
- name: first-ctx
  context: {cluster: only-second, user: other-user}
- name: second-ctx
  context: {cluster: only-second, user: other-user, namespace: second-ns}
"#;

#[test]
fn merging_keeps_the_first_definition_of_each_name() {
    let dir = tempfile::tempdir().unwrap();
    let first = write(dir.path(), "a/config", FIRST);
    let second = write(dir.path(), "b/config", SECOND);
    let missing = dir.path().join("missing/config");
    let merged =
        Kubeconfig::read_merged(vec![missing, first.clone().into(), second.clone().into()])
            .unwrap();
    assert_eq!(
        merged.files,
        vec![PathBuf::from(&first), PathBuf::from(&second)]
    );

    // current-context and the shared names come from the first file
    let config = Config::from_custom_kubeconfig(&merged, &KubeconfigOptions::default()).unwrap();
    assert_eq!(
        config.cluster_url.to_string(),
        "https://first.example:6443/"
    );
    assert_eq!(config.default_namespace, "first-ns");
    assert!(matches!(&config.auth, Auth::Bearer(t) if t.expose_secret() == "first-token"));

    // names only the second file has are there too
    let ctx = KubeconfigOptions {
        context: Some("second-ctx".into()),
        ..Default::default()
    };
    let config = Config::from_custom_kubeconfig(&merged, &ctx).unwrap();
    assert_eq!(config.cluster_url.host(), Some("only-second.example"));
    assert_eq!(config.default_namespace, "second-ns");
    assert!(matches!(&config.auth, Auth::Basic { username, .. } if username == "bob"));

    // the other order gives the other answers
    let reversed = Kubeconfig::read_merged(vec![second.into(), first.into()]).unwrap();
    let config = Config::from_custom_kubeconfig(&reversed, &KubeconfigOptions::default()).unwrap();
    assert_eq!(config.default_namespace, "second-ns");
}

#[test]
fn no_existing_file_is_a_no_kubeconfig_error() {
    let err = Kubeconfig::read_merged(vec![PathBuf::from("/nonexistent/a"), PathBuf::from("")])
        .unwrap_err();
    assert!(matches!(err, ConfigError::NoKubeconfig(_)), "{err}");
    assert!(err.to_string().contains("/nonexistent/a"), "{err}");
}

#[test]
fn context_cluster_and_user_overrides() {
    let merged = Kubeconfig::from_yaml(FIRST)
        .unwrap()
        .merge(Kubeconfig::from_yaml(SECOND).unwrap());
    let options = KubeconfigOptions {
        context: Some("first-ctx".into()),
        cluster: Some("only-second".into()),
        user: Some("other-user".into()),
        ..Default::default()
    };
    let config = Config::from_custom_kubeconfig(&merged, &options).unwrap();
    assert_eq!(config.cluster_url.host(), Some("only-second.example"));
    assert!(matches!(config.auth, Auth::Basic { .. }));
    assert_eq!(
        config.default_namespace, "first-ns",
        "the namespace stays the context's"
    );
    assert!(!config.tls.insecure_skip_verify);
}

#[test]
fn missing_references_name_what_is_missing() {
    let kc = Kubeconfig::from_yaml(FIRST).unwrap();
    let err = Config::from_custom_kubeconfig(
        &kc,
        &KubeconfigOptions {
            context: Some("nope".into()),
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("contexts[nope]"), "{err}");
    let err = Config::from_custom_kubeconfig(
        &kc,
        &KubeconfigOptions {
            cluster: Some("gone".into()),
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("clusters[gone]") && err.contains("first-ctx"),
        "{err}"
    );
    let err = Config::from_custom_kubeconfig(
        &kc,
        &KubeconfigOptions {
            user: Some("ghost".into()),
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("users[ghost]"), "{err}");
    let err = Config::from_custom_kubeconfig(&Kubeconfig::default(), &KubeconfigOptions::default())
        .unwrap_err();
    assert!(err.to_string().contains("current-context"), "{err}");
}

#[test]
fn malformed_files_name_the_file_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "config",
        "clusters:\n- name: c\n  cluster:\n    server: https://x\n    insecure-skip-tls-verify: {nested: map}\n",
    );
    let err = Config::from_kubeconfig(&options(&path)).unwrap_err();
    assert!(matches!(err, ConfigError::ParseKubeconfig { .. }));
    let text = err.to_string();
    assert!(text.contains(&path), "{text}");
    assert!(
        text.contains("clusters[0].cluster.insecure-skip-tls-verify"),
        "{text}"
    );
    assert!(text.contains("line 5"), "{text}");

    let path = write(
        dir.path(),
        "config2",
        "users:\n- name: u\n  user:\n    token: [1, 2]\n",
    );
    let text = Config::from_kubeconfig(&options(&path))
        .unwrap_err()
        .to_string();
    assert!(text.contains("users[0].user.token"), "{text}");

    let path = write(dir.path(), "config3", "clusters: [\n");
    let text = Config::from_kubeconfig(&options(&path))
        .unwrap_err()
        .to_string();
    assert!(text.contains(&path), "{text}");
}

#[test]
fn bad_values_name_the_field_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let base = "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\nusers:\n- name: u\n  user: {}\n";
    for (cluster, expected) in [
        (
            "{server: \"https://x\", certificate-authority-data: \"not base64!\"}",
            "clusters[k].certificate-authority-data",
        ),
        (
            "{server: \"https://x\", certificate-authority: missing-ca.pem}",
            "clusters[k].certificate-authority",
        ),
        (
            "{server: \"https://x\", certificate-authority-data: \"aGVsbG8=\"}",
            "clusters[k].certificate-authority",
        ),
        ("{}", "clusters[k].server"),
        ("{server: \"ftp://x\"}", "clusters[k].server"),
        (
            "{server: \"https://x\", proxy-url: \"http://proxy\"}",
            "clusters[k].proxy-url",
        ),
    ] {
        let path = write(
            dir.path(),
            "config",
            &format!("{base}clusters:\n- name: k\n  cluster: {cluster}\n"),
        );
        let text = Config::from_kubeconfig(&options(&path))
            .unwrap_err()
            .to_string();
        assert!(text.contains(expected), "{cluster}: {text}");
        assert!(text.contains(&path), "{cluster}: {text}");
    }
    let with_user = |user: &str| {
        format!(
            "current-context: c\ncontexts:\n- name: c\n  context: {{cluster: k, user: u}}\nclusters:\n- name: k\n  cluster: {{server: \"https://x\"}}\nusers:\n- name: u\n  user: {user}\n"
        )
    };
    for (user, expected) in [
        (
            "{client-certificate-data: \"aGVsbG8=\"}",
            "users[u].client-key",
        ),
        (
            "{client-certificate-data: \"aGVsbG8=\", client-key-data: \"aGVsbG8=\"}",
            "users[u].client-certificate",
        ),
        ("{token: t, username: a, password: b}", "users[u]"),
        ("{tokenFile: no-such-token-file}", "users[u].tokenFile"),
        ("{auth-provider: {name: gcp}}", "users[u].auth-provider"),
        ("{as: admin, token: t}", "users[u].as"),
        ("{exec: {command: x}}", "users[u].exec.apiVersion"),
    ] {
        let path = write(dir.path(), "config", &with_user(user));
        let text = Config::from_kubeconfig(&options(&path))
            .unwrap_err()
            .to_string();
        assert!(text.contains(expected), "{user}: {text}");
    }
}

#[tokio::test]
async fn relative_paths_resolve_against_the_kubeconfig_folder() {
    let pki = Pki::new();
    let server = TestServer::https(pki.server_config(true), |req| {
        assert_eq!(
            req.header("authorization").as_deref(),
            Some("Bearer from-a-file")
        );
        json(200, configmap("team", "a", "1"))
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "kube/certs/ca.pem", &pki.ca_pem);
    write(dir.path(), "kube/certs/client.crt", &pki.client_cert_pem);
    write(dir.path(), "kube/certs/client.key", &pki.client_key_pem);
    write(dir.path(), "kube/token", "from-a-file\n");
    let path = write(
        dir.path(),
        "kube/config",
        &format!(
            r#"current-context: c
clusters:
- name: k
  cluster: {{server: "{}", certificate-authority: certs/ca.pem}}
users:
- name: u
  user: {{client-certificate: certs/client.crt, client-key: ./certs/client.key, tokenFile: token}}
contexts:
- name: c
  context: {{cluster: k, user: u, namespace: team}}
"#,
            server.url()
        ),
    );
    // run from another folder: relative to the file, not to the process
    let config = Config::from_kubeconfig(&options(&path)).unwrap();
    assert!(matches!(&config.auth, Auth::TokenFile(p) if p == &dir.path().join("kube/token")));
    let api: Api<ConfigMap> = Api::default_namespaced(Client::try_from(config).unwrap());
    api.get("a").await.unwrap();
}

#[tokio::test]
async fn inline_data_fields_work_end_to_end() {
    let pki = Pki::new();
    let server = TestServer::https(pki.server_config(true), |_| {
        json(200, configmap("ns", "a", "1"))
    })
    .await;
    let yaml = format!(
        r#"current-context: c
clusters:
- name: k
  cluster:
    server: "{}"
    certificate-authority-data: {}
    tls-server-name: localhost
users:
- name: u
  user:
    client-certificate-data: {}
    client-key-data: {}
contexts:
- name: c
  context: {{cluster: k, user: u}}
"#,
        server.url(),
        b64(&pki.ca_pem),
        b64(&pki.client_cert_pem),
        b64(&pki.client_key_pem)
    );
    let config = Config::from_custom_kubeconfig(
        &Kubeconfig::from_yaml(&yaml).unwrap(),
        &KubeconfigOptions::default(),
    )
    .unwrap();
    assert_eq!(config.default_namespace, "default");
    assert_eq!(config.tls.server_name.as_deref(), Some("localhost"));
    Api::<ConfigMap>::namespaced(Client::try_from(config).unwrap(), "ns")
        .get("a")
        .await
        .unwrap();
}

#[test]
fn debug_output_never_shows_a_secret() {
    let pki = Pki::new();
    let key_data = b64(&pki.client_key_pem);
    let key_body = pki.client_key_pem.lines().nth(1).unwrap().to_owned();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "token-file", "file-token-SECRET-1");
    let yaml = format!(
        r#"current-context: token
clusters:
- name: k
  cluster: {{server: "https://k.example"}}
users:
- name: token
  user: {{token: bearer-SECRET-2, client-certificate-data: {cert}, client-key-data: {key_data}}}
- name: basic
  user: {{username: alice, password: password-SECRET-3}}
- name: exec
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: plugin
      env: [{{name: API_KEY, value: env-SECRET-4}}]
- name: file
  user: {{tokenFile: token-file}}
- name: provider
  user: {{auth-provider: {{name: oidc, config: {{refresh-token: provider-SECRET-5, idp-issuer-url: "https://idp"}}}}}}
contexts:
- {{name: token, context: {{cluster: k, user: token}}}}
- {{name: basic, context: {{cluster: k, user: basic}}}}
- {{name: exec, context: {{cluster: k, user: exec}}}}
- {{name: file, context: {{cluster: k, user: file}}}}
"#,
        cert = b64(&pki.client_cert_pem),
    );
    let path = write(dir.path(), "config", &yaml);
    let kubeconfig = Kubeconfig::read_from(path.as_ref()).unwrap();
    let mut debug = format!("{kubeconfig:?}");
    for context in ["token", "basic", "exec", "file"] {
        let options = KubeconfigOptions {
            context: Some(context.into()),
            ..Default::default()
        };
        let config = Config::from_custom_kubeconfig(&kubeconfig, &options).unwrap();
        debug.push_str(&format!("{config:?}"));
        let client = Client::try_from(config).unwrap();
        debug.push_str(&format!("{client:?}"));
    }
    assert!(
        debug.contains("alice") && debug.contains("API_KEY"),
        "non-secrets are shown"
    );
    for secret in ["SECRET", &key_data, &key_body] {
        assert!(!debug.contains(secret), "{secret} leaked into Debug output");
    }
}

/// A valid kubeconfig that the fuzzers mutate.
fn sample() -> String {
    format!(
        "{FIRST}users:\n- name: x\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: c\n      args: [a]\n      env: [{{name: n, value: v}}]\n"
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,400}") {
        if let Ok(kc) = Kubeconfig::from_yaml(&text) {
            let _ = Config::from_custom_kubeconfig(&kc, &KubeconfigOptions::default());
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(kc) = Kubeconfig::from_yaml(&text) {
            let _ = Config::from_custom_kubeconfig(&kc, &KubeconfigOptions::default());
        }
    }

    #[test]
    fn mutated_kubeconfigs_never_panic(
        cut in 0usize..600,
        insert_at in 0usize..600,
        insert in prop::sample::select(vec![
            "", ":", "- ", "[", "]", "{", "}", "\n  ", "null", "~", "&a", "*a", "!!binary", "'", "\"", "\t",
            "server: 12", "namespace: [x]", "cluster: null", "context: 5", "users: {}", "<<: *a",
        ]),
    ) {
        let mut text = sample();
        let cut = cut.min(text.len());
        while !text.is_char_boundary(cut) { text.pop(); }
        let mut mutated = text[..cut].to_owned();
        let at = insert_at.min(mutated.len());
        mutated.insert_str(at, insert);
        mutated.push_str(&text[cut..]);
        if let Ok(kc) = Kubeconfig::from_yaml(&mutated) {
            for context in [None, Some("first-ctx".to_owned())] {
                let options = KubeconfigOptions { context, ..Default::default() };
                let _ = Config::from_custom_kubeconfig(&kc, &options);
            }
        }
    }
}
