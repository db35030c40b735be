//! [`ShardGate`]: the replica's side of the move protocol. A reconcile of
//! a key starts only while the cached object carries this member's shard
//! label and no drain label, and no acknowledgement of that key is under
//! way (SH2); a drain is acknowledged only once no reconcile of the key is
//! in flight, by removing both labels in one write guarded by the
//! `resourceVersion`.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kcontrol_client::{Api, Client, Patch, PatchParams};
use kcontrol_indexer::{ApiResource, DynamicObject, KubeObject, ObjectOrTombstone, StringMap};
use kcontrol_informer::ResourceEventHandler;
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::ShardingConfig;

/// The first and the longest wait between two tries of an acknowledgement.
const ACK_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(5));

#[derive(Default)]
struct GateState {
    /// Keys with a reconcile in flight.
    in_flight: HashSet<String>,
    /// Keys whose drain is being (or was) acknowledged: no reconcile
    /// starts until the object comes back to this member undrained.
    acking: HashSet<String>,
}

struct Inner {
    member: String,
    shard_label: String,
    drain_label: String,
    state: Mutex<GateState>,
    idle: Notify,
    closed: AtomicBool,
}

/// Admits reconciles of the keys this replica owns and acknowledges
/// drains. Clone it freely: clones share one state.
#[derive(Clone)]
pub struct ShardGate {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ShardGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardGate")
            .field("member", &self.inner.member)
            .field("shard_label", &self.inner.shard_label)
            .finish_non_exhaustive()
    }
}

/// A reconcile admitted by [`ShardGate::enter`]; dropping it ends it.
#[must_use = "the reconcile counts as in flight until this is dropped"]
pub struct InFlight {
    inner: Arc<Inner>,
    key: String,
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight").field("key", &self.key).finish()
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.inner.state.lock().in_flight.remove(&self.key);
        self.inner.idle.notify_waiters();
    }
}

impl ShardGate {
    /// The gate of `config`'s member.
    pub fn new(config: &ShardingConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                member: config.member.clone(),
                shard_label: config.shard_label(),
                drain_label: config.drain_label(),
                state: Mutex::new(GateState::default()),
                idle: Notify::new(),
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// Whether an object with these labels is this member's to reconcile:
    /// its shard label names this member and it carries no drain label.
    pub fn owns<M: StringMap + ?Sized>(&self, labels: &M) -> bool {
        labels.value_of(&self.inner.shard_label) == Some(self.inner.member.as_str())
            && labels.value_of(&self.inner.drain_label).is_none()
    }

    /// Admits a reconcile of `key`, whose cached object has `labels`
    /// (`None`: not in the cache), when this member owns it, no
    /// acknowledgement of it is under way and the gate is open; the
    /// returned guard keeps it in flight until dropped.
    pub fn enter<M: StringMap + ?Sized>(&self, key: &str, labels: Option<&M>) -> Option<InFlight> {
        if self.inner.closed.load(Ordering::SeqCst) || !labels.is_some_and(|l| self.owns(l)) {
            return None;
        }
        let mut state = self.inner.state.lock();
        if state.acking.contains(key) || self.inner.closed.load(Ordering::SeqCst) {
            return None;
        }
        state.in_flight.insert(key.to_owned());
        Some(InFlight {
            inner: Arc::clone(&self.inner),
            key: key.to_owned(),
        })
    }

    /// Admits no reconcile from now on (the membership was lost).
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
    }

    /// How many reconciles are in flight.
    pub fn in_flight(&self) -> usize {
        self.inner.state.lock().in_flight.len()
    }

    /// The handler to add to the informer of the reconciled kind: on an
    /// object of this member with the drain label it acknowledges the
    /// drain ([`ShardGate`]'s docs); on an object back to this member
    /// undrained it lets reconciles of its key start again. Call it inside
    /// a tokio runtime: acknowledgements run on it.
    pub fn drain_handler<K: KubeObject>(
        &self,
        client: Client,
        resource: ApiResource,
    ) -> impl ResourceEventHandler<K> {
        DrainHandler {
            gate: self.clone(),
            client,
            resource,
            // informers may call handlers on threads of their own
            runtime: tokio::runtime::Handle::try_current().ok(),
        }
    }

    /// Waits until no reconcile of `key` is in flight, then marks it as
    /// being acknowledged (no reconcile starts any more).
    async fn quiesce(&self, key: &str) {
        loop {
            let idle = self.inner.idle.notified();
            {
                let mut state = self.inner.state.lock();
                if !state.in_flight.contains(key) {
                    state.acking.insert(key.to_owned());
                    return;
                }
            }
            idle.await;
        }
    }

    /// Acknowledges the drain of `key` (at `rv`): once no reconcile of it
    /// is in flight, removes the shard and drain labels guarded by the
    /// version; after a conflict, rereads and tries again while the object
    /// is still this member's and draining.
    async fn acknowledge(
        &self,
        api: Api<DynamicObject>,
        key: String,
        name: String,
        mut rv: String,
    ) {
        let mut backoff = ACK_BACKOFF.0;
        loop {
            self.quiesce(&key).await;
            let patch = serde_json::json!({"metadata": {
                "resourceVersion": rv,
                "labels": {self.inner.shard_label.clone(): null, self.inner.drain_label.clone(): null},
            }});
            let failure = match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    tracing::debug!(%key, "drain acknowledged");
                    return;
                }
                Err(e) if e.is_not_found() => return,
                Err(e) => e,
            };
            // reread: still ours and draining → again; else it is over
            match api.get_opt(&name).await {
                Ok(None) => return,
                Ok(Some(object)) => {
                    let labels = &object.metadata.labels;
                    let mine = labels.as_ref().and_then(|l| l.get(&self.inner.shard_label))
                        == Some(&self.inner.member);
                    let draining = labels
                        .as_ref()
                        .is_some_and(|l| l.contains_key(&self.inner.drain_label));
                    if !mine || !draining {
                        if mine {
                            self.inner.state.lock().acking.remove(&key);
                        }
                        return;
                    }
                    rv = object.metadata.resource_version.unwrap_or_default();
                    if failure.is_conflict() {
                        continue;
                    }
                }
                Err(e) => tracing::warn!(%key, error = %e, "rereading a draining object failed"),
            }
            tracing::warn!(%key, error = %failure, ?backoff, "acknowledging a drain failed: retrying");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(ACK_BACKOFF.1);
        }
    }
}

struct DrainHandler {
    gate: ShardGate,
    client: Client,
    resource: ApiResource,
    runtime: Option<tokio::runtime::Handle>,
}

impl DrainHandler {
    fn seen<K: KubeObject>(&self, obj: &K) {
        let inner = &self.gate.inner;
        let labels = obj.labels();
        if labels.value_of(&inner.shard_label) != Some(inner.member.as_str()) {
            return;
        }
        let Some(name) = obj.name().map(str::to_owned) else {
            return;
        };
        let key = match obj.namespace() {
            Some(ns) => format!("{ns}/{name}"),
            None => name.clone(),
        };
        if labels.value_of(&inner.drain_label).is_none() {
            // a newer version, ours and undrained: reconciles may start
            inner.state.lock().acking.remove(&key);
            return;
        }
        let rv = obj.resource_version().unwrap_or_default().to_owned();
        let api = match obj.namespace() {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &self.resource),
            None => Api::all_with(self.client.clone(), &self.resource),
        };
        let gate = self.gate.clone();
        match self
            .runtime
            .clone()
            .or_else(|| tokio::runtime::Handle::try_current().ok())
        {
            Some(runtime) => {
                runtime.spawn(async move { gate.acknowledge(api, key, name, rv).await });
            }
            None => tracing::error!(%key, "no tokio runtime to acknowledge a drain on"),
        }
    }
}

impl<K: KubeObject> ResourceEventHandler<K> for DrainHandler {
    fn on_add(&self, obj: &Arc<K>, _is_in_initial_list: bool) {
        self.seen(obj.as_ref());
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        // resyncs repeat a version already handled
        if old.resource_version() != new.resource_version() {
            self.seen(new.as_ref());
        }
    }

    fn on_delete(&self, _obj: &ObjectOrTombstone<K>) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// SH2 (replica side): only owned, undrained objects are admitted; an
    /// acknowledgement waits for the reconcile in flight and, once under
    /// way, admits no new one.
    #[tokio::test]
    async fn sh2_a_drain_waits_for_the_reconcile_in_flight_and_blocks_new_ones() {
        let gate = ShardGate::new(&ShardingConfig::new("ns", "ring").member("me"));
        let mine = labels(&[("shard.kcontrol.dev/ring", "me")]);
        let other = labels(&[("shard.kcontrol.dev/ring", "you")]);
        let draining = labels(&[
            ("shard.kcontrol.dev/ring", "me"),
            ("drain.kcontrol.dev/ring", "true"),
        ]);
        assert!(gate.enter("ns/a", Some(&other)).is_none());
        assert!(gate.enter("ns/a", Some(&draining)).is_none());
        assert!(gate
            .enter::<BTreeMap<String, String>>("ns/a", None)
            .is_none());
        let running = gate.enter("ns/a", Some(&mine));
        assert!(running.is_some());
        assert_eq!(gate.in_flight(), 1);
        let quiesced = tokio::spawn({
            let gate = gate.clone();
            async move { gate.quiesce("ns/a").await }
        });
        // the acknowledgement waits while the reconcile runs
        tokio::task::yield_now().await;
        assert!(!quiesced.is_finished());
        drop(running);
        tokio::time::timeout(Duration::from_secs(30), quiesced)
            .await
            .unwrap_or_else(|_| panic!("quiesce did not end"))
            .unwrap_or_else(|e| panic!("{e}"));
        // under way: even a stale cached view of an owned object is refused
        assert!(gate.enter("ns/a", Some(&mine)).is_none());
        // other keys go on
        assert!(gate.enter("ns/b", Some(&mine)).is_some());
        gate.close();
        assert!(gate.enter("ns/c", Some(&mine)).is_none());
    }
}
