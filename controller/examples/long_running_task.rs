//! A long-running task per `Task` object (`example.kcontrol.dev/v1`): its
//! status goes Pending → InProgress → Completed (or Failed) while the work
//! runs in a task of its own; the reconciler never waits for it, it polls
//! with `Action::RequeueAfter`, so two workers serve any number of tasks.
//! `-- --embedded`: an in-process API server, exit 0 once every task ended
//! as it should; else the kubeconfig's cluster (the Task CRD installed).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kcontrol_client::{Api, Client, Config, Error, Patch, PatchParams};
use kcontrol_controller::{signals, Action, Context, Controller, Reconciler};
use kcontrol_testserver::TestServer;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What to do: `steps` units of 50 ms of work, failing at the end if asked.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TaskSpec {
    /// Units of work.
    pub steps: u32,
    /// Whether the work fails at the end.
    #[serde(default)]
    pub fail: bool,
}

/// Where the task is.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TaskStatus {
    /// Pending, InProgress, Completed or Failed.
    pub phase: String,
    /// What the work said when it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

kcontrol_indexer::custom_resource! {
    /// A unit of long work.
    pub struct Task {
        group: "example.kcontrol.dev", version: "v1", plural: "tasks",
        scope: Namespaced, spec: TaskSpec, status: TaskStatus,
    }
}

/// The work of one task, running on its own tokio task.
async fn work(spec: TaskSpec) -> Result<String, String> {
    tokio::time::sleep(Duration::from_millis(50) * spec.steps).await;
    match spec.fail {
        true => Err(format!("failed after {} steps", spec.steps)),
        false => Ok(format!("{} steps done", spec.steps)),
    }
}

/// The reconciler: the running jobs by `namespace/name`.
#[derive(Default)]
pub struct Tasks(Mutex<HashMap<String, JoinHandle<Result<String, String>>>>);

async fn set_phase(
    ctx: &Context<Task>,
    task: &Task,
    phase: &str,
    message: Option<String>,
) -> Result<(), Error> {
    let api: Api<Task> = Api::namespaced(
        ctx.client().clone(),
        task.metadata.namespace.as_deref().unwrap_or("default"),
    );
    let patch = Patch::Merge(json!({"status": {"phase": phase, "message": message}}));
    let name = task.metadata.name.as_deref().unwrap_or_default();
    api.patch_status(name, &PatchParams::default(), &patch)
        .await
        .map(drop)
}

impl Reconciler<Task> for Tasks {
    type Error = Error;

    async fn reconcile(&self, task: Arc<Task>, ctx: Context<Task>) -> Result<Action, Error> {
        let poll = Action::RequeueAfter(Duration::from_millis(100));
        match task.status.as_ref().map_or("", |s| s.phase.as_str()) {
            "" => set_phase(&ctx, &task, "Pending", None)
                .await
                .map(|()| Action::Done),
            "Pending" => {
                let job = tokio::spawn(work(task.spec.clone()));
                self.0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(ctx.key().to_owned(), job);
                set_phase(&ctx, &task, "InProgress", None)
                    .await
                    .map(|()| poll)
            }
            "InProgress" => {
                let job = self
                    .0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(ctx.key());
                let Some(job) = job else {
                    // started by a controller that has gone: start it again
                    return set_phase(&ctx, &task, "Pending", None)
                        .await
                        .map(|()| Action::Done);
                };
                if !job.is_finished() {
                    self.0
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(ctx.key().to_owned(), job);
                    return Ok(poll);
                }
                let (phase, message) = match job.await {
                    Ok(Ok(done)) => ("Completed", done),
                    Ok(Err(failure)) => ("Failed", failure),
                    Err(panicked) => ("Failed", panicked.to_string()),
                };
                set_phase(&ctx, &task, phase, Some(message))
                    .await
                    .map(|()| Action::Done)
            }
            _ => Ok(Action::Done),
        }
    }
}

/// The Task CRD, with its status subresource.
pub fn crd() -> serde_json::Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "tasks.example.kcontrol.dev"},
        "spec": {"group": "example.kcontrol.dev", "scope": "Namespaced",
            "names": {"plural": "tasks", "singular": "task", "kind": "Task", "listKind": "TaskList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

/// The phase of each task of `names` (in `default`).
pub fn phases(server: &TestServer, names: &[&str]) -> Vec<String> {
    let phase = |n: &&str| {
        server
            .objects()
            .get_as::<Task>("default", n)
            .ok()
            .flatten()
            .and_then(|t| t.status)
            .map(|s| s.phase)
    };
    names.iter().map(|n| phase(n).unwrap_or_default()).collect()
}

/// Three tasks on an in-process API server, one failing; returns once all ended.
pub async fn embedded() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let server = TestServer::start().await?;
    server
        .objects()
        .create("customresourcedefinitions.apiextensions.k8s.io", "", crd())?;
    let names = ["build", "test", "deploy"];
    for (i, name) in names.iter().enumerate() {
        let spec = TaskSpec {
            steps: 2 + 2 * i as u32,
            fail: *name == "test",
        };
        server.objects().create(
            "tasks.example.kcontrol.dev",
            "default",
            serde_json::to_value(Task::new(name, spec))?,
        )?;
    }
    let client = Client::from_kubeconfig_yaml(&server.kubeconfig())?;
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(
        Controller::new(client)
            .for_resource::<Task>()
            .run(Tasks::default(), shutdown.clone()),
    );
    let want = ["Completed", "Failed", "Completed"];
    tokio::time::timeout(Duration::from_secs(60), async {
        while phases(&server, &names) != want {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await?;
    eprintln!("tasks ended: {:?}", phases(&server, &names));
    shutdown.cancel();
    run.await??;
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
    Ok(Controller::new(client)
        .for_resource::<Task>()
        .run(Tasks::default(), shutdown)
        .await?)
}
