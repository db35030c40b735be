//! An operator in a page. A `WebApp` custom resource — its CRD generated from the Rust types
//! below — owns a Deployment and a Service; its status holds the ready replicas, a `Ready`
//! condition and `observedGeneration`; a finalizer records an Event, awaited, before the object
//! goes; metrics, health and the usual flags come with kcontrol's `Args`. At steady state a
//! reconcile writes nothing. It imports `kcontrol` alone.
//!
//! ```text
//! cargo run --release -p kcontrol-controller --example operator -- --embedded  # on a test server
//! cargo run --release -p kcontrol-controller --example operator -- --print-crd # the CRD as YAML
//! cargo run --release -p kcontrol-controller --example operator -- --help      # on a cluster
//! ```

use std::{sync::Arc, time::Duration};

use kcontrol::k8s_openapi::api::{apps::v1::Deployment, core::v1::Service};
use kcontrol::prelude::*;
use kcontrol::serde_json::{from_value, json};
use kcontrol::testserver::TestServer;

/// A web application: an image, some replicas, a Service in front.
#[resource(
    group = "demo.kcontrol.dev",
    version = "v1",
    kind = "WebApp",
    namespaced,
    shortname = "web",
    status = "WebAppStatus",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    )
)]
pub struct WebAppSpec {
    /// The container image.
    pub image: String,
    /// How many Pods run it.
    #[schemars(range(min = 0, max = 100))]
    pub replicas: i32,
    /// The port it listens on, which the Service forwards port 80 to.
    pub port: i32,
}

/// What the operator last saw of a `WebApp`.
#[schema]
#[derive(Default)]
#[serde(rename_all = "camelCase")]
pub struct WebAppStatus {
    /// Pods of the current spec that are ready.
    pub ready_replicas: i32,
    /// The `metadata.generation` this status describes.
    pub observed_generation: Option<i64>,
    /// `Ready`: every replica of the current spec is ready.
    pub conditions: Vec<Condition>,
}

/// The operator's name: its field manager, event source, Lease and queue.
pub const NAME: &str = "webapp-operator";
const FINALIZER: &str = "demo.kcontrol.dev/cleanup";
const GONE: &str = "deleted: its Deployment and Service go with it";
type Error = FinalizerError<kcontrol::Error>;

/// Brings a `WebApp`'s Deployment, Service and status in line with it, under the finalizer.
pub async fn reconcile(app: Arc<WebApp>, ctx: Context<WebApp>) -> Result<Action, Error> {
    let api = Api::namespaced(ctx.client().clone(), app.namespace().unwrap_or_default());
    finalizer(&api, FINALIZER, app, |event| async move {
        match event {
            FinalizerEvent::Apply(app) => apply(&app, &ctx).await,
            FinalizerEvent::Cleanup(app) => {
                let recorder = ctx.recorder(); // written before the finalizer goes:
                let published = recorder.publish(&*app, EventType::Normal, "Deleting", GONE);
                Ok(published.await.map(|()| Action::Done)?)
            }
        }
    })
    .await
}

async fn apply(app: &WebApp, ctx: &Context<WebApp>) -> kcontrol::Result<Action> {
    let written = ctx.apply_owned(app, deployment(app)?).await? != Operation::Unchanged;
    ctx.apply_owned(app, service(app)?).await?;
    let cached = ctx.cached::<Deployment>(app.name().unwrap_or_default());
    let ready = ready_replicas(cached.as_deref(), written).unwrap_or(0);
    let all = ready >= app.spec.replicas;
    let reason = if all { "AllReady" } else { "NotReady" };
    let message = format!("{ready}/{} replicas ready", app.spec.replicas);
    let condition = new_condition(app, "Ready", all.into(), reason, message);
    let mut status = app.status.clone().unwrap_or_default();
    status.ready_replicas = ready;
    status.observed_generation = app.meta().generation;
    set_condition(&mut status.conditions, condition);
    ctx.write_status(app, &status).await?; // no write when nothing changed
    Ok(Action::Done)
}

/// The ready replicas of a Deployment whose status describes its spec (none just after a write).
fn ready_replicas(deployment: Option<&Deployment>, written: bool) -> Option<i32> {
    let status = deployment?.status.as_ref().filter(|_| !written)?;
    let current = status.observed_generation == deployment?.metadata.generation;
    current.then_some(status.ready_replicas?)
}

fn deployment(app: &WebApp) -> kcontrol::Result<Deployment> {
    let labels = json!({"app.kubernetes.io/name": app.name()});
    let container = json!({"name": "web", "image": app.spec.image,
        "ports": [{"containerPort": app.spec.port}]});
    Ok(from_value(json!({
        "metadata": {"name": app.name(), "labels": labels},
        "spec": {"replicas": app.spec.replicas, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}},
    }))?)
}

fn service(app: &WebApp) -> kcontrol::Result<Service> {
    Ok(from_value(json!({
        "metadata": {"name": app.name()},
        "spec": {"selector": {"app.kubernetes.io/name": app.name()},
            "ports": [{"port": 80, "targetPort": app.spec.port}]},
    }))?)
}

/// The operator: `WebApp`s, and the Deployments and Services they own.
pub async fn run(mut manager: Manager, shutdown: CancellationToken) -> kcontrol::Result<()> {
    let webapps = manager.controller::<WebApp>().name(NAME); // its queue, metrics, Events
    manager.add(webapps.owns::<Deployment>().owns::<Service>(), reconcile);
    Ok(manager.run(shutdown).await?)
}

/// The command line: kcontrol's operator flags, and two of this operator's own.
#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
    /// Print the WebApp CRD as YAML and exit.
    #[arg(long)]
    print_crd: bool,
    /// Run on an in-process API server until two WebApps are ready, then exit.
    #[arg(long)]
    embedded: bool,
}

#[allow(clippy::print_stdout)] // `--print-crd` prints the CRD
#[tokio::main(crate = "kcontrol::tokio")]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let cli = <Cli as clap::Parser>::parse();
    if cli.print_crd {
        print!("{}", crd_yaml::<WebApp>()?);
        return Ok(());
    }
    if cli.embedded {
        return embedded(&cli.args).await;
    }
    let manager = cli.args.manager(NAME).await?;
    Ok(run(manager, shutdown_on_signal()?).await?)
}

/// Whether `app` is ready for its current spec.
pub fn is_ready(app: &WebApp) -> bool {
    let status = app.status.clone().unwrap_or_default();
    status.observed_generation == app.meta().generation
        && is_condition_true(&status.conditions, "Ready")
}

/// The demo: the CRD installed from the type on an in-process API server, two `WebApp`s created,
/// the operator run until both are ready.
pub async fn embedded(args: &Args) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let server = TestServer::start().await?;
    let client = Client::from_kubeconfig_yaml(&server.kubeconfig())?;
    install_crd::<WebApp>(&client, NAME, Duration::from_secs(30)).await?;
    let api: Api<WebApp> = Api::namespaced(client.clone(), "default");
    for (name, replicas) in [("blog", 2), ("shop", 3)] {
        let spec = json!({"image": "nginx:1.27", "replicas": replicas, "port": 8080});
        let app = WebApp::new(name, from_value(spec)?);
        api.create(&PostParams::default(), &app).await?;
    }
    let shutdown = CancellationToken::new();
    let operator = tokio::spawn(run(args.manager_on(client, NAME).await?, shutdown.clone()));
    let all = Default::default();
    let converged = async {
        while !api.list(&all).await?.items.iter().all(is_ready) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok::<_, kcontrol::client::Error>(())
    };
    tokio::time::timeout(Duration::from_secs(60), converged).await??;
    eprintln!("2 WebApps ready, each with its Deployment and Service");
    shutdown.cancel();
    operator.await??;
    server.shutdown().await;
    Ok(())
}
