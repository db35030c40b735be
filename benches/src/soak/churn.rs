//! Foo churn: a thread that, at a steady random pace, picks a name from a
//! fixed pool and changes the server's state the way users do. An absent
//! name is created; a present one is scaled (most often), deleted,
//! deleted and at once recreated under the same name (a new uid: the old
//! Deployment is not the new Foo's), or loses its Deployment (the
//! controller must recreate it). Writes go to the testserver's store in
//! process, as a POST / PUT / DELETE would, so injected HTTP faults hit
//! only the controller.
// the resource is named Foo
#![allow(clippy::disallowed_names)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kcontrol_testserver::Objects;
use serde_json::{json, Value};

use super::Rng;
use crate::controller::{FOO_RESOURCE, NAMESPACE};

/// What the churn did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChurnStats {
    /// Foos created under an absent name.
    pub creates: u64,
    /// Foos whose replicas changed.
    pub scales: u64,
    /// Foos deleted.
    pub deletes: u64,
    /// Foos deleted and created again at once with the same name.
    pub recreates: u64,
    /// Deployments deleted under their Foo.
    pub deployment_deletes: u64,
    /// Writes the server refused (other than conflicts retried).
    pub errors: u64,
}

impl ChurnStats {
    /// Changes applied.
    pub fn events(&self) -> u64 {
        self.creates + self.scales + self.deletes + self.recreates + self.deployment_deletes
    }
}

/// The name of pool entry `i`: the Foo and its Deployment.
pub fn name(i: u64) -> String {
    format!("soak-{i}")
}

/// A Foo asking for `replicas` (1 to 10, the CRD's range).
pub fn foo_json(name: &str, replicas: u64) -> Value {
    json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"deploymentName": name, "replicas": replicas},
    })
}

/// The running churn thread.
pub struct Churn {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<ChurnStats>,
}

impl Churn {
    /// Starts churning `pool` names at about `rate` changes a second.
    pub fn start(objects: Objects, pool: u64, rate: f64, seed: u64) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || run(&objects, pool, rate, seed, &stop))
        };
        Self { stop, thread }
    }

    /// Stops churning; returns what was done.
    pub fn stop(self) -> Result<ChurnStats, String> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread
            .join()
            .map_err(|_| "the churn thread panicked".to_owned())
    }
}

fn run(objects: &Objects, pool: u64, rate: f64, seed: u64, stop: &AtomicBool) -> ChurnStats {
    let mut rng = Rng::new(seed);
    let mut stats = ChurnStats::default();
    let mean_gap = Duration::from_secs_f64(1.0 / rate.max(0.001));
    let mut next = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        // gaps uniform in [0, 2 × mean): bursts and lulls, the given rate
        next += mean_gap.mul_f64(rng.unit() * 2.0);
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        step(objects, pool, &mut rng, &mut stats);
    }
    stats
}

/// One change to a random name of the pool.
pub fn step(objects: &Objects, pool: u64, rng: &mut Rng, stats: &mut ChurnStats) {
    let name = name(rng.below(pool));
    let create = |stats: &mut ChurnStats, rng: &mut Rng| {
        let ok = objects
            .create(FOO_RESOURCE, NAMESPACE, foo_json(&name, rng.range(1, 10)))
            .is_ok();
        if !ok {
            stats.errors += 1;
        }
        ok
    };
    let Some(current) = objects.get(FOO_RESOURCE, NAMESPACE, &name) else {
        if create(stats, rng) {
            stats.creates += 1;
        }
        return;
    };
    let roll = rng.below(100);
    if roll < 60 {
        if scale(objects, &name, current.value().clone(), rng) {
            stats.scales += 1;
        } else {
            stats.errors += 1;
        }
    } else if roll < 78 {
        match objects.delete(FOO_RESOURCE, NAMESPACE, &name) {
            Ok(_) => stats.deletes += 1,
            Err(_) => stats.errors += 1,
        }
    } else if roll < 92 {
        match objects.delete(FOO_RESOURCE, NAMESPACE, &name) {
            Ok(_) if create(stats, rng) => stats.recreates += 1,
            Ok(_) => stats.deletes += 1,
            Err(_) => stats.errors += 1,
        }
    } else if objects.delete("deployments.apps", NAMESPACE, &name).is_ok() {
        stats.deployment_deletes += 1;
    }
}

/// Sets other replicas; retries a conflict with the controller's status
/// writes from a fresh read.
fn scale(objects: &Objects, name: &str, mut foo: Value, rng: &mut Rng) -> bool {
    for _ in 0..10 {
        let old = foo["spec"]["replicas"].as_u64().unwrap_or(1);
        // 1..=10 without `old`
        let mut replicas = rng.range(1, 9);
        if replicas >= old {
            replicas += 1;
        }
        foo["spec"]["replicas"] = json!(replicas);
        match objects.update(FOO_RESOURCE, NAMESPACE, foo) {
            Ok(_) => return true,
            Err(e) if e.code == 409 => match objects.get(FOO_RESOURCE, NAMESPACE, name) {
                Some(fresh) => foo = fresh.value().clone(),
                None => return false,
            },
            Err(_) => return false,
        }
    }
    false
}
