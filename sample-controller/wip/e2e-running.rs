
/// A controller running in-process, watching the test's namespace only.
pub struct RunningController {
    /// The controller (its caches and counters).
    pub controller: Arc<sample_controller::controller::Controller>,
    shutdown: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl RunningController {
    /// Starts a controller with `workers` workers and waits until its caches
    /// have synced.
    pub async fn start(env: &Env, workers: usize) -> Self {
        let options = sample_controller::controller::ControllerOptions {
            workers,
            namespace: Some(env.namespace.clone()),
            ..Default::default()
        };
        let controller = Arc::new(
            sample_controller::controller::Controller::new(env.client.clone(), options)
                .unwrap_or_else(|e| panic!("starting the controller: {e}")),
        );
        let shutdown = tokio_util::sync::CancellationToken::new();
        let task = {
            let controller = Arc::clone(&controller);
            let shutdown = shutdown.clone();
            tokio::spawn(async move { controller.run(shutdown).await })
        };
        let running = Arc::clone(&controller);
        eventually("the controller's caches to sync", env.patience(Duration::from_secs(30)), || {
            let running = Arc::clone(&running);
            async move { running.is_running().then_some(()) }
        })
        .await;
        Self {
            controller,
            shutdown,
            task,
        }
    }

    /// Stops it gracefully and waits until it has (informers stopped,
    /// queue drained, events flushed).
    pub async fn stop(self) {
        self.shutdown.cancel();
        match tokio::time::timeout(Duration::from_secs(60), self.task).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("the controller task failed: {e}"),
            Err(_) => panic!("the controller did not stop within 60 s"),
        }
    }
}
