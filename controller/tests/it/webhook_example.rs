//! The `webhook` example, as a test: its embedded demo passes, and kubectl
//! shows a bad WebApp refused with the validating webhook's message.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code, unreachable_pub)]
#[path = "../../examples/webhook.rs"]
mod example;

use crate::support;

use std::process::{Command, Stdio};

use kcontrol_testserver::{wait_with_output_within, TestServer};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_runs_on_an_embedded_server() {
    example::embedded().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_shows_a_bad_webapp_refused_with_the_webhooks_message() {
    let Some(bin) = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("kubectl"))
            .find(|p| p.is_file())
    }) else {
        println!("kubectl not found on PATH: skipped");
        return;
    };
    let server = TestServer::start().await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let stop = CancellationToken::new();
    let (_client, _running) = example::start(&server, &home.path().join("certs"), stop.clone())
        .await
        .unwrap();
    server
        .write_kubeconfig(home.path().join("kubeconfig"))
        .unwrap();
    let bad = "apiVersion: example.kcontrol.dev/v1\nkind: WebApp\nmetadata:\n  name: bad\nspec:\n  image: docker.io/evil\n  replicas: 50\n";
    let home_path = home.path().to_owned();
    let (ok, stderr) = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(bin)
            .args(["apply", "-f", "-"])
            .env("KUBECONFIG", home_path.join("kubeconfig"))
            .env("HOME", &home_path)
            .env("KUBECACHEDIR", home_path.join("cache"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), bad.as_bytes()).unwrap();
        let out = wait_with_output_within("kubectl apply", support::DEADLINE, child);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
    .await
    .unwrap();
    stop.cancel();
    assert!(!ok);
    // kubectl prints an `Invalid` refusal from its causes, as it does on a
    // cluster (the message, `admission webhook "vwebapp.example.kcontrol.dev"
    // denied the request: …`, is for other clients); the image was
    // defaulted first
    assert!(
        stderr.contains("The WebApp \"bad\" is invalid: \n* spec.replicas: Invalid value: 50: must be between 1 and 10\n* spec.image: Invalid value: \"docker.io/evil:latest\": must come from registry.example.com"),
        "{stderr}"
    );
}
