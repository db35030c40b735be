//! Metrics by default (CT22): a `Manager` and a standalone controller put
//! every family in their registry without a line of metrics code — the
//! queue's (`workqueue_*`, named as the controller), the reconciles'
//! (`controller_reconcile_*`), the client's (`rest_client_*`), the
//! informers' (`reflector_*`, `informer_*`) — and serve it at `/metrics`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcontrol_client::{Api, PostParams};
use kcontrol_controller::{Action, Context, Controller, ControllerError, Manager, SharedRegistry};
use kcontrol_workqueue::ItemExponentialFailureRateLimiter;
use tokio_util::sync::CancellationToken;

use support::{eventually, get, try_eventually, wait_for_status};

/// The families every controller exports, for `name`.
fn families(name: &str) -> Vec<String> {
    vec![
        format!("workqueue_adds_total{{name=\"{name}\"}}"),
        format!("workqueue_depth{{name=\"{name}\"}}"),
        format!("workqueue_work_duration_seconds_count{{name=\"{name}\"}}"),
        format!("controller_reconcile_total{{controller=\"{name}\",result=\"success\"}}"),
        format!("controller_active_workers{{controller=\"{name}\"}}"),
        "rest_client_requests_total{".to_owned(),
        "rest_client_request_duration_seconds_count{".to_owned(),
        "reflector_lists_total{".to_owned(),
        "reflector_watches_total{".to_owned(),
        "informer_notifications_total{".to_owned(),
        "informer_objects{".to_owned(),
    ]
}

fn missing(text: &str, name: &str) -> Vec<String> {
    families(name)
        .into_iter()
        .filter(|f| !text.contains(f.as_str()))
        .collect()
}

async fn noop(_: Arc<ConfigMap>, _: Context<ConfigMap>) -> Result<Action, std::io::Error> {
    Ok(Action::Done)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct22_a_manager_serves_every_family_without_metrics_code() {
    let (server, client) = support::server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("a".into());
    api.create(&PostParams::default(), &cm).await.unwrap();

    let mut manager = Manager::new(client);
    let configmaps = manager
        .controller::<ConfigMap>()
        .owns::<Secret>()
        .name("cms");
    manager.add(configmaps, noop);
    let addr = manager
        .serve_health("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    assert_eq!(manager.health_address(), Some(addr));
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run(shutdown.clone()));
    wait_for_status(addr, "/readyz", 200).await;
    let mut last = String::new();
    let every_family = try_eventually("every family in /metrics", async || {
        let (code, text) = get(addr, "/metrics").await;
        assert_eq!(code, 200);
        last = text;
        missing(&last, "cms").is_empty()
    })
    .await;
    assert!(
        every_family.is_ok(),
        "missing {:?} in\n{last}",
        missing(&last, "cms")
    );
    shutdown.cancel();
    run.await.unwrap().unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ct22_a_standalone_controller_fills_a_registry_and_serves_it() {
    let (server, client) = support::server().await;
    // into a registry shared with metrics of one's own
    let registry = SharedRegistry::new();
    let controller = Controller::new(client.clone())
        .for_resource::<ConfigMap>()
        .name("standalone")
        .rate_limiter(ItemExponentialFailureRateLimiter::new(
            std::time::Duration::from_millis(1),
            std::time::Duration::from_secs(1),
        ))
        .registry(registry.clone());
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(controller.run(noop, shutdown.clone()));
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("b".into());
    api.create(&PostParams::default(), &cm).await.unwrap();
    eventually("every family in the registry", async || {
        missing(&registry.encode().unwrap(), "standalone").is_empty()
    })
    .await;
    shutdown.cancel();
    run.await.unwrap().unwrap();

    // served while it runs: a port is picked, and picked again if taken
    let served = loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let controller = Controller::new(client.clone())
            .for_resource::<ConfigMap>()
            .name("served")
            .serve_health(port);
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(controller.run(noop, shutdown.clone()));
        // a bind failure ends the run at once; otherwise it serves
        tokio::select! {
            ended = run => match ended.unwrap() {
                Err(ControllerError::Health { .. }) => continue,
                other => panic!("the controller stopped: {other:?}"),
            },
            () = serving(port) => break (port, shutdown),
        }
    };
    let (addr, shutdown) = served;
    let (code, text) = get(addr, "/metrics").await;
    assert_eq!(code, 200);
    assert!(
        text.contains("workqueue_adds_total{name=\"served\"}"),
        "{text}"
    );
    shutdown.cancel();
    not_ready(addr).await;
    server.shutdown().await;
}

/// Waits until `addr` accepts connections (the controller binds it once it
/// runs) and answers `/readyz` with 200.
async fn serving(addr: std::net::SocketAddr) {
    eventually(format!("{addr} to be bound"), async || {
        tokio::net::TcpStream::connect(addr).await.is_ok()
    })
    .await;
    wait_for_status(addr, "/readyz", 200).await;
}

/// Waits until `addr` answers `/readyz` with 503 or, its server stopped,
/// no longer answers.
async fn not_ready(addr: std::net::SocketAddr) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    eventually(format!("{addr} to stop answering ready"), async || {
        let answer = async {
            let mut stream = tokio::net::TcpStream::connect(addr).await?;
            let request = "GET /readyz HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
            stream.write_all(request.as_bytes()).await?;
            let mut response = String::new();
            stream.read_to_string(&mut response).await?;
            Ok::<_, std::io::Error>(response)
        };
        match answer.await {
            Err(_) => true, // the server stopped
            Ok(response) => response.get(9..12) == Some("503"),
        }
    })
    .await;
}
