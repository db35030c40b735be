//! Custom resources from Rust types, against the in-process API server:
//!
//! - `#[resource]` / `#[schema]` (kube-derive with kcontrol's crate paths):
//!   the CRD generated from a type holding every shape schemars emits is
//!   accepted, objects of the type round-trip, and the server validates
//!   objects against the generated schema (types, ranges, enums, nullable,
//!   int-or-string, maps, `oneOf` of a Rust enum with data, date-times);
//! - interop: a type written for kube-rs — `kube_derive::CustomResource`
//!   with kube's own crate paths, no kcontrol macro — works unchanged in
//!   kcontrol's `Api`, informers, listers, metadata informers and
//!   controllers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kcontrol::indexer::{ApiResource, DynamicObject, PartialObjectMetadata};
use kcontrol::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kcontrol::prelude::*;
use kcontrol::serde_json::{json, Value};
use kcontrol_testserver::TestServer;

const DEADLINE: Duration = Duration::from_secs(30);

/// A spec with every shape schemars emits for a structural schema.
#[resource(
    group = "shapes.kcontrol.dev",
    version = "v1",
    kind = "Shape",
    namespaced,
    status = "ShapeStatus",
    shortname = "sh",
    category = "all",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas"
    ),
    printcolumn(name = "Mode", type_ = "string", json_path = ".spec.mode")
)]
#[derive(PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ShapeSpec {
    /// Required string with a length limit.
    #[schemars(length(min = 1, max = 8))]
    pub title: String,
    /// int32.
    pub replicas: i32,
    /// uint32, nullable.
    pub size: Option<u32>,
    /// double, nullable.
    pub ratio: Option<f64>,
    /// A list.
    #[serde(default)]
    pub tags: Vec<String>,
    /// A map (additionalProperties).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// A unit enum (string enum).
    pub mode: Mode,
    /// int-or-string, nullable.
    pub port: Option<IntOrString>,
    /// A nested object, nullable.
    pub nested: Option<Nested>,
    /// An enum with data (`oneOf`).
    pub source: Option<Source>,
}

/// A unit enum.
#[schema]
#[derive(PartialEq, Default)]
pub enum Mode {
    /// Fast.
    #[default]
    Fast,
    /// Slow.
    Slow,
}

/// A nested struct.
#[schema]
#[derive(PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Nested {
    /// Required inside.
    pub depth: i64,
    /// Optional inside.
    pub note: Option<String>,
}

/// An enum with data: exactly one of its variants.
#[schema]
#[derive(PartialEq)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// From a URL.
    Url(String),
    /// From a config map.
    ConfigMap {
        /// Its name.
        name: String,
    },
}

/// The status: conditions (date-times) and the scale subresource's replicas.
#[schema]
#[derive(PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ShapeStatus {
    /// Replicas (the scale subresource reads it).
    pub replicas: i32,
    /// Conditions.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

fn shape(title: &str) -> Shape {
    let mut shape = Shape::new(
        title,
        ShapeSpec {
            title: title.to_owned(),
            replicas: 2,
            size: Some(7),
            ratio: Some(0.5),
            tags: vec!["a".into()],
            labels: BTreeMap::from([("k".into(), "v".into())]),
            mode: Mode::Slow,
            port: Some(IntOrString::String("http".into())),
            nested: Some(Nested {
                depth: 3,
                note: None,
            }),
            source: Some(Source::ConfigMap { name: "cm".into() }),
        },
    );
    shape.metadata.namespace = Some("default".into());
    shape
}

async fn server_with<K: CustomResourceExt>() -> (TestServer, Client) {
    let server = TestServer::start().await.unwrap();
    let client = Client::from_kubeconfig_yaml(&server.kubeconfig()).unwrap();
    install_crd::<K>(&client, "test", DEADLINE).await.unwrap();
    (server, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generated_crd_is_accepted_and_objects_round_trip() {
    let (server, client) = server_with::<Shape>().await;
    let api: Api<Shape> = Api::namespaced(client, "default");
    let created = api
        .create(&PostParams::default(), &shape("one"))
        .await
        .unwrap();
    assert_eq!(created.spec, shape("one").spec);
    let mut status = ShapeStatus {
        replicas: 2,
        ..ShapeStatus::default()
    };
    set_condition(
        &mut status.conditions,
        new_condition(&created, "Ready", ConditionStatus::True, "Up", "all up"),
    );
    let patch = Patch::Merge(json!({ "status": status }));
    let written = api
        .patch_status("one", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(written.status, Some(status));
    let read = api.get("one").await.unwrap();
    assert_eq!(read.spec, created.spec);
    server.shutdown().await;
}

/// Writes `spec` (merged into a valid Shape's) as raw JSON; the server's
/// answer: the object, or the error message.
async fn create_raw(client: &Client, name: &str, spec: Value) -> Result<Value, String> {
    let resource = ApiResource::new("shapes.kcontrol.dev", "v1", "Shape", "shapes", true);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let mut body = kcontrol::serde_json::to_value(shape(name).spec).unwrap();
    for (k, v) in spec.as_object().unwrap() {
        body[k] = v.clone();
    }
    let object = DynamicObject::new(name, &resource)
        .within("default")
        .data(json!({ "spec": body }));
    match api.create(&PostParams::default(), &object).await {
        Ok(created) => Ok(created.data),
        Err(e) => Err(e.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_validates_objects_against_the_generated_schema() {
    let (server, client) = server_with::<Shape>().await;
    // valid: nulls where nullable, an int where int-or-string, the other variant
    let ok = json!({"size": null, "port": 8080, "source": {"url": "https://example.com"},
        "nested": {"depth": 1, "note": "n"}});
    let created = create_raw(&client, "ok", ok).await.unwrap();
    assert_eq!(created["spec"]["port"], 8080);
    // unknown fields are pruned, not stored
    let pruned = create_raw(&client, "pruned", json!({"extra": 1}))
        .await
        .unwrap();
    assert!(pruned["spec"].get("extra").is_none(), "{pruned}");

    for (name, spec, want) in [
        (
            "t1",
            json!({"replicas": "two"}),
            "spec.replicas: Invalid value: \"string\"",
        ),
        (
            "t2",
            json!({"size": -1}),
            "spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0",
        ),
        (
            "t3",
            json!({"mode": "Medium"}),
            "spec.mode: Unsupported value: \"Medium\"",
        ),
        (
            "t4",
            json!({"title": ""}),
            "spec.title in body should be at least 1 chars long",
        ),
        (
            "t5",
            json!({"title": "much-too-long"}),
            "spec.title: Too long",
        ),
        (
            "t6",
            json!({"labels": {"k": 1}}),
            "spec.labels.k: Invalid value: \"integer\"",
        ),
        (
            "t7",
            json!({"port": true}),
            "spec.port: Invalid value: \"boolean\"",
        ),
        (
            "t8",
            json!({"nested": {"note": "no depth"}}),
            "spec.nested.depth: Required value",
        ),
        (
            "t9",
            json!({"source": {"url": "u", "configMap": {"name": "x"}}}),
            "must validate one and only one schema (oneOf). Found 2 valid alternatives",
        ),
        (
            "t10",
            json!({"source": {}}),
            "must validate one and only one schema (oneOf). Found none valid",
        ),
        (
            "t11",
            json!({"tags": "a"}),
            "spec.tags: Invalid value: \"string\"",
        ),
        (
            "t12",
            json!({"ratio": "half"}),
            "spec.ratio: Invalid value: \"string\"",
        ),
    ] {
        let err = create_raw(&client, name, spec.clone()).await.unwrap_err();
        assert!(err.contains(want), "{spec}: {err}\n  expected: {want}");
    }
    // a date-time that is not one
    let api: Api<Shape> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &shape("timed"))
        .await
        .unwrap();
    let bad_time = json!({"status": {"replicas": 1, "conditions": [{"type": "Ready", "status": "True",
        "reason": "Up", "message": "", "lastTransitionTime": "yesterday"}]}});
    let err = api
        .patch_status("timed", &PatchParams::default(), &Patch::Merge(&bad_time))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("must be of type date-time"),
        "{err}"
    );
    server.shutdown().await;
}

/// A custom resource written for kube-rs: kube-derive's derive with the
/// crate paths a `kube-core` user gives, nothing of kcontrol's.
mod kube_rs_user {
    use kube_derive::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// A widget.
    #[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
    #[kube(
        group = "interop.kcontrol.dev",
        version = "v1",
        kind = "Widget",
        namespaced
    )]
    #[kube(status = "WidgetStatus", derive = "PartialEq")]
    #[kube(crates(kube_core = "::kube_core", k8s_openapi = "::kcontrol::k8s_openapi"))]
    pub struct WidgetSpec {
        /// How big.
        pub size: u32,
    }

    /// What the controller saw.
    #[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
    pub struct WidgetStatus {
        /// The size, doubled.
        pub doubled: u32,
    }
}

use kube_rs_user::{Widget, WidgetSpec, WidgetStatus};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_derive_types_work_in_informers_listers_and_controllers_unchanged() {
    let (server, client) = server_with::<Widget>().await;
    let resource = ApiResource::of::<Widget>();
    assert_eq!(
        (
            resource.api_version().as_ref(),
            resource.plural.as_ref(),
            resource.namespaced
        ),
        ("interop.kcontrol.dev/v1", "widgets", true)
    );
    let api: Api<Widget> = Api::namespaced(client.clone(), "default");
    for (name, size) in [("small", 1), ("large", 5)] {
        api.create(
            &PostParams::default(),
            &Widget::new(name, WidgetSpec { size }),
        )
        .await
        .unwrap();
    }

    // informers and listers, full and metadata only
    let factory = InformerFactory::new(client.clone(), Duration::ZERO);
    let widgets = factory.informer::<Widget>();
    let metadata = factory.metadata_informer::<Widget>();
    let shutdown = CancellationToken::new();
    factory.start(&shutdown).unwrap();
    wait_for_cache_sync(&shutdown, Some(DEADLINE), &[&factory])
        .await
        .unwrap();
    let lister = widgets.lister();
    assert_eq!(lister.get("default", "large").unwrap().spec.size, 5);
    let meta: Arc<PartialObjectMetadata<Widget>> =
        metadata.lister().get("default", "small").unwrap();
    assert_eq!(meta.metadata.name.as_deref(), Some("small"));

    // a controller reconciling them: status written through the subresource
    let controller = Controller::new(client.clone()).for_resource::<Widget>();
    let stop = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        |w: Arc<Widget>, ctx: Context<Widget>| async move {
            let want = WidgetStatus {
                doubled: w.spec.size * 2,
            };
            if w.status.as_ref() == Some(&want) {
                return Ok(Action::Done);
            }
            let api: Api<Widget> = Api::namespaced(ctx.client().clone(), "default");
            let patch = Patch::Merge(json!({ "status": want }));
            api.patch_status(
                w.name().unwrap_or_default(),
                &PatchParams::default(),
                &patch,
            )
            .await?;
            Ok::<_, kcontrol::client::Error>(Action::Done)
        },
        stop.clone(),
    ));
    kcontrol_testserver::eventually_within("large reconciled to 10", DEADLINE, async || {
        let large = lister.get("default", "large").unwrap();
        large.status.as_ref().map(|s| s.doubled) == Some(10)
    })
    .await;
    stop.cancel();
    run.await.unwrap().unwrap();
    shutdown.cancel();
    factory.shutdown().await;
    server.shutdown().await;
}
