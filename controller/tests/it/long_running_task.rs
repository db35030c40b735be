//! The `long_running_task` example, as a test: its embedded scenario ends
//! with each task in the phase it should, and one worker keeps several
//! tasks in progress at once (the work never holds a worker).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code, unreachable_pub, missing_docs)]
#[path = "../../examples/long_running_task.rs"]
mod example;

use crate::support;

use example::{Task, TaskSpec, Tasks};
use kcontrol_client::Client;
use kcontrol_controller::Controller;
use kcontrol_testserver::TestServer;
use tokio_util::sync::CancellationToken;

use support::{eventually, DEADLINE};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_ends_every_task_in_its_phase() {
    example::embedded().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_keeps_every_task_in_progress_at_once() {
    let server = TestServer::start().await.unwrap();
    server
        .objects()
        .create(
            "customresourcedefinitions.apiextensions.k8s.io",
            "",
            example::crd(),
        )
        .unwrap();
    let names = ["a", "b", "c"];
    for name in names {
        // long enough that all three must overlap unless a worker waits
        let task = Task::new(
            name,
            TaskSpec {
                steps: 60,
                fail: false,
            },
        );
        server
            .objects()
            .create(
                "tasks.example.kcontrol.dev",
                "default",
                serde_json::to_value(task).unwrap(),
            )
            .unwrap();
    }
    let client = Client::from_kubeconfig_yaml(&server.kubeconfig()).unwrap();
    let shutdown = CancellationToken::new();
    let controller = Controller::new(client).for_resource::<Task>().workers(1);
    let run = tokio::spawn(controller.run(Tasks::default(), shutdown.clone()));
    eventually("all three in progress together", async || {
        example::phases(&server, &names) == ["InProgress"; 3]
    })
    .await;
    eventually("all three completed", async || {
        example::phases(&server, &names) == ["Completed"; 3]
    })
    .await;
    shutdown.cancel();
    tokio::time::timeout(DEADLINE, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
