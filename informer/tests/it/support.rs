//! Shared helpers: a server, a client, ConfigMaps, and a handler that
//! rebuilds its view of the objects from its notifications alone.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kcontrol_client::{Client, Config};
use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
use kcontrol_indexer::{meta_namespace_key, Object, ObjectOrTombstone};
use kcontrol_informer::ResourceEventHandler;
use kcontrol_testserver::TestServer;
use parking_lot::{Condvar, Mutex};
use serde_json::{json, Value};

/// The longest any test waits for something to happen.
pub const DEADLINE: Duration = Duration::from_secs(60);

pub async fn server() -> TestServer {
    TestServer::builder()
        .bookmark_interval(Duration::from_millis(500))
        .start()
        .await
        .unwrap()
}

/// Creates namespaces.
pub fn namespaces(server: &TestServer, names: &[&str]) {
    for name in names {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        server.objects().create("namespaces", "", ns).unwrap();
    }
}

pub fn client(server: &TestServer) -> Client {
    Client::new(Config::new(server.url().parse().unwrap())).unwrap()
}

pub fn cm(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}})
}

/// The server's configmaps as key -> resourceVersion.
pub fn server_view(server: &TestServer, namespace: Option<&str>) -> BTreeMap<String, String> {
    server
        .objects()
        .list("configmaps", namespace)
        .unwrap()
        .items
        .iter()
        .map(|o| (o.key().to_owned(), o.resource_version().to_string()))
        .collect()
}

/// Objects as key -> resourceVersion.
pub fn view_of<'a>(
    objects: impl IntoIterator<Item = &'a Arc<ConfigMap>>,
) -> BTreeMap<String, String> {
    objects.into_iter().map(|o| (key(o), rv(o))).collect()
}

pub fn key(obj: &ConfigMap) -> String {
    meta_namespace_key(obj).unwrap()
}

pub fn rv(obj: &ConfigMap) -> String {
    obj.resource_version().unwrap_or_default().to_owned()
}

pub use kcontrol_testserver::{eventually, try_eventually};

/// Runs `f` with a bound, failing the test if it does not finish.
pub async fn bounded<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, f)
        .await
        .expect("finished in time")
}

/// One notification as the recorder saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Add {
        key: String,
        rv: String,
        initial: bool,
    },
    Update {
        key: String,
        old: String,
        new: String,
    },
    Delete {
        key: String,
        rv: String,
        tombstone: bool,
    },
}

#[derive(Default)]
struct State {
    log: Vec<Event>,
    view: BTreeMap<String, String>,
    errors: Vec<String>,
}

/// Records notifications and rebuilds key -> resourceVersion from them,
/// noting every notification that contradicts what it was told before.
/// With a gate, each call first waits (bounded) until the gate opens.
#[derive(Default)]
pub struct Recorder {
    state: Mutex<State>,
    gate: Option<Arc<Gate>>,
}

impl Recorder {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn gated(gate: &Arc<Gate>) -> Arc<Self> {
        Arc::new(Self {
            gate: Some(Arc::clone(gate)),
            ..Self::default()
        })
    }

    fn record(&self, event: Event) {
        if let Some(gate) = &self.gate {
            gate.pass();
        }
        let mut st = self.state.lock();
        match &event {
            Event::Add { key, rv, .. } => {
                if let Some(prev) = st.view.insert(key.clone(), rv.clone()) {
                    st.errors
                        .push(format!("add of {key}@{rv}: already at {prev}"));
                }
            }
            Event::Update { key, old, new } => {
                let prev = st.view.insert(key.clone(), new.clone());
                if prev.as_ref() != Some(old) {
                    st.errors
                        .push(format!("update of {key} {old}->{new}: view had {prev:?}"));
                }
            }
            Event::Delete { key, rv, .. } => {
                if st.view.remove(key).is_none() {
                    st.errors.push(format!("delete of {key}@{rv}: not in view"));
                }
            }
        }
        st.log.push(event);
    }

    pub fn log(&self) -> Vec<Event> {
        self.state.lock().log.clone()
    }

    pub fn view(&self) -> BTreeMap<String, String> {
        self.state.lock().view.clone()
    }

    pub fn errors(&self) -> Vec<String> {
        self.state.lock().errors.clone()
    }
}

impl ResourceEventHandler<ConfigMap> for Recorder {
    fn on_add(&self, obj: &Arc<ConfigMap>, is_in_initial_list: bool) {
        self.record(Event::Add {
            key: key(obj),
            rv: rv(obj),
            initial: is_in_initial_list,
        });
    }

    fn on_update(&self, old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        self.record(Event::Update {
            key: key(new),
            old: rv(old),
            new: rv(new),
        });
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<ConfigMap>) {
        let o = obj.object();
        self.record(Event::Delete {
            key: key(o),
            rv: rv(o),
            tombstone: obj.is_tombstone(),
        });
    }
}

/// A gate handlers wait at (at most [`DEADLINE`]) until the test opens it.
#[derive(Default)]
pub struct Gate {
    open: Mutex<bool>,
    cond: Condvar,
    arrived: Mutex<usize>,
}

impl Gate {
    pub fn pass(&self) {
        *self.arrived.lock() += 1;
        let mut open = self.open.lock();
        let deadline = std::time::Instant::now() + DEADLINE;
        while !*open {
            if self.cond.wait_until(&mut open, deadline).timed_out() {
                return;
            }
        }
    }

    pub fn open(&self) {
        *self.open.lock() = true;
        self.cond.notify_all();
    }

    pub fn arrived(&self) -> usize {
        *self.arrived.lock()
    }
}
