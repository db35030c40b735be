//! Owned objects move before their owner. When the sharder assigns an
//! owner to a new member, the new member's informers should already hold
//! the owner's children when the owner reaches it: otherwise its first
//! reconcile finds no child in its cache, tries to create one that exists
//! (409 AlreadyExists) and retries with backoff, once per moved owner.
//!
//! So a child follows where its owner is *going* (`decide::owner_target`),
//! and the sharder writes an owner's assignment only once every child in
//! its cache carries the new shard. A change of a child's shard label
//! queues its owner again. An owner whose children do not all follow
//! within [`CHILDREN_WAIT`] (a child the sharder cannot write) is
//! assigned anyway, with a warning: no owner is left unowned for a child.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kcontrol_indexer::ApiResource;
use kcontrol_workqueue::RateLimitingQueue;
use parking_lot::Mutex;
use tokio::time::Instant;

/// The longest an owner's assignment waits for its children.
pub(super) const CHILDREN_WAIT: Duration = Duration::from_secs(30);

/// Whether every child of the owner `key` carries the shard `to`.
pub(super) type Ready = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// The sharded kinds' owner queues and their owned kinds' readiness
/// checks, by owner kind; shared by every kind's loop of one sharder run.
#[derive(Default)]
pub(super) struct Children {
    queues: Mutex<HashMap<String, RateLimitingQueue<String>>>,
    checks: Mutex<HashMap<String, Vec<Ready>>>,
    /// Which member each waiting owner goes to, and since when its
    /// children have been going there.
    waiting: Mutex<HashMap<(String, String), (String, Instant)>>,
}

/// The key of an owner kind.
pub(super) fn kind_key(resource: &ApiResource) -> String {
    format!("{}/{}", resource.group, resource.kind)
}

impl Children {
    /// Registers the queue of the sharded kind `kind`.
    pub(super) fn owner_queue(&self, kind: String, queue: RateLimitingQueue<String>) {
        self.queues.lock().insert(kind, queue);
    }

    /// Registers a readiness check of one kind owned by `kind`.
    pub(super) fn check(&self, kind: String, ready: Ready) {
        self.checks.lock().entry(kind).or_default().push(ready);
    }

    /// Queues the owner `key` of kind `kind` again (a child of it changed).
    pub(super) fn owner_changed(&self, kind: &str, key: String) {
        if let Some(queue) = self.queues.lock().get(kind) {
            queue.add(key);
        }
    }

    /// Whether the owner `key` of kind `kind` may be assigned to `to` now:
    /// its children all carry `to`, or they have had [`CHILDREN_WAIT`] to
    /// follow it there (a new target starts the wait again). While it
    /// waits, it is queued again when the wait ends.
    pub(super) fn may_assign(&self, kind: &str, key: &str, to: &str) -> bool {
        let ready = self
            .checks
            .lock()
            .get(kind)
            .is_none_or(|checks| checks.iter().all(|ready| ready(key, to)));
        let id = (kind.to_owned(), key.to_owned());
        if ready {
            self.waiting.lock().remove(&id);
            return true;
        }
        let now = Instant::now();
        let since = {
            let mut waiting = self.waiting.lock();
            let wait = waiting.entry(id.clone()).or_insert((to.to_owned(), now));
            if wait.0 != to {
                *wait = (to.to_owned(), now);
            }
            wait.1
        };
        if now.duration_since(since) >= CHILDREN_WAIT {
            tracing::warn!(
                owner = key,
                to,
                "sharder: children did not follow: assigning the owner anyway"
            );
            self.waiting.lock().remove(&id);
            return true;
        }
        if since == now {
            if let Some(queue) = self.queues.lock().get(kind) {
                queue.add_after(key.to_owned(), CHILDREN_WAIT);
            }
        }
        false
    }

    /// Forgets the wait of an owner that needs no assignment any more.
    pub(super) fn settled(&self, kind: &str, key: &str) {
        let mut waiting = self.waiting.lock();
        if !waiting.is_empty() {
            waiting.remove(&(kind.to_owned(), key.to_owned()));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test(start_paused = true)]
    async fn an_owner_waits_for_its_children_but_not_forever() {
        let children = Children::default();
        let queue: RateLimitingQueue<String> = RateLimitingQueue::new();
        children.owner_queue("/Foo".into(), queue.clone());
        let moved = Arc::new(AtomicBool::new(false));
        let m = Arc::clone(&moved);
        children.check(
            "/Foo".into(),
            Arc::new(move |key, to| key == "ns/a" && to == "m1" && m.load(Ordering::SeqCst)),
        );
        // a kind with no owned kinds never waits
        assert!(children.may_assign("/Bar", "ns/a", "m1"));
        assert!(!children.may_assign("/Foo", "ns/a", "m1"));
        assert_eq!(queue.scheduled_len(), 1, "checked again when the wait ends");
        moved.store(true, Ordering::SeqCst);
        assert!(children.may_assign("/Foo", "ns/a", "m1"));
        // a child that never follows: the owner goes after CHILDREN_WAIT
        assert!(!children.may_assign("/Foo", "ns/b", "m1"));
        tokio::time::advance(CHILDREN_WAIT / 2).await;
        assert!(!children.may_assign("/Foo", "ns/b", "m1"));
        tokio::time::advance(CHILDREN_WAIT / 2).await;
        assert!(children.may_assign("/Foo", "ns/b", "m1"));
        // a new target starts the wait again
        assert!(!children.may_assign("/Foo", "ns/d", "m1"));
        tokio::time::advance(CHILDREN_WAIT - Duration::from_secs(1)).await;
        assert!(!children.may_assign("/Foo", "ns/d", "m2"));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(
            !children.may_assign("/Foo", "ns/d", "m2"),
            "m2's wait began 2 s ago"
        );
        // a child change queues its owner
        children.owner_changed("/Foo", "ns/c".into());
        assert_eq!(queue.len(), 1);
        queue.shut_down();
    }
}
