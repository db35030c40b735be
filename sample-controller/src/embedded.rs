//! The pieces of the `--embedded` demo that need no controller: an
//! in-process API server (kcontrol-testserver over HTTPS), a client for it,
//! the demo's Foos, and how far they are from converged ([`Progress`]),
//! read from the server's own state.

use std::collections::HashMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kcontrol_client::{Api, Client, Config, Kubeconfig, KubeconfigOptions, PostParams, RateLimit};
use kcontrol_testserver::{Objects, TestServer};

use crate::deployment::is_converged;
use crate::foo::Foo;
use kcontrol_controller::owner::is_controlled_by;

/// The namespace of the demo's Foos.
pub const DEMO_NAMESPACE: &str = "default";

/// Why the demo could not set up.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    /// The in-process server did not start.
    #[error("starting the in-process API server: {0}")]
    Server(#[from] kcontrol_testserver::Error),
    /// The server's kubeconfig did not give a client (a bug).
    #[error("a client for the in-process API server: {0}")]
    Client(#[from] kcontrol_client::Error),
    /// The server's kubeconfig did not resolve (a bug).
    #[error("the in-process API server's kubeconfig: {0}")]
    Config(#[from] kcontrol_client::ConfigError),
    /// Installing the CRD failed.
    #[error(transparent)]
    Install(#[from] crate::artifacts::InstallError),
    /// Creating a Foo failed.
    #[error("creating Foo {name}: {source}")]
    CreateFoo {
        /// The Foo.
        name: String,
        /// Why.
        #[source]
        source: kcontrol_client::Error,
    },
}

/// Starts the in-process API server: HTTPS on a free loopback port, with
/// its Deployment simulator (every replica available 100 ms after a change).
pub async fn start_server() -> Result<TestServer, EmbeddedError> {
    Ok(TestServer::builder().tls(true).start().await?)
}

/// A client for `server` (its CA and client certificate) with `rate_limit`.
pub fn client_for(server: &TestServer, rate_limit: RateLimit) -> Result<Client, EmbeddedError> {
    let kubeconfig = Kubeconfig::from_yaml(&server.kubeconfig())?;
    let config = Config::from_custom_kubeconfig(&kubeconfig, &KubeconfigOptions::default())?
        .with_rate_limit(Some(rate_limit));
    Ok(Client::new(config)?)
}

/// The `i`-th Foo of the demo (from 1): `example-foo-<i>` asking for a
/// Deployment of the same name with 1, 2 or 3 replicas.
pub fn demo_foo(i: u32) -> Foo {
    let name = format!("example-foo-{i}");
    let replicas = i32::try_from(1 + i % 3).unwrap_or(1);
    Foo::with_deployment(DEMO_NAMESPACE, &name, &name, replicas)
}

/// Creates the demo's Foos 1 to `count` through the API, a few at a time.
pub async fn create_foos(client: &Client, count: u32) -> Result<(), EmbeddedError> {
    let api: Api<Foo> = Api::namespaced(client.clone(), DEMO_NAMESPACE);
    futures::stream::iter(1..=count)
        .map(|i| {
            let api = api.clone();
            async move {
                let foo = demo_foo(i);
                match api.create(&PostParams::default(), &foo).await {
                    Ok(_) => Ok(()),
                    Err(e) if e.is_already_exists() => Ok(()),
                    Err(source) => Err(EmbeddedError::CreateFoo {
                        name: foo.metadata.name.unwrap_or_default(),
                        source,
                    }),
                }
            }
        })
        .buffer_unordered(16)
        .try_collect()
        .await
}

/// How far the Foos of a namespace are from converged, on the server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Foos.
    pub foos: usize,
    /// Foos in sync with their Deployment (see [`is_converged`]).
    pub synced: usize,
    /// Deployments controlled by a Foo.
    pub deployments: usize,
    /// Occurrences of Normal events (Event `count`s summed).
    pub normal_events: u64,
    /// Occurrences of Warning events.
    pub warning_events: u64,
    /// Up to five Foos not in sync, with what is missing.
    pub lagging: Vec<String>,
}

impl Progress {
    /// Whether every Foo is in sync (and there is at least one).
    pub fn all_synced(&self) -> bool {
        self.foos > 0 && self.synced == self.foos
    }
}

fn decode<T: serde::de::DeserializeOwned>(objects: &Objects, resource: &str) -> Vec<T> {
    objects
        .list(resource, Some(DEMO_NAMESPACE))
        .map(|list| {
            list.items
                .iter()
                .filter_map(|o| serde_json::from_value(o.value().clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Reads the demo namespace's Foos, Deployments and Events from the
/// server's store (no HTTP request, so nothing is counted).
pub fn progress(objects: &Objects) -> Progress {
    let foos: Vec<Foo> = decode(objects, "foos.samplecontroller.k8s.io");
    let deployments: HashMap<String, Deployment> =
        decode::<Deployment>(objects, "deployments.apps")
            .into_iter()
            .map(|d| (d.metadata.name.clone().unwrap_or_default(), d))
            .collect();
    let mut p = Progress {
        foos: foos.len(),
        ..Progress::default()
    };
    for foo in &foos {
        let deployment = deployments.get(&foo.spec.deployment_name);
        if deployment.is_some_and(|d| is_controlled_by(d, foo)) {
            p.deployments += 1;
        }
        match deployment {
            Some(d) if is_converged(foo, d) => p.synced += 1,
            _ if p.lagging.len() < 5 => p.lagging.push(describe_lag(foo, deployment)),
            _ => {}
        }
    }
    for event in objects
        .list("events", Some(DEMO_NAMESPACE))
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let count = event.value()["count"].as_u64().unwrap_or(1);
        match event.value()["type"].as_str() {
            Some("Warning") => p.warning_events += count,
            _ => p.normal_events += count,
        }
    }
    p
}

fn describe_lag(foo: &Foo, deployment: Option<&Deployment>) -> String {
    let name = foo.metadata.name.as_deref().unwrap_or_default();
    let desired = foo.desired_replicas();
    match deployment {
        None => format!("{name}: no Deployment yet"),
        Some(d) if !is_controlled_by(d, foo) => format!("{name}: Deployment not owned by it"),
        Some(d) => format!(
            "{name}: wants {desired}, Deployment has {}/{} available, status says {}",
            crate::deployment::available_replicas(d),
            crate::deployment::spec_replicas(d),
            foo.available_replicas()
        ),
    }
}

/// One line of progress: `Foos synced 2/3 | Deployments 3 | events 2 Normal, 0 Warning | 1.4s`.
pub fn render(p: &Progress, elapsed: Duration) -> String {
    format!(
        "Foos synced {}/{} | Deployments created {} | events {} Normal, {} Warning | {:.1}s",
        p.synced,
        p.foos,
        p.deployments,
        p.normal_events,
        p.warning_events,
        elapsed.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_foos_vary_replicas_within_the_schema() {
        let replicas: Vec<i32> = (1..=6).map(|i| demo_foo(i).desired_replicas()).collect();
        assert_eq!(replicas, [2, 3, 1, 2, 3, 1]);
        assert_eq!(demo_foo(7).metadata.name.as_deref(), Some("example-foo-7"));
        assert_eq!(demo_foo(7).spec.deployment_name, "example-foo-7");
    }

    #[test]
    fn the_progress_line() {
        let p = Progress {
            foos: 3,
            synced: 2,
            deployments: 3,
            normal_events: 2,
            warning_events: 1,
            lagging: vec![],
        };
        assert_eq!(
            render(&p, Duration::from_millis(1400)),
            "Foos synced 2/3 | Deployments created 3 | events 2 Normal, 1 Warning | 1.4s"
        );
        assert!(!p.all_synced());
        assert!(!Progress::default().all_synced());
    }
}

#[cfg(test)]
mod server_tests {
    use super::*;
    use crate::deployment::new_deployment;
    use kcontrol_client::events::Recorder;

    /// The demo's set-up against the real in-process server, and the
    /// `--until-synced` predicate as the server's state moves towards it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn set_up_and_progress_follow_the_server() {
        let server = start_server().await.unwrap();
        let client = client_for(
            &server,
            RateLimit {
                qps: 1000.0,
                burst: 1000,
            },
        )
        .unwrap();
        crate::artifacts::install_foo_crd(&client, Duration::from_secs(10))
            .await
            .unwrap();
        // installing twice keeps the existing CRD
        crate::artifacts::install_foo_crd(&client, Duration::from_secs(10))
            .await
            .unwrap();
        create_foos(&client, 3).await.unwrap();
        create_foos(&client, 3).await.unwrap(); // existing Foos are fine
        let objects = server.objects();
        let p = progress(&objects);
        assert_eq!((p.foos, p.synced, p.deployments), (3, 0, 0));
        assert!(!p.all_synced());
        assert_eq!(p.lagging.len(), 3);
        assert!(
            p.lagging[0].ends_with("no Deployment yet"),
            "{:?}",
            p.lagging
        );

        // what the controller would do for the first Foo
        let foos: Api<Foo> = Api::namespaced(client.clone(), DEMO_NAMESPACE);
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), DEMO_NAMESPACE);
        let foo = foos.get("example-foo-1").await.unwrap();
        deployments
            .create(&PostParams::default(), &new_deployment(&foo))
            .await
            .unwrap();
        // the simulator makes every replica available; then the status
        let mut wanted = None;
        for _ in 0..200 {
            let d = deployments.get("example-foo-1").await.unwrap();
            if crate::deployment::available_replicas(&d) == 2 {
                wanted = Some(d);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            wanted.is_some(),
            "the simulator made the replicas available"
        );
        let p = progress(&objects);
        assert_eq!((p.synced, p.deployments), (0, 1), "{p:?}");
        let mut status = foo.clone();
        status.status = Some(crate::foo::FooStatus {
            available_replicas: 2,
        });
        foos.replace_status("example-foo-1", &PostParams::default(), &status)
            .await
            .unwrap();
        let recorder = Recorder::new(client.clone(), "test").unwrap();
        recorder.event(
            &foo,
            kcontrol_client::events::EventType::Warning,
            "Oops",
            "x",
        );
        recorder.flush().await;
        let p = progress(&objects);
        assert_eq!(
            (p.synced, p.deployments, p.warning_events),
            (1, 1, 1),
            "{p:?}"
        );

        // a Foo whose Deployment belongs to someone else never counts
        let foo2 = foos.get("example-foo-2").await.unwrap();
        let mut foreign = new_deployment(&foo2);
        foreign.metadata.owner_references = None;
        deployments
            .create(&PostParams::default(), &foreign)
            .await
            .unwrap();
        let p = progress(&objects);
        assert_eq!(p.deployments, 1);
        assert!(p.lagging.iter().any(|l| l.contains("not owned")), "{p:?}");

        // a Foo with replicas out of range is refused by the schema
        let err = foos
            .create(
                &PostParams::default(),
                &Foo::with_deployment(DEMO_NAMESPACE, "big", "big", 11),
            )
            .await
            .unwrap_err();
        assert_eq!(err.api_error().map(|e| e.code()), Some(422), "{err}");
        server.shutdown().await;
    }
}
