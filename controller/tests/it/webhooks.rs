//! Admission and conversion webhooks served by a `Manager` and called by
//! the testserver as kube-apiserver calls them (WH…): defaults set by a
//! mutating webhook, refusals with the webhook's message and causes,
//! warnings, conversion between two versions of a CRD on every read and
//! write, failure policies against slow, missing and untrusted webhooks,
//! reinvocation, selectors, dry runs, kubectl's view, metrics.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;
use crate::widgets;

use std::process::{Command, Stdio};

use futures::StreamExt;
use kcontrol_client::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kcontrol_controller::webhook::{AdmissionRequest, DevCertificates};
use kcontrol_indexer::k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kcontrol_indexer::k8s_openapi::api::core::v1::{Namespace, Service};
use kube_core::admission::AdmissionResponse;
use serde_json::{json, Value};

use kcontrol_testserver::wait_with_output_within;
use support::DEADLINE;
use widgets::{status_of, v1, v2, widget, GROUP, VALIDATING};

fn decode<K: serde::de::DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).unwrap()
}

fn labels(w: &v1::Widget) -> std::collections::BTreeMap<String, String> {
    w.metadata.labels.clone().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wh1_defaults_appear_and_bad_widgets_are_refused_with_the_webhooks_message() {
    let env = widgets::env().await;
    let api: Api<v1::Widget> = Api::namespaced(env.client.clone(), "default");
    let pp = PostParams::default();

    let plain = api
        .create(&pp, &decode(widget("plain", json!({}))))
        .await
        .unwrap();
    assert_eq!(plain.spec.size, Some(1));
    assert_eq!(plain.spec.color.as_deref(), Some("blue"));
    assert_eq!(labels(&plain)["hooks.kcontrol.dev/defaulted"], "true");

    let err = api
        .create(&pp, &decode(widget("huge", json!({"size": 20}))))
        .await
        .unwrap_err();
    let (code, reason, message) = status_of(&err);
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert_eq!(
        message,
        format!("admission webhook \"{VALIDATING}\" denied the request: Widget.hooks.kcontrol.dev \"huge\" is invalid: spec.size: Invalid value: 20: must be between 1 and 10")
    );
    let causes = err.status().and_then(|s| s.details.clone()).unwrap().causes;
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].field.as_deref(), Some("spec.size"));
    assert_eq!(causes[0].reason.as_deref(), Some("FieldValueInvalid"));
    assert!(
        api.get_opt("huge").await.unwrap().is_none(),
        "a refused widget is not stored"
    );

    let err = api
        .create(&pp, &decode(widget("red", json!({"color": "red"}))))
        .await
        .unwrap_err();
    assert_eq!(
        status_of(&err),
        (403, "Forbidden".into(), format!("admission webhook \"{VALIDATING}\" denied the request: red widgets are not allowed"))
    );

    // update: the old object is at hand
    let mut recolored = plain.clone();
    recolored.spec.color = Some("green".into());
    let err = api.replace("plain", &pp, &recolored).await.unwrap_err();
    let (code, _, message) = status_of(&err);
    assert_eq!(code, 422);
    assert!(
        message.ends_with("spec.color: Invalid value: \"green\": field is immutable"),
        "{message}"
    );
    let mut resized = plain.clone();
    resized.spec.size = Some(4);
    assert_eq!(
        api.replace("plain", &pp, &resized).await.unwrap().spec.size,
        Some(4)
    );

    // delete: the last state is judged
    let mut protected: v1::Widget = decode(widget("keep", json!({})));
    protected.metadata.labels = Some([("protected".to_owned(), "true".to_owned())].into());
    api.create(&pp, &protected).await.unwrap();
    let err = api
        .delete("keep", &DeleteParams::default())
        .await
        .unwrap_err();
    assert_eq!(
        status_of(&err).2,
        format!("admission webhook \"{VALIDATING}\" denied the request: widget keep is protected")
    );
    assert!(api.get_opt("keep").await.unwrap().is_some());
    api.delete("plain", &DeleteParams::default()).await.unwrap();
    assert!(api.get_opt("plain").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wh2_warnings_reach_the_client_and_the_patch_keeps_unknown_fields() {
    let env = widgets::env().await;
    let path = format!("/apis/{GROUP}/v1/namespaces/default/widgets");
    let body = serde_json::to_vec(&widget("big", json!({"size": 7, "note": "kept"}))).unwrap();
    let (code, headers, text) =
        widgets::http(env.server.addr(), "POST", &path, "application/json", &body).await;
    assert_eq!(code, 201, "{text}");
    let warnings: Vec<&str> = headers
        .iter()
        .filter(|(k, _)| k == "warning")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(warnings, ["299 - \"widget 7 is big\""]);
    // the defaulter's patch changes only what it changed: `note`, which
    // the Rust type does not know, stays
    let stored: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        stored["spec"],
        json!({"size": 7, "color": "blue", "note": "kept"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wh3_a_conversion_webhook_serves_every_read_and_write_at_the_other_version() {
    let env = widgets::env().await;
    let pp = PostParams::default();
    let old: Api<v1::Widget> = Api::namespaced(env.client.clone(), "default");
    let new: Api<v2::Widget> = Api::namespaced(env.client.clone(), "default");

    let a = old
        .create(
            &pp,
            &decode(widget("a", json!({"size": 3, "color": "green"}))),
        )
        .await
        .unwrap();
    let a2 = new.get("a").await.unwrap();
    assert_eq!(
        a2.spec,
        v2::WidgetSpec {
            dimensions: v2::Dimensions { size: 3 },
            colour: "green".into()
        }
    );
    assert_eq!(a2.metadata.uid, a.metadata.uid);
    assert_eq!(a2.metadata.resource_version, a.metadata.resource_version);

    // a watch at v2 from now on
    let list = new.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.clone().unwrap_or_default();
    let mut watch = new.watch(&WatchParams::default(), &rv).await.unwrap();

    // written at v2, stored at v1, read back at v1
    let mut resized = a2.clone();
    resized.spec.dimensions.size = 4;
    assert_eq!(
        new.replace("a", &pp, &resized)
            .await
            .unwrap()
            .spec
            .dimensions
            .size,
        4
    );
    assert_eq!(old.get("a").await.unwrap().spec.size, Some(4));
    let stored = env
        .server
        .objects()
        .get("widgets.hooks.kcontrol.dev", "default", "a")
        .unwrap();
    assert_eq!(stored.value()["apiVersion"], "hooks.kcontrol.dev/v1");
    assert_eq!(stored.value()["spec"], json!({"size": 4, "color": "green"}));

    let modified = tokio::time::timeout(DEADLINE, async {
        loop {
            match watch.next().await.expect("the watch goes on").unwrap() {
                WatchEvent::Modified(w) => return w,
                WatchEvent::Bookmark(_) => continue,
                other => panic!("unexpected {other:?}"),
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(modified.spec.dimensions.size, 4);

    // created at v2: the v1 defaulting webhook matches by equivalence,
    // gets the object at v1, and its defaults come back at v2
    let b: v2::Widget = decode(
        json!({"apiVersion": format!("{GROUP}/v2"), "kind": "Widget",
        "metadata": {"name": "b"}, "spec": {"dimensions": {"size": 2}, "colour": "yellow"}}),
    );
    let b = new.create(&pp, &b).await.unwrap();
    assert_eq!(
        b.metadata.labels.unwrap_or_default()["hooks.kcontrol.dev/defaulted"],
        "true"
    );
    let stored = env
        .server
        .objects()
        .get("widgets.hooks.kcontrol.dev", "default", "b")
        .unwrap();
    assert_eq!(
        stored.value()["spec"],
        json!({"size": 2, "color": "yellow"})
    );
    // ... and the v1 validating webhook judges writes at v2 too
    let mut huge = new.get("b").await.unwrap();
    huge.spec.dimensions.size = 50;
    let (code, _, message) = status_of(&new.replace("b", &pp, &huge).await.unwrap_err());
    assert_eq!(code, 422);
    assert!(
        message.contains("spec.size: Invalid value: 50"),
        "{message}"
    );

    let items = new.list(&ListParams::default()).await.unwrap().items;
    let sizes: Vec<i64> = items.iter().map(|w| w.spec.dimensions.size).collect();
    assert_eq!(sizes, [4, 2]);
    // and back: v1 reads see what was written at v2
    assert_eq!(
        old.get("b").await.unwrap().spec.color.as_deref(),
        Some("yellow")
    );
}

/// A validating configuration of one webhook at `path` for widgets.
fn hook(name: &str, path: &str, policy: &str, timeout: u32) -> Value {
    let mut h = widgets::widget_hook(name, path, &["CREATE"]);
    h["failurePolicy"] = json!(policy);
    h["timeoutSeconds"] = json!(timeout);
    h
}

async fn create_widget(
    env: &widgets::Env,
    name: &str,
) -> Result<v1::Widget, kcontrol_client::Error> {
    let api: Api<v1::Widget> = Api::namespaced(env.client.clone(), "default");
    api.create(&PostParams::default(), &decode(widget(name, json!({}))))
        .await
}

async fn remove_validating(env: &widgets::Env, name: &str) {
    Api::<ValidatingWebhookConfiguration>::all(env.client.clone())
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wh4_slow_missing_and_untrusted_webhooks_follow_the_failure_policy() {
    let env = widgets::env().await;
    let ca = env.certs.ca_pem.clone();

    // beyond timeoutSeconds: Ignore lets the write through, Fail refuses it
    widgets::add_validating(
        &env.client,
        "slow-ignore",
        vec![hook("slow.ignore.kcontrol.dev", "/slow", "Ignore", 1)],
        &ca,
    )
    .await;
    create_widget(&env, "through-slow").await.unwrap();
    remove_validating(&env, "slow-ignore").await;
    widgets::add_validating(
        &env.client,
        "slow-fail",
        vec![hook("slow.fail.kcontrol.dev", "/slow", "Fail", 1)],
        &ca,
    )
    .await;
    let err = create_widget(&env, "blocked-slow").await.unwrap_err();
    assert_eq!(
        status_of(&err),
        (500, "InternalError".into(), "Internal error occurred: failed calling webhook \"slow.fail.kcontrol.dev\": failed to call webhook: Post \"https://webhooks.system.svc:443/slow?timeout=1s\": context deadline exceeded".into())
    );
    remove_validating(&env, "slow-fail").await;

    // a path the webhook server does not serve (404)
    widgets::add_validating(
        &env.client,
        "missing-ignore",
        vec![hook(
            "missing.ignore.kcontrol.dev",
            "/nowhere",
            "Ignore",
            10,
        )],
        &ca,
    )
    .await;
    create_widget(&env, "through-missing").await.unwrap();
    remove_validating(&env, "missing-ignore").await;
    widgets::add_validating(
        &env.client,
        "missing-fail",
        vec![hook("missing.fail.kcontrol.dev", "/nowhere", "Fail", 10)],
        &ca,
    )
    .await;
    let (code, _, message) = status_of(&create_widget(&env, "blocked-missing").await.unwrap_err());
    assert_eq!(code, 500);
    assert_eq!(message, "Internal error occurred: failed calling webhook \"missing.fail.kcontrol.dev\": failed to call webhook: the server could not find the requested resource");
    remove_validating(&env, "missing-fail").await;

    // a CA bundle that did not sign the webhook's certificate
    let stranger = DevCertificates::for_service("system", "webhooks").unwrap();
    widgets::add_validating(
        &env.client,
        "untrusted",
        vec![hook(
            "untrusted.kcontrol.dev",
            "/validate-v1-widget",
            "Fail",
            10,
        )],
        &stranger.ca_pem,
    )
    .await;
    let (code, _, message) =
        status_of(&create_widget(&env, "blocked-untrusted").await.unwrap_err());
    assert_eq!(code, 500);
    assert!(
        message.ends_with(
            "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        ),
        "{message}"
    );
    remove_validating(&env, "untrusted").await;

    // a Service nobody registered
    let mut unknown = hook("unknown.kcontrol.dev", "/validate-v1-widget", "Fail", 10);
    unknown["clientConfig"]["service"]["name"] = json!("nobody");
    widgets::add_validating(&env.client, "unknown-service", vec![unknown], &ca).await;
    let (_, _, message) = status_of(&create_widget(&env, "blocked-unknown").await.unwrap_err());
    assert!(
        message.ends_with("service \"nobody\" not found"),
        "{message}"
    );
    remove_validating(&env, "unknown-service").await;

    // a webhook by URL: the certificate is valid for 127.0.0.1 too
    let mut by_url = hook("url.kcontrol.dev", "/validate-v1-widget", "Fail", 10);
    by_url["clientConfig"] =
        json!({"url": format!("https://{}/validate-v1-widget", env.webhook_addr)});
    widgets::add_validating(&env.client, "by-url", vec![by_url], &ca).await;
    let api: Api<v1::Widget> = Api::namespaced(env.client.clone(), "default");
    let err = api
        .create(
            &PostParams::default(),
            &decode(widget("red", json!({"color": "red"}))),
        )
        .await
        .unwrap_err();
    // two webhooks refuse: the first in configuration order answers
    assert_eq!(
        status_of(&err).2,
        "admission webhook \"url.kcontrol.dev\" denied the request: red widgets are not allowed"
    );
    remove_validating(&env, "by-url").await;

    create_widget(&env, "through-at-last").await.unwrap();
    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|w| w.metadata.name)
        .collect();
    assert_eq!(
        names,
        ["through-at-last", "through-missing", "through-slow"]
    );
}

/// A mutating handler that sets label `key` to `value(labels)`.
fn label_setter(
    key: &'static str,
    value: fn(&std::collections::BTreeMap<String, String>) -> String,
) -> impl Fn(AdmissionRequest) -> std::future::Ready<AdmissionResponse> + Send + Sync + 'static {
    move |req: AdmissionRequest| {
        let mut labels = req
            .object
            .as_ref()
            .and_then(|o| o.metadata.labels.clone())
            .unwrap_or_default();
        labels.insert(key.to_owned(), value(&labels));
        let patch: json_patch::Patch = serde_json::from_value(
            json!([{"op": "add", "path": "/metadata/labels", "value": labels}]),
        )
        .unwrap();
        std::future::ready(AdmissionResponse::from(&req).with_patch(patch).unwrap())
    }
}

fn mutating(name: &str, path: &str, reinvocation: &str) -> Value {
    let mut h = widgets::widget_hook(name, path, &["CREATE"]);
    h["reinvocationPolicy"] = json!(reinvocation);
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wh5_a_mutating_webhook_with_if_needed_sees_later_changes_once_more() {
    let env = widgets::env_with(|s| {
        s.admission(
            "/copy-b",
            label_setter("a", |l| {
                l.get("b").cloned().unwrap_or_else(|| "none".into())
            }),
        )
        .admission("/set-b", label_setter("b", |_| "1".into()))
        .admission("/break-size", |req: AdmissionRequest| async move {
            let patch = json!([{"op": "add", "path": "/spec/size", "value": "big"}]);
            AdmissionResponse::from(&req)
                .with_patch(serde_json::from_value(patch).unwrap())
                .unwrap()
        })
    })
    .await;
    let ca = env.certs.ca_pem.clone();
    // configurations run by name: a-... before b-...
    widgets::add_mutating(
        &env.client,
        "a-copy",
        vec![mutating("copy.kcontrol.dev", "/copy-b", "IfNeeded")],
        &ca,
    )
    .await;
    widgets::add_mutating(
        &env.client,
        "b-set",
        vec![mutating("set.kcontrol.dev", "/set-b", "Never")],
        &ca,
    )
    .await;
    let w = create_widget(&env, "reinvoked").await.unwrap();
    assert_eq!(
        (labels(&w)["a"].as_str(), labels(&w)["b"].as_str()),
        ("1", "1")
    );

    Api::<MutatingWebhookConfiguration>::all(env.client.clone())
        .delete("a-copy", &DeleteParams::default())
        .await
        .unwrap();
    widgets::add_mutating(
        &env.client,
        "a-copy-never",
        vec![mutating("copy.kcontrol.dev", "/copy-b", "Never")],
        &ca,
    )
    .await;
    let w = create_widget(&env, "once").await.unwrap();
    assert_eq!(
        (labels(&w)["a"].as_str(), labels(&w)["b"].as_str()),
        ("none", "1")
    );

    // what a mutating webhook makes (the last one: configurations run by
    // name) is validated against the schema again
    widgets::add_mutating(
        &env.client,
        "z-breaks",
        vec![mutating("breaks.kcontrol.dev", "/break-size", "Never")],
        &ca,
    )
    .await;
    let (code, _, message) = status_of(&create_widget(&env, "broken").await.unwrap_err());
    assert_eq!(code, 422);
    assert!(
        message.starts_with(
            "Widget.hooks.kcontrol.dev \"broken\" is invalid: spec.size: Invalid value: \"string\""
        ),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wh6_namespace_and_object_selectors_pick_the_requests_a_webhook_sees() {
    let env = widgets::env_with(|s| {
        s.admission("/deny", |req: AdmissionRequest| async move {
            AdmissionResponse::from(&req).deny("denied by policy")
        })
    })
    .await;
    let ca = env.certs.ca_pem.clone();
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    for (name, labels) in [("prod", json!({"env": "prod"})), ("dev", json!({}))] {
        let ns: Namespace = decode(json!({"metadata": {"name": name, "labels": labels}}));
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
    }
    let mut by_namespace = hook("prod.kcontrol.dev", "/deny", "Fail", 10);
    by_namespace["namespaceSelector"] = json!({"matchLabels": {"env": "prod"}});
    let mut by_object = hook("checked.kcontrol.dev", "/deny", "Fail", 10);
    by_object["objectSelector"] =
        json!({"matchExpressions": [{"key": "check", "operator": "In", "values": ["yes"]}]});
    widgets::add_validating(&env.client, "selectors", vec![by_namespace, by_object], &ca).await;

    let pp = PostParams::default();
    let in_ns = |ns: &str| Api::<v1::Widget>::namespaced(env.client.clone(), ns);
    in_ns("dev")
        .create(&pp, &decode(widget("w", json!({}))))
        .await
        .unwrap();
    let err = in_ns("prod")
        .create(&pp, &decode(widget("w", json!({}))))
        .await
        .unwrap_err();
    assert_eq!(
        status_of(&err).2,
        "admission webhook \"prod.kcontrol.dev\" denied the request: denied by policy"
    );
    let mut checked: v1::Widget = decode(widget("checked", json!({})));
    checked.metadata.labels = Some([("check".to_owned(), "yes".to_owned())].into());
    let err = in_ns("dev").create(&pp, &checked).await.unwrap_err();
    assert_eq!(
        status_of(&err).2,
        "admission webhook \"checked.kcontrol.dev\" denied the request: denied by policy"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wh7_a_dry_run_is_admitted_and_stores_nothing() {
    let env = widgets::env().await;
    let api: Api<v1::Widget> = Api::namespaced(env.client.clone(), "default");
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let answered = api
        .create(&dry, &decode(widget("dry", json!({}))))
        .await
        .unwrap();
    assert_eq!(answered.spec.color.as_deref(), Some("blue"));
    assert!(answered.metadata.uid.is_some());
    assert!(api.get_opt("dry").await.unwrap().is_none());
    let err = api
        .create(&dry, &decode(widget("dry-red", json!({"color": "red"}))))
        .await
        .unwrap_err();
    assert_eq!(status_of(&err).0, 403);
}

fn kubectl_path() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

/// kubectl with its own home; `(success, stdout, stderr)`, bounded.
fn kubectl(
    bin: &std::path::Path,
    home: &std::path::Path,
    args: &[&str],
    stdin: &str,
) -> (bool, String, String) {
    let mut child = Command::new(bin)
        .args(args)
        .env("KUBECONFIG", home.join("kubeconfig"))
        .env("HOME", home)
        .env("KUBECACHEDIR", home.join("cache"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), stdin.as_bytes()).unwrap();
    let out = wait_with_output_within(format!("kubectl {args:?}"), DEADLINE, child);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wh8_kubectl_shows_the_webhooks_refusal_and_both_versions() {
    let Some(bin) = kubectl_path() else {
        println!("kubectl not found on PATH: wh8 skipped");
        return;
    };
    let env = widgets::env().await;
    let home = tempfile::tempdir().unwrap();
    env.server
        .write_kubeconfig(home.path().join("kubeconfig"))
        .unwrap();
    let run = |args: &'static [&'static str], stdin: String| {
        let (bin, home) = (bin.clone(), home.path().to_owned());
        tokio::task::spawn_blocking(move || kubectl(&bin, &home, args, &stdin))
    };
    let red = format!(
        "apiVersion: {GROUP}/v1\nkind: Widget\nmetadata:\n  name: red\nspec:\n  color: red\n"
    );
    let (ok, _, stderr) = run(&["create", "-f", "-"], red).await.unwrap();
    assert!(!ok);
    assert!(
        stderr.contains(&format!("Error from server (Forbidden): error when creating \"STDIN\": admission webhook \"{VALIDATING}\" denied the request: red widgets are not allowed")),
        "{stderr}"
    );
    let big =
        format!("apiVersion: {GROUP}/v1\nkind: Widget\nmetadata:\n  name: big\nspec:\n  size: 8\n");
    let (ok, stdout, stderr) = run(&["create", "-f", "-"], big).await.unwrap();
    assert!(ok, "{stdout}{stderr}");
    assert!(stderr.contains("Warning: widget 8 is big"), "{stderr}");
    let (ok, stdout, stderr) = run(
        &[
            "get",
            "widgets.v2.hooks.kcontrol.dev",
            "big",
            "-o",
            "jsonpath={.spec.dimensions.size}/{.spec.colour}",
        ],
        String::new(),
    )
    .await
    .unwrap();
    assert!(ok, "{stderr}");
    assert_eq!(stdout, "8/blue");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wh9_webhook_requests_are_counted_under_controller_runtimes_names() {
    let env = widgets::env().await;
    create_widget(&env, "counted").await.unwrap();
    let api: Api<v1::Widget> = Api::namespaced(env.client.clone(), "default");
    api.create(
        &PostParams::default(),
        &decode(widget("red", json!({"color": "red"}))),
    )
    .await
    .unwrap_err();
    let (code, text) = support::get(env.health_addr, "/metrics").await;
    assert_eq!(code, 200);
    let value = |line_start: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(line_start))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {line_start} in\n{text}"))
    };
    assert!(value("controller_runtime_webhook_requests_total{webhook=\"/validate-v1-widget\",code=\"200\"}") >= 2.0);
    assert!(
        value(
            "controller_runtime_webhook_requests_total{webhook=\"/mutate-v1-widget\",code=\"200\"}"
        ) >= 2.0
    );
    assert!(
        value("controller_runtime_webhook_latency_seconds_count{webhook=\"/validate-v1-widget\"}")
            >= 2.0
    );
    assert_eq!(
        value("controller_runtime_webhook_requests_in_flight{webhook=\"/validate-v1-widget\"}"),
        0.0
    );
    assert_eq!(value("kcontrol_webhook_responses_total{webhook=\"/validate-v1-widget\",allowed=\"false\",code=\"403\"}"), 1.0);
    let (code, ready) = support::get(env.health_addr, "/readyz").await;
    assert!(ready.contains("[+]webhook-server ok"), "{code} {ready}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wh10_a_failing_conversion_webhook_fails_reads_lists_and_watches_at_the_other_version() {
    let env = widgets::env().await;
    let old: Api<v1::Widget> = Api::namespaced(env.client.clone(), "default");
    let new: Api<v2::Widget> = Api::namespaced(env.client.clone(), "default");
    old.create(&PostParams::default(), &decode(widget("a", json!({}))))
        .await
        .unwrap();
    let rv = new
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut watch = new.watch(&WatchParams::default(), &rv).await.unwrap();

    // the CRD now names a path the webhook server does not serve
    let crds = Api::<kcontrol_indexer::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>::all(env.client.clone());
    let to_nowhere = json!([{"op": "replace", "path": "/spec/conversion/webhook/clientConfig/service/path", "value": "/nowhere"}]);
    crds.patch(
        &format!("widgets.{GROUP}"),
        &kcontrol_client::PatchParams::default(),
        &kcontrol_client::Patch::Json(to_nowhere),
    )
    .await
    .unwrap();
    let expected = format!("Internal error occurred: conversion webhook for {GROUP}/v1, Kind=Widget failed: the server could not find the requested resource");
    let (code, _, message) = status_of(&new.get("a").await.unwrap_err());
    assert_eq!((code, message.as_str()), (500, expected.as_str()));
    assert_eq!(
        status_of(&new.list(&ListParams::default()).await.unwrap_err()).2,
        expected
    );
    // reads at the storage version need no conversion
    assert_eq!(old.get("a").await.unwrap().spec.size, Some(1));

    // a change the open watch cannot convert ends it with an ERROR event
    let mut resized = old.get("a").await.unwrap();
    resized.spec.size = Some(2);
    old.replace("a", &PostParams::default(), &resized)
        .await
        .unwrap();
    let status = tokio::time::timeout(DEADLINE, async {
        loop {
            match watch
                .next()
                .await
                .expect("an event before the end")
                .unwrap()
            {
                WatchEvent::Error(status) => return status,
                WatchEvent::Bookmark(_) => continue,
                other => panic!("unexpected {other:?}"),
            }
        }
    })
    .await
    .unwrap();
    assert_eq!((status.code(), status.message()), (500, expected.as_str()));
}

fn service_object(name: &str, cluster_ip: Option<&str>) -> Service {
    let mut spec = json!({"ports": [{"port": 80}], "selector": {"app": name}});
    if let Some(ip) = cluster_ip {
        spec["clusterIP"] = json!(ip);
    }
    decode(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}))
}

fn cluster_ip(s: &Service) -> String {
    s.spec
        .as_ref()
        .and_then(|s| s.cluster_ip.clone())
        .unwrap_or_default()
}

/// With webhook configurations in force every write is a dry run that
/// admission judges and a commit of exactly that object: a Service keeps
/// the testserver's address management through both (the commit holds the
/// cluster IP the dry run picked, a dry run holds nothing, an update keeps
/// the IP, a delete gives it back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wh11_services_keep_their_cluster_ip_through_admissions_dry_run_and_commit() {
    let env = widgets::env().await;
    let api: Api<Service> = Api::namespaced(env.client.clone(), "default");
    let pp = PostParams::default();
    let a = api.create(&pp, &service_object("a", None)).await.unwrap();
    let ip = cluster_ip(&a);
    assert!(ip.starts_with("10."), "no cluster IP: {a:?}");
    assert_eq!(cluster_ip(&api.get("a").await.unwrap()), ip);
    // the commit reserved it: nobody else gets it
    let err = api
        .create(&pp, &service_object("b", Some(&ip)))
        .await
        .unwrap_err();
    assert_eq!(status_of(&err).0, 422, "{err}");
    let mut relabelled = api.get("a").await.unwrap();
    relabelled
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("tier".into(), "web".into());
    let updated = api.replace("a", &pp, &relabelled).await.unwrap();
    assert_eq!(cluster_ip(&updated), ip);
    // a dry run reserves nothing
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let wanted = "10.96.200.7";
    let answered = api
        .create(&dry, &service_object("c", Some(wanted)))
        .await
        .unwrap();
    assert_eq!(cluster_ip(&answered), wanted);
    let c = api
        .create(&pp, &service_object("c", Some(wanted)))
        .await
        .unwrap();
    assert_eq!(cluster_ip(&c), wanted);
    // a delete gives the address back
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let b = api
        .create(&pp, &service_object("b", Some(&ip)))
        .await
        .unwrap();
    assert_eq!(cluster_ip(&b), ip);
}
