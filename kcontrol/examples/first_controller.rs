//! Your first controller: it keeps an annotation on every ConfigMap saying
//! how many data keys it holds, the client-go way (a shared informer whose
//! handler enqueues keys, a rate-limited work queue, two workers).
//!
//! It runs against the in-process test API server, so no cluster is needed:
//!
//! ```text
//! cargo run -p kcontrol --features testserver --example first_controller
//! ```
//!
//! Against a cluster, build the client from your kubeconfig instead
//! (`Client::new(Config::infer()?)?`: `infer` reads the kubeconfig, else the
//! in-cluster service account, synchronously) and leave the test server out.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kcontrol::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol::prelude::*;
use kcontrol::testserver::TestServer;

/// The annotation this controller keeps.
const ANNOTATION: &str = "example.kcontrol.dev/keys";

type Error = Box<dyn std::error::Error + Send + Sync>;

// An example prints its result.
#[allow(clippy::print_stdout)]
#[tokio::main(crate = "kcontrol::tokio")]
async fn main() -> Result<(), Error> {
    let server = TestServer::start().await?;
    let client = Client::from_kubeconfig_yaml(&server.kubeconfig())?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for (name, keys) in [("small", 1), ("medium", 3), ("large", 7)] {
        api.create(&PostParams::default(), &config_map(name, keys))
            .await?;
    }

    // Informer → handler → queue.
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
    let factory = InformerFactory::builder(client)
        .namespace("default")
        .build();
    let informer = factory.informer::<ConfigMap>();
    let (on_add, on_update) = (queue.clone(), queue.clone());
    let registration = informer.add_event_handler(
        ResourceEventHandlerFuncs::new()
            .add_func(move |cm: &Arc<ConfigMap>, _initial| enqueue(&on_add, cm))
            .update_func(move |_old, new| enqueue(&on_update, new)),
    )?;
    let shutdown = CancellationToken::new();
    factory.start(&shutdown)?;
    wait_for_cache_sync(
        &shutdown,
        Some(Duration::from_secs(30)),
        &[&factory, &registration],
    )
    .await?;

    // Workers: get → reconcile → forget on success, requeue with backoff on
    // error → done.
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (queue, lister, api) = (queue.clone(), informer.lister(), api.clone());
            tokio::spawn(async move {
                while let Some(key) = queue.get_async().await {
                    match reconcile(&lister, &api, &key).await {
                        Ok(()) => queue.forget(&key),
                        Err(e) => {
                            eprintln!("{key}: {e}; retrying");
                            queue.add_rate_limited(key.clone());
                        }
                    }
                    queue.done(&key);
                }
            })
        })
        .collect();

    // Wait until the cache shows every ConfigMap annotated, then stop.
    let lister = informer.lister();
    tokio::time::timeout(Duration::from_secs(30), async {
        while !lister
            .list()
            .iter()
            .all(|cm| annotation(cm) == Some(key_count(cm)))
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await?;
    for cm in lister.list() {
        println!(
            "{}: {ANNOTATION}={}",
            cm.name().unwrap_or_default(),
            key_count(&cm)
        );
    }
    queue.shut_down_with_drain_async().await;
    for worker in workers {
        worker.await?;
    }
    shutdown.cancel();
    factory.shutdown().await;
    server.shutdown().await;
    Ok(())
}

/// Puts the object's `namespace/name` on the queue.
fn enqueue(queue: &RateLimitingQueue<String>, cm: &ConfigMap) {
    if let Ok(key) = meta_namespace_key(cm) {
        queue.add(key);
    }
}

/// Brings one ConfigMap's annotation up to date: reads the cache, writes
/// only when something differs.
async fn reconcile(
    lister: &Lister<ConfigMap>,
    api: &Api<ConfigMap>,
    key: &str,
) -> Result<(), Error> {
    let Some((_, name)) = key.split_once('/') else {
        return Ok(()); // not a key this controller made
    };
    let Some(cm) = lister.namespaced("default").get(name) else {
        return Ok(()); // deleted meanwhile: nothing to do
    };
    let want = key_count(&cm);
    if annotation(&cm) == Some(want) {
        return Ok(());
    }
    let patch =
        kcontrol::serde_json::json!({"metadata": {"annotations": {ANNOTATION: want.to_string()}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

fn key_count(cm: &ConfigMap) -> usize {
    cm.data.as_ref().map_or(0, BTreeMap::len)
}

fn annotation(cm: &ConfigMap) -> Option<usize> {
    cm.metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION)?
        .parse()
        .ok()
}

fn config_map(name: &str, keys: usize) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_owned());
    cm.data = Some(
        (0..keys)
            .map(|i| (format!("key{i}"), i.to_string()))
            .collect(),
    );
    cm
}
