//! Lean caches: the same ConfigMaps cached three ways, each chosen in one
//! line — full k8s-openapi objects, a lean type with compact metadata and
//! only the fields read, and metadata only.
//!
//! ```text
//! cargo run -p kcontrol --features testserver --example lean_informer
//! ```

use std::time::Duration;

use kcontrol::indexer::compact::{CompactConfigMap, CompactMap};
use kcontrol::indexer::labels::Selector;
use kcontrol::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol::lean_resource;
use kcontrol::prelude::*;
use kcontrol::serde_json;
use kcontrol::testserver::TestServer;

lean_resource! {
    /// A ConfigMap as this program reads it: metadata and `data`, nothing else.
    pub struct DataOnly {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        scope: Namespaced,
        fields {
            /// `data`.
            data: CompactMap = "data",
        }
    }
}

type Error = Box<dyn std::error::Error + Send + Sync>;

// An example prints its result.
#[allow(clippy::print_stdout)]
#[tokio::main(crate = "kcontrol::tokio")]
async fn main() -> Result<(), Error> {
    let server = TestServer::start().await?;
    let client = Client::from_kubeconfig_yaml(&server.kubeconfig())?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for (name, app) in [("a", "web"), ("b", "web"), ("c", "db")] {
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"app": app}},
            "data": {"greeting": format!("hello from {name}")},
        }))?;
        api.create(&PostParams::default(), &cm).await?;
    }

    let factory = InformerFactory::builder(client)
        .namespace("default")
        .build();
    let full = factory.informer::<ConfigMap>(); // k8s-openapi objects
    let compact = factory.informer::<CompactConfigMap>(); // compact, every ConfigMap field
    let lean = factory.informer::<DataOnly>(); // compact, only what is read
    let meta = factory.metadata_informer::<ConfigMap>(); // metadata only
    let shutdown = CancellationToken::new();
    factory.start(&shutdown)?;
    factory
        .wait_for_cache_sync(&shutdown, Some(Duration::from_secs(30)))
        .await?;

    let web = Selector::parse("app=web")?;
    for cm in lean.lister().list_by_selector(&web) {
        let name = cm.metadata.name().unwrap_or_default();
        println!("{name}: {}", cm.data.get("greeting").unwrap_or_default());
    }
    let c = compact.lister().get("default", "c").ok_or("c not cached")?;
    println!("c is labelled app={}", c.metadata.labels["app"].to_owned());
    println!(
        "cached: {} full, {} compact, {} lean, {} metadata-only",
        full.store().len(),
        compact.store().len(),
        lean.store().len(),
        meta.store().len()
    );
    shutdown.cancel();
    factory.shutdown().await;
    Ok(())
}
