//! For each ConfigMap labelled `kcontrol.dev/secret=true`, keep an owned Secret of its name and
//! data. `-- --embedded`: an in-process API server, exit 0 once converged; else the kubeconfig's.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::ByteString;
use kcontrol_client::{Api, Client, Config, Error as ApiError, PostParams};
use kcontrol_controller::{owner, signals, Action, Context, Controller};
use kcontrol_testserver::TestServer;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const LABEL: &str = "kcontrol.dev/secret";

/// The ConfigMap's data as Secret data.
pub fn secret_data(cm: &ConfigMap) -> BTreeMap<String, ByteString> {
    let bytes = |(k, v): (&String, &String)| (k.clone(), ByteString(v.clone().into_bytes()));
    cm.data.iter().flatten().map(bytes).collect()
}

/// Creates the ConfigMap's Secret, or brings its data back in line.
pub async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<ConfigMap>) -> Result<Action, ApiError> {
    let ns = cm.metadata.namespace.as_deref().unwrap_or("default");
    let name = cm.metadata.name.as_deref().unwrap_or_default();
    let want = secret_data(&cm);
    let mut secret = match ctx.lister::<Secret>().and_then(|s| s.get(ns, name)) {
        Some(s) if !owner::is_controlled_by(s.as_ref(), cm.as_ref()) => {
            tracing::warn!(key = ctx.key(), "not our Secret: left alone");
            return Ok(Action::Done);
        }
        Some(s) if s.data.clone().unwrap_or_default() == want => return Ok(Action::Done),
        Some(s) => Secret::clone(&s),
        None => Secret::default(),
    };
    secret.data = Some(want);
    let api: Api<Secret> = Api::namespaced(ctx.client().clone(), ns);
    if secret.metadata.uid.is_some() {
        api.replace(name, &PostParams::default(), &secret).await?;
    } else {
        secret.metadata.name = Some(name.to_owned());
        secret.metadata.owner_references = Some(vec![owner::new_controller_ref(cm.as_ref())]);
        api.create(&PostParams::default(), &secret).await?;
    }
    Ok(Action::Done)
}

/// The controller: labelled ConfigMaps, and the Secrets they own.
pub fn controller(client: Client) -> Controller<ConfigMap> {
    let selector = format!("{LABEL}=true");
    let configmaps = Controller::new(client).for_resource::<ConfigMap>();
    configmaps.label_selector(selector).owns::<Secret>()
}

/// Whether each ConfigMap of `names` (in `default`) has its Secret, with its data.
pub fn converged(server: &TestServer, names: &[&str]) -> bool {
    let objects = server.objects();
    names.iter().all(|name| {
        let cm = objects.get_as::<ConfigMap>("default", name).ok().flatten();
        let secret = objects.get_as::<Secret>("default", name).ok().flatten();
        cm.zip(secret)
            .is_some_and(|(cm, s)| s.data.unwrap_or_default() == secret_data(&cm))
    })
}

/// A few ConfigMaps on an in-process API server; returns once every Secret matches.
pub async fn embedded() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let server = TestServer::start().await?;
    let names = ["alpha", "beta", "gamma"];
    for name in names {
        let cm =
            json!({"metadata": {"name": name, "labels": {LABEL: "true"}}, "data": {"n": name}});
        server.objects().create("configmaps", "default", cm)?;
    }
    let client = Client::new(Config::new(server.url().parse()?))?;
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(controller(client).run(reconcile, shutdown.clone()));
    let converging = async {
        while !converged(&server, &names) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), converging).await?;
    eprintln!("{} Secrets in sync with their ConfigMaps", names.len());
    shutdown.cancel();
    run.await??;
    server.shutdown().await;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    tracing_subscriber::fmt::init();
    if std::env::args().any(|arg| arg == "--embedded") {
        return embedded().await;
    }
    let client = Client::new(Config::infer()?)?;
    let shutdown = signals::shutdown_on_signal()?;
    Ok(controller(client).run(reconcile, shutdown).await?)
}
