//! `Config::infer`: `$KUBECONFIG` (several files, merged), else
//! `~/.kube/config`, else in-cluster, with an error naming both attempts.
//! One test function, because it changes the process environment.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "it/support/mod.rs"]
mod support;

use kcontrol_client::{Config, ConfigError};
use support::write;

const KUBECONFIG: &str = "current-context: c\nclusters:\n- name: k\n  cluster: {server: \"https://NAME.example\"}\ncontexts:\n- name: c\n  context: {cluster: k, namespace: NAME}\n";

#[test]
fn infer_tries_kubeconfig_then_in_cluster() {
    let home = tempfile::tempdir().unwrap();
    std::env::set_var("HOME", home.path());
    std::env::remove_var("KUBECONFIG");
    std::env::remove_var("KUBERNETES_SERVICE_HOST");
    std::env::remove_var("KUBERNETES_SERVICE_PORT");

    // neither: the error names both attempts
    let err = Config::infer().unwrap_err();
    assert!(matches!(err, ConfigError::Infer { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains(".kube/config does not exist"), "{text}");
    assert!(text.contains("KUBERNETES_SERVICE_HOST"), "{text}");

    // ~/.kube/config
    write(
        home.path(),
        ".kube/config",
        &KUBECONFIG.replace("NAME", "home"),
    );
    assert_eq!(Config::infer().unwrap().default_namespace, "home");

    // $KUBECONFIG wins over ~/.kube/config, and its files merge in order
    let a = write(home.path(), "a.yaml", &KUBECONFIG.replace("NAME", "first"));
    let b = write(home.path(), "b.yaml", &KUBECONFIG.replace("NAME", "second"));
    let list = std::env::join_paths([home.path().join("absent.yaml").display().to_string(), a, b])
        .unwrap();
    std::env::set_var("KUBECONFIG", &list);
    let config = Config::infer().unwrap();
    assert_eq!(config.default_namespace, "first");
    assert_eq!(config.cluster_url.host(), Some("first.example"));

    // a broken kubeconfig is reported, not skipped for in-cluster
    let broken = write(home.path(), "broken.yaml", "clusters: {");
    std::env::set_var("KUBECONFIG", &broken);
    let err = Config::infer().unwrap_err();
    assert!(matches!(err, ConfigError::ParseKubeconfig { .. }), "{err}");
    assert!(err.to_string().contains("broken.yaml"), "{err}");

    // KUBECONFIG naming only missing files, and no pod environment
    std::env::set_var("KUBECONFIG", home.path().join("nothing-here"));
    let text = Config::infer().unwrap_err().to_string();
    assert!(
        text.contains("nothing-here") && text.contains("in-cluster"),
        "{text}"
    );
}
