//! The factory hands every reflector and informer it builds the metrics of
//! the registry given to `InformerFactoryBuilder::registry` (feature
//! `prometheus`): lists, watch events and cache sizes per informer.

use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_informer::{InformerFactory, ResourceEventHandlerFuncs};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::support::*;

fn encode(registry: &parking_lot::Mutex<Registry>) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry.lock()).unwrap();
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_factory_reports_every_informer_to_the_registry() {
    let server = server().await;
    for i in 0..3 {
        server
            .objects()
            .create("configmaps", "default", cm(&format!("c{i}"), "0"))
            .unwrap();
    }
    let registry = parking_lot::Mutex::new(Registry::default());
    let factory = InformerFactory::builder(client(&server))
        .registry(&mut registry.lock())
        .build();
    let cms = factory.informer::<ConfigMap>();
    let registration = cms
        .add_event_handler(ResourceEventHandlerFuncs::new().add_func(|_, _| {}))
        .unwrap();
    let stop = CancellationToken::new();
    factory.start(&stop).unwrap();
    factory
        .wait_for_cache_sync(&stop, Some(DEADLINE))
        .await
        .unwrap();
    let name = r#"name="configmaps.v1""#;
    let text = encode(&registry);
    assert!(
        text.contains(&format!("reflector_lists_total{{{name}}} 1")),
        "{text}"
    );
    assert!(
        text.contains(&format!("informer_objects{{{name}}} 3")),
        "{text}"
    );
    assert!(
        text.contains(&format!("informer_handlers{{{name}}} 1")),
        "{text}"
    );

    // a watch event moves the figures
    server
        .objects()
        .create("configmaps", "default", cm("c3", "0"))
        .unwrap();
    // the handler's initial adds are delivered on its own task, so its
    // registration syncs some time after the cache did
    let counted = try_eventually(
        "the ADDED event and 4 objects counted, the handler synced",
        async || {
            let text = encode(&registry);
            text.contains(&format!(
                "reflector_watch_events_total{{{name},type=\"ADDED\"}} 1"
            )) && text.contains(&format!("informer_objects{{{name}}} 4"))
                && registration.has_synced()
        },
    )
    .await;
    assert!(counted.is_ok(), "{}", encode(&registry));
    stop.cancel();
    factory.shutdown().await;
    server.shutdown().await;
}
