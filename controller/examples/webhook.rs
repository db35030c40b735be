//! A custom resource with webhooks: `WebApp`, served at `v1` (stored) and
//! `v2`, with a defaulting webhook (one replica, the `latest` tag), a
//! validating webhook (1 to 10 replicas, an image of a registry we know)
//! and a conversion webhook between the versions, all served by a
//! `Manager` beside a controller of WebApps.
//!
//! `-- --embedded`: an in-process API server that calls the webhooks; the
//! demo creates WebApps (defaults appear, a bad one is refused with the
//! webhook's message), reads them at both versions, and exits 0.
//! Otherwise: the kubeconfig's cluster, certificates from `--cert-dir`
//! (cert-manager's mount), webhooks on `:9443` until SIGTERM.

use std::sync::Arc;

use kcontrol_client::{Api, Client, Config, PostParams};
use kcontrol_controller::webhook::{
    patch_ca_bundle, AdmissionRequest, CertWatcher, Conversion, Denial, DevCertificates,
    FieldCause, Validator, Warnings, WebhookServer,
};
use kcontrol_controller::{signals, Action, Context, Manager};
use kcontrol_testserver::TestServer;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// The WebApp as the stored version `v1` spells it.
pub mod v1 {
    use super::*;

    /// v1: a flat image and replica count.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    pub struct WebAppSpec {
        /// The container image (defaulted to `:latest` when untagged).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub image: Option<String>,
        /// How many replicas (defaulted to 1).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub replicas: Option<i32>,
    }

    kcontrol_indexer::custom_resource! {
        /// A web application, as v1 spells it.
        pub struct WebApp {
            group: "example.kcontrol.dev", version: "v1", plural: "webapps",
            scope: Namespaced, spec: WebAppSpec,
        }
    }
}

/// The WebApp as `v2` spells it.
pub mod v2 {
    use super::*;

    /// v2: the container's image under `container`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    pub struct Container {
        /// The container image.
        pub image: String,
    }

    /// v2's spec.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    pub struct WebAppSpec {
        /// The one container.
        pub container: Container,
        /// How many replicas.
        pub replicas: i32,
    }

    kcontrol_indexer::custom_resource! {
        /// A web application, as v2 spells it.
        pub struct WebApp {
            group: "example.kcontrol.dev", version: "v2", plural: "webapps",
            scope: Namespaced, spec: WebAppSpec,
        }
    }
}

/// Defaults: one replica, the `latest` tag.
pub fn default_webapp(app: &mut v1::WebApp) {
    app.spec.replicas.get_or_insert(1);
    if let Some(image) = app.spec.image.as_mut().filter(|i| !i.contains(':')) {
        image.push_str(":latest");
    }
}

/// 1 to 10 replicas; an image from `registry.example.com`.
pub struct WebAppRules;

impl WebAppRules {
    fn check(app: &v1::WebApp) -> Result<Warnings, Denial> {
        let mut causes = Vec::new();
        let replicas = app.spec.replicas.unwrap_or(1);
        if !(1..=10).contains(&replicas) {
            causes.push(FieldCause::invalid(
                "spec.replicas",
                replicas,
                "must be between 1 and 10",
            ));
        }
        match app.spec.image.as_deref() {
            None => causes.push(FieldCause::required("spec.image", "")),
            Some(i) if !i.starts_with("registry.example.com/") => causes.push(FieldCause::invalid(
                "spec.image",
                i,
                "must come from registry.example.com",
            )),
            Some(_) => {}
        }
        if !causes.is_empty() {
            return Err(Denial::invalid(causes));
        }
        let latest = app
            .spec
            .image
            .as_deref()
            .is_some_and(|i| i.ends_with(":latest"));
        Ok(latest
            .then(|| "the latest tag moves: pin a version".to_owned())
            .into_iter()
            .collect())
    }
}

impl Validator<v1::WebApp> for WebAppRules {
    async fn validate_create(
        &self,
        app: &v1::WebApp,
        _: &AdmissionRequest,
    ) -> Result<Warnings, Denial> {
        Self::check(app)
    }

    async fn validate_update(
        &self,
        _: &v1::WebApp,
        app: &v1::WebApp,
        _: &AdmissionRequest,
    ) -> Result<Warnings, Denial> {
        Self::check(app)
    }
}

/// v1 ⇄ v2.
pub fn conversion() -> Conversion {
    Conversion::new()
        .convert(|a: v1::WebApp| {
            let spec = v2::WebAppSpec {
                container: v2::Container {
                    image: a.spec.image.unwrap_or_default(),
                },
                replicas: a.spec.replicas.unwrap_or(1),
            };
            Ok(v2::WebApp {
                metadata: a.metadata,
                spec,
            })
        })
        .convert(|a: v2::WebApp| {
            let spec = v1::WebAppSpec {
                image: Some(a.spec.container.image),
                replicas: Some(a.spec.replicas),
            };
            Ok(v1::WebApp {
                metadata: a.metadata,
                spec,
            })
        })
}

/// The webhooks at controller-runtime's conventional paths.
pub fn webhooks(certs: Arc<CertWatcher>) -> WebhookServer {
    WebhookServer::new(certs)
        .defaulting("/mutate-example-kcontrol-dev-v1-webapp", default_webapp)
        .validating("/validate-example-kcontrol-dev-v1-webapp", WebAppRules)
        .conversion("/convert", conversion())
}

fn client_config(path: &str) -> Value {
    json!({"service": {"namespace": "webapp-system", "name": "webapp-webhooks", "path": path}})
}

/// The CRD (conversion by webhook) and the two webhook configurations:
/// what `config/` holds in a kubebuilder project.
pub fn manifests() -> [(&'static str, Value); 3] {
    let schema =
        |spec: Value| json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}});
    let v1 = schema(
        json!({"type": "object", "properties": {"image": {"type": "string"}, "replicas": {"type": "integer"}}}),
    );
    let v2 = schema(
        json!({"type": "object", "properties": {"replicas": {"type": "integer"},
        "container": {"type": "object", "properties": {"image": {"type": "string"}}}}}),
    );
    let rule = json!([{"operations": ["CREATE", "UPDATE"], "apiGroups": ["example.kcontrol.dev"], "apiVersions": ["v1"], "resources": ["webapps"]}]);
    let hook = |name: &str, path: &str| {
        json!({"name": name, "clientConfig": client_config(path), "rules": rule,
        "sideEffects": "None", "admissionReviewVersions": ["v1"]})
    };
    [
        (
            "customresourcedefinitions.apiextensions.k8s.io",
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "webapps.example.kcontrol.dev"},
            "spec": {"group": "example.kcontrol.dev", "scope": "Namespaced", "names": {"kind": "WebApp", "plural": "webapps"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": v1}, {"name": "v2", "served": true, "storage": false, "schema": v2}],
                "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": client_config("/convert"), "conversionReviewVersions": ["v1"]}}}}),
        ),
        (
            "mutatingwebhookconfigurations.admissionregistration.k8s.io",
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "webapp-defaulting"}, "webhooks": [hook("mwebapp.example.kcontrol.dev", "/mutate-example-kcontrol-dev-v1-webapp")]}),
        ),
        (
            "validatingwebhookconfigurations.admissionregistration.k8s.io",
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "webapp-validation"}, "webhooks": [hook("vwebapp.example.kcontrol.dev", "/validate-example-kcontrol-dev-v1-webapp")]}),
        ),
    ]
}

/// A Manager running a WebApp controller and serving the webhooks.
pub async fn manager(
    client: Client,
    certs: Arc<CertWatcher>,
    addr: std::net::SocketAddr,
) -> Result<(Manager, std::net::SocketAddr), Box<dyn std::error::Error>> {
    let mut manager = Manager::new(client);
    let bound = manager.serve_webhooks(webhooks(certs), addr).await?;
    let webapps = manager.controller::<v1::WebApp>();
    manager.add(
        webapps,
        |app: Arc<v1::WebApp>, ctx: Context<v1::WebApp>| async move {
            tracing::info!(key = ctx.key(), replicas = ?app.spec.replicas, "reconciled");
            Ok::<_, std::io::Error>(Action::Done)
        },
    );
    Ok((manager, bound))
}

/// The webhooks running for `server`: certificates in `dir`, the Service
/// registered, the manifests installed with their CA bundle, the Manager
/// running until `stop`.
pub async fn start(
    server: &TestServer,
    dir: &std::path::Path,
    stop: CancellationToken,
) -> Result<
    (
        Client,
        tokio::task::JoinHandle<Result<(), kcontrol_controller::ManagerError>>,
    ),
    Box<dyn std::error::Error>,
> {
    let client = Client::from_kubeconfig_yaml(&server.kubeconfig())?;
    let certs = DevCertificates::for_service("webapp-system", "webapp-webhooks")?;
    certs.write_to(dir)?;
    let (manager, addr) = manager(
        client.clone(),
        CertWatcher::from_dir(dir)?,
        "127.0.0.1:0".parse()?,
    )
    .await?;
    server.register_service("webapp-system", "webapp-webhooks", addr);
    for (resource, object) in manifests() {
        server.objects().create(resource, "", object)?;
    }
    patch_ca_bundle(
        &client,
        &certs.ca_pem,
        &["webapp-defaulting"],
        &["webapp-validation"],
        &["webapps.example.kcontrol.dev"],
    )
    .await?;
    Ok((client, tokio::spawn(manager.run(stop))))
}

/// The demo on an in-process API server; `Ok` once every step behaved.
pub async fn embedded() -> Result<(), Box<dyn std::error::Error>> {
    let server = TestServer::start().await?;
    let dir = std::env::temp_dir().join(format!("kcontrol-webhook-example-{}", std::process::id()));
    let stop = CancellationToken::new();
    let (client, running) = start(&server, &dir, stop.clone()).await?;
    let apps: Api<v1::WebApp> = Api::namespaced(client.clone(), "default");
    let spec = v1::WebAppSpec {
        image: Some("registry.example.com/shop".into()),
        replicas: None,
    };
    let shop = apps
        .create(&PostParams::default(), &v1::WebApp::new("shop", spec))
        .await?;
    tracing::info!(spec = ?shop.spec, "created with defaults");
    if shop.spec.replicas != Some(1)
        || shop.spec.image.as_deref() != Some("registry.example.com/shop:latest")
    {
        return Err(format!("the defaults did not appear: {:?}", shop.spec).into());
    }
    let bad = v1::WebAppSpec {
        image: Some("docker.io/evil".into()),
        replicas: Some(50),
    };
    match apps
        .create(&PostParams::default(), &v1::WebApp::new("bad", bad))
        .await
    {
        Err(e) => tracing::info!(error = %e, "refused as it should be"),
        Ok(_) => return Err("a bad WebApp was admitted".into()),
    }
    let at_v2 = Api::<v2::WebApp>::namespaced(client, "default")
        .get("shop")
        .await?;
    tracing::info!(spec = ?at_v2.spec, "read at v2");
    if at_v2.spec.container.image != "registry.example.com/shop:latest" {
        return Err(format!("not converted: {:?}", at_v2.spec).into());
    }
    stop.cancel();
    running.await??;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    if std::env::args().any(|a| a == "--embedded") {
        return embedded().await;
    }
    let dir = std::env::args()
        .skip_while(|a| a != "--cert-dir")
        .nth(1)
        .unwrap_or_else(|| "/tmp/k8s-webhook-server/serving-certs".into());
    let client = Client::new(Config::infer()?)?;
    let (manager, _) =
        manager(client, CertWatcher::from_dir(dir)?, "0.0.0.0:9443".parse()?).await?;
    manager.run(signals::shutdown_on_signal()?).await?;
    Ok(())
}
