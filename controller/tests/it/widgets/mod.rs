//! What the webhook tests share: Widgets, a custom resource served at v1
//! (stored) and v2 (converted by a conversion webhook), with a defaulting
//! and a validating webhook, all served by a `Manager` over HTTPS with
//! development certificates, called by a testserver that reaches them
//! through a registered Service; and small HTTP helpers.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::Arc;

use kcontrol_client::{Api, Client, PostParams};
use kcontrol_controller::webhook::{
    patch_ca_bundle, AdmissionRequest, CertWatcher, Conversion, Denial, DevCertificates,
    FieldCause, Validator, Warnings, WebhookServer,
};
use kcontrol_controller::{Action, Context, Health, Manager, SharedRegistry};
use kcontrol_indexer::k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kcontrol_indexer::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kcontrol_informer::InformerFactory;
use kcontrol_testserver::TestServer;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

pub const GROUP: &str = "hooks.kcontrol.dev";
pub const SERVICE_NAMESPACE: &str = "system";
pub const SERVICE: &str = "webhooks";
pub const DEFAULTING: &str = "default.widgets.hooks.kcontrol.dev";
pub const VALIDATING: &str = "validate.widgets.hooks.kcontrol.dev";

pub mod v1 {
    use super::*;

    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    pub struct WidgetSpec {
        #[serde(skip_serializing_if = "Option::is_none")]
        pub size: Option<i64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub color: Option<String>,
    }

    kcontrol_indexer::custom_resource! {
        /// A widget as v1 spells it.
        pub struct Widget {
            group: "hooks.kcontrol.dev",
            version: "v1",
            plural: "widgets",
            scope: Namespaced,
            spec: WidgetSpec,
        }
    }
}

pub mod v2 {
    use super::*;

    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    pub struct Dimensions {
        pub size: i64,
    }

    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    pub struct WidgetSpec {
        pub dimensions: Dimensions,
        pub colour: String,
    }

    kcontrol_indexer::custom_resource! {
        /// A widget as v2 spells it.
        pub struct Widget {
            group: "hooks.kcontrol.dev",
            version: "v2",
            plural: "widgets",
            scope: Namespaced,
            spec: WidgetSpec,
        }
    }
}

/// Sets a size of 1 and the color blue when missing, and a label.
pub fn default_widget(w: &mut v1::Widget) {
    w.spec.size.get_or_insert(1);
    w.spec.color.get_or_insert_with(|| "blue".into());
    w.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("hooks.kcontrol.dev/defaulted".into(), "true".into());
}

/// Sizes 1 to 10, no red, a color that never changes, and no deleting a
/// protected widget; a warning for big ones.
pub struct WidgetRules;

fn check_size(w: &v1::Widget) -> Result<Warnings, Denial> {
    match w.spec.size {
        Some(s) if !(1..=10).contains(&s) => Err(Denial::invalid([FieldCause::invalid(
            "spec.size",
            s,
            "must be between 1 and 10",
        )])),
        Some(s) if s > 5 => Ok(vec![format!("widget {} is big", s)]),
        _ => Ok(Vec::new()),
    }
}

impl Validator<v1::Widget> for WidgetRules {
    async fn validate_create(
        &self,
        w: &v1::Widget,
        _: &AdmissionRequest,
    ) -> Result<Warnings, Denial> {
        if w.spec.color.as_deref() == Some("red") {
            return Err(Denial::new("red widgets are not allowed"));
        }
        check_size(w)
    }

    async fn validate_update(
        &self,
        old: &v1::Widget,
        new: &v1::Widget,
        _: &AdmissionRequest,
    ) -> Result<Warnings, Denial> {
        if old.spec.color != new.spec.color {
            return Err(Denial::invalid([FieldCause::invalid(
                "spec.color",
                new.spec.color.clone(),
                "field is immutable",
            )]));
        }
        check_size(new)
    }

    async fn validate_delete(
        &self,
        w: &v1::Widget,
        _: &AdmissionRequest,
    ) -> Result<Warnings, Denial> {
        let protected = w
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.get("protected").map(String::as_str) == Some("true"));
        if protected {
            return Err(Denial::new(format!(
                "widget {} is protected",
                w.metadata.name.clone().unwrap_or_default()
            )));
        }
        Ok(Vec::new())
    }
}

/// v1 ⇄ v2.
pub fn widget_conversion() -> Conversion {
    Conversion::new()
        .convert(|w: v1::Widget| {
            Ok(v2::Widget {
                metadata: w.metadata,
                spec: v2::WidgetSpec {
                    dimensions: v2::Dimensions {
                        size: w.spec.size.unwrap_or_default(),
                    },
                    colour: w.spec.color.unwrap_or_default(),
                },
            })
        })
        .convert(|w: v2::Widget| {
            Ok(v1::Widget {
                metadata: w.metadata,
                spec: v1::WidgetSpec {
                    size: Some(w.spec.dimensions.size),
                    color: Some(w.spec.colour),
                },
            })
        })
}

/// The Service client config of a webhook path.
pub fn service(path: &str) -> Value {
    json!({"service": {"namespace": SERVICE_NAMESPACE, "name": SERVICE, "path": path, "port": 443}})
}

/// The Widget CRD: v1 stored, v2 served, conversion by webhook.
pub fn crd() -> Value {
    // `note` is in the schema but not in the Rust type
    let v1_schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "size": {"type": "integer"}, "color": {"type": "string"}, "note": {"type": "string"}}}}});
    let v2_schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "dimensions": {"type": "object", "properties": {"size": {"type": "integer"}}},
        "colour": {"type": "string"}}}}});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": v1_schema}},
                {"name": "v2", "served": true, "storage": false, "schema": {"openAPIV3Schema": v2_schema}}],
            "conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": service("/convert"), "conversionReviewVersions": ["v1"]}}}
    })
}

/// A webhook of a configuration for v1 Widgets.
pub fn widget_hook(name: &str, path: &str, operations: &[&str]) -> Value {
    json!({"name": name, "clientConfig": service(path),
        "rules": [{"operations": operations, "apiGroups": [GROUP], "apiVersions": ["v1"], "resources": ["widgets"]}],
        "sideEffects": "None", "admissionReviewVersions": ["v1"]})
}

/// Everything running.
pub struct Env {
    pub server: TestServer,
    pub client: Client,
    pub certs: DevCertificates,
    pub cert_dir: tempfile::TempDir,
    pub webhook_addr: SocketAddr,
    pub health_addr: SocketAddr,
    pub stop: CancellationToken,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The webhooks every test serves, and more routes a test adds.
pub fn webhook_server(certs: Arc<CertWatcher>) -> WebhookServer {
    WebhookServer::new(certs)
        .defaulting("/mutate-v1-widget", default_widget)
        .validating("/validate-v1-widget", WidgetRules)
        .conversion("/convert", widget_conversion())
        // answers nothing until the caller gives up
        .admission("/slow", |_: AdmissionRequest| async {
            std::future::pending::<kube_core::admission::AdmissionResponse>().await
        })
}

/// A testserver, the Widget CRD and its webhook configurations, and a
/// Manager serving the webhooks (plus `more` routes) and running a
/// Widget controller.
pub async fn env_with(more: impl FnOnce(WebhookServer) -> WebhookServer) -> Env {
    let server = TestServer::start().await.unwrap();
    let client = Client::from_kubeconfig_yaml(&server.kubeconfig()).unwrap();
    let certs = DevCertificates::for_service(SERVICE_NAMESPACE, SERVICE).unwrap();
    let cert_dir = tempfile::tempdir().unwrap();
    certs.write_to(cert_dir.path()).unwrap();
    let watcher = CertWatcher::from_dir(cert_dir.path()).unwrap();
    let registry = SharedRegistry::default();
    let factory = Arc::new(InformerFactory::builder(client.clone()).build());
    let mut manager =
        Manager::with_factory(client.clone(), factory, Health::with_registry(registry));
    let webhook_addr = manager
        .serve_webhooks(
            more(webhook_server(watcher)),
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap();
    let health_addr = manager
        .serve_health("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    server.register_service(SERVICE_NAMESPACE, SERVICE, webhook_addr);
    install(&client, &certs).await;
    let widgets = manager.controller::<v1::Widget>();
    manager.add(
        widgets,
        |_: Arc<v1::Widget>, _: Context<v1::Widget>| async {
            Ok::<_, std::io::Error>(Action::Done)
        },
    );
    let stop = CancellationToken::new();
    tokio::spawn(manager.run(stop.clone()));
    Env {
        server,
        client,
        certs,
        cert_dir,
        webhook_addr,
        health_addr,
        stop,
    }
}

pub async fn env() -> Env {
    env_with(|s| s).await
}

async fn create<K>(client: &Client, object: Value) -> K
where
    K: kcontrol_indexer::KubeResource + Serialize + serde::de::DeserializeOwned,
{
    let object: K = serde_json::from_value(object).unwrap();
    Api::<K>::all(client.clone())
        .create(&PostParams::default(), &object)
        .await
        .unwrap()
}

/// The CRD and the two configurations, then their CA bundles.
async fn install(client: &Client, certs: &DevCertificates) {
    create::<CustomResourceDefinition>(client, crd()).await;
    create::<MutatingWebhookConfiguration>(
        client,
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "widgets-defaulting"},
            "webhooks": [widget_hook(DEFAULTING, "/mutate-v1-widget", &["CREATE", "UPDATE"])]}),
    )
    .await;
    create::<ValidatingWebhookConfiguration>(
        client,
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "widgets-validation"},
            "webhooks": [widget_hook(VALIDATING, "/validate-v1-widget", &["CREATE", "UPDATE", "DELETE"])]}),
    )
    .await;
    patch_ca_bundle(
        client,
        &certs.ca_pem,
        &["widgets-defaulting"],
        &["widgets-validation"],
        &[&format!("widgets.{GROUP}")],
    )
    .await
    .unwrap();
}

/// Adds a validating configuration (its CA bundle set to `ca_pem`).
pub async fn add_validating(client: &Client, name: &str, hooks: Vec<Value>, ca_pem: &str) {
    create::<ValidatingWebhookConfiguration>(
        client,
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name}, "webhooks": hooks}),
    )
    .await;
    patch_ca_bundle(client, ca_pem, &[], &[name], &[])
        .await
        .unwrap();
}

/// Adds a mutating configuration (its CA bundle set to `ca_pem`).
pub async fn add_mutating(client: &Client, name: &str, hooks: Vec<Value>, ca_pem: &str) {
    create::<MutatingWebhookConfiguration>(
        client,
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name}, "webhooks": hooks}),
    )
    .await;
    patch_ca_bundle(client, ca_pem, &[name], &[], &[])
        .await
        .unwrap();
}

/// A widget at v1.
pub fn widget(name: &str, spec: Value) -> Value {
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget", "metadata": {"name": name}, "spec": spec})
}

/// One raw HTTP/1.1 request to a plain-HTTP server: status, headers
/// (lower-case names) and body.
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, Vec<(String, String)>, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    parse_response(&response)
}

pub fn parse_response(response: &[u8]) -> (u16, Vec<(String, String)>, String) {
    let text = String::from_utf8_lossy(response).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (code, headers, body.to_owned())
}

/// The error of a failed API call, as its Status: code, reason, message.
pub fn status_of(e: &kcontrol_client::Error) -> (u16, String, String) {
    let Some(status) = e.status() else {
        panic!("not an API error: {e}")
    };
    let code = e.api_error().map_or(0, kcontrol_client::ApiError::code);
    (
        code,
        status.reason().to_owned(),
        status.message().to_owned(),
    )
}
