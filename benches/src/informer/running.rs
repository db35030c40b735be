//! An informer running on a task of its own for the length of one
//! measurement, stopped when the measurement ends (or fails).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::serde::de::DeserializeOwned;
use kcontrol_indexer::KubeObject;
use kcontrol_informer::{HandlerRegistration, SharedIndexInformer};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::wait_until;

/// A running informer; dropping it asks the informer to stop.
pub struct Running {
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

impl Running {
    /// Spawns `informer.run` on the current runtime.
    pub fn start<K: KubeObject + DeserializeOwned>(informer: &Arc<SharedIndexInformer<K>>) -> Self {
        let shutdown = CancellationToken::new();
        let task = tokio::spawn({
            let (informer, shutdown) = (Arc::clone(informer), shutdown.clone());
            async move {
                if let Err(e) = informer.run(shutdown).await {
                    eprintln!("informer not run: {e}");
                }
            }
        });
        Self { shutdown, task }
    }

    /// Spawns `informer.run` and waits, for at most `limit`, until `synced`
    /// has synced.
    pub async fn synced<K: KubeObject + DeserializeOwned>(
        informer: &Arc<SharedIndexInformer<K>>,
        synced: &HandlerRegistration,
        limit: Duration,
    ) -> Result<Self, String> {
        let running = Self::start(informer);
        wait_until("initial sync", limit, || synced.has_synced()).await?;
        Ok(running)
    }

    /// Stops the informer and waits for its run to return.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        let _ = (&mut self.task).await;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
