//! The cache-sync barrier: the [`HasSynced`] trait (informers, handler
//! registrations and the factory implement it) and
//! [`wait_for_cache_sync`], which waits until every one of many has
//! synced, until shutdown, or until an optional deadline (IN6). One wait,
//! one shape: the error names what had not synced.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Something that reports when it has synced: an informer (its store holds
/// the initial list), a handler registration (its handler has also handled
/// the initial list), a factory (all its started informers), or a closure
/// through [`SyncedFn`].
pub trait HasSynced: Send + Sync {
    /// Whether it has synced. Once true, it stays true.
    fn has_synced(&self) -> bool;

    /// What has not synced yet, by name, for error messages: empty once
    /// synced. A group (the factory) names its unsynced members.
    fn unsynced(&self) -> Vec<String> {
        if self.has_synced() {
            Vec::new()
        } else {
            vec![String::from("unnamed")]
        }
    }
}

impl<T: HasSynced + ?Sized> HasSynced for Arc<T> {
    fn has_synced(&self) -> bool {
        (**self).has_synced()
    }

    fn unsynced(&self) -> Vec<String> {
        (**self).unsynced()
    }
}

impl<T: HasSynced + ?Sized> HasSynced for &T {
    fn has_synced(&self) -> bool {
        (**self).has_synced()
    }

    fn unsynced(&self) -> Vec<String> {
        (**self).unsynced()
    }
}

/// `[name]` when `synced` is false, else empty: the usual
/// [`HasSynced::unsynced`] of something with a name.
pub(crate) fn unsynced_name(synced: bool, name: &str) -> Vec<String> {
    if synced {
        Vec::new()
    } else {
        vec![name.to_owned()]
    }
}

/// A closure as a [`HasSynced`] (client-go's `InformerSynced` functions).
///
/// ```
/// use kcontrol_informer::{HasSynced, SyncedFn};
/// assert!(SyncedFn(|| true).has_synced());
/// ```
#[derive(Clone, Copy)]
pub struct SyncedFn<F>(pub F);

impl<F> fmt::Debug for SyncedFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SyncedFn")
    }
}

impl<F: Fn() -> bool + Send + Sync> HasSynced for SyncedFn<F> {
    fn has_synced(&self) -> bool {
        (self.0)()
    }
}

/// Why [`wait_for_cache_sync`] gave up.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CacheSyncError {
    /// The deadline passed first.
    #[error("caches not synced after {timeout:?} (unsynced: {unsynced:?})")]
    Timeout {
        /// The timeout given.
        timeout: Duration,
        /// The names of what had not synced (informers by resource or
        /// name, handler registrations by name).
        unsynced: Vec<String>,
    },
    /// The shutdown token was cancelled first.
    #[error("shut down before the caches synced (unsynced: {unsynced:?})")]
    Shutdown {
        /// The names of what had not synced.
        unsynced: Vec<String>,
    },
}

impl CacheSyncError {
    /// The names of what had not synced.
    pub fn unsynced(&self) -> &[String] {
        match self {
            Self::Timeout { unsynced, .. } | Self::Shutdown { unsynced } => unsynced,
        }
    }
}

/// The first poll interval; it doubles up to [`MAX_POLL`].
const FIRST_POLL: Duration = Duration::from_millis(1);
/// client-go polls every 100 ms; this waits at most that long between checks.
const MAX_POLL: Duration = Duration::from_millis(100);
/// While it waits, the barrier warns this often which caches have not
/// synced (an unreachable server, a missing CRD), naming each as it names
/// itself (informers by kind, scope and last list or watch error).
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Waits until every one of `synced` has synced, like client-go's
/// `WaitForCacheSync`: `Ok(())` then; an error naming what had not synced
/// when `shutdown` is cancelled first or `timeout` (if any) passes first.
/// Informers, handler registrations and a whole factory go in one list.
///
/// It checks right away, then polls at growing intervals (1 ms doubling to
/// 100 ms), so a fast sync is seen quickly and a slow one costs little;
/// every 10 s it waits, it logs a warning naming what has not synced. This
/// is the one cache-sync barrier: the controller builder runs it before
/// its workers start (CT9), and a hand-written controller calls it the
/// same way.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tokio_util::sync::CancellationToken;
/// use kcontrol_informer::{wait_for_cache_sync, SyncedFn};
///
/// let flag = Arc::new(AtomicBool::new(false));
/// let f = Arc::clone(&flag);
/// tokio::spawn(async move { f.store(true, Ordering::SeqCst) });
/// let ready = SyncedFn(move || flag.load(Ordering::SeqCst));
/// let shutdown = CancellationToken::new();
/// wait_for_cache_sync(&shutdown, Some(Duration::from_secs(30)), &[&ready])
///     .await
///     .expect("synced");
/// # }
/// ```
pub async fn wait_for_cache_sync(
    shutdown: &CancellationToken,
    timeout: Option<Duration>,
    synced: &[&dyn HasSynced],
) -> Result<(), CacheSyncError> {
    // A timeout too long to represent is no timeout.
    let started = Instant::now();
    // A timeout too long to represent is no timeout.
    let deadline = timeout.and_then(|t| started.checked_add(t));
    let mut next_warning = started + WARN_EVERY;
    let mut poll = FIRST_POLL;
    loop {
        if synced.iter().all(|s| s.has_synced()) {
            tracing::debug!(count = synced.len(), "caches synced");
            return Ok(());
        }
        if shutdown.is_cancelled() {
            return Err(CacheSyncError::Shutdown {
                unsynced: unsynced(synced),
            });
        }
        let now = Instant::now();
        if now >= next_warning {
            let unsynced = unsynced(synced).join("; ");
            let waited = now - started;
            tracing::warn!(?waited, %unsynced, "still waiting for caches to sync");
            next_warning = now + WARN_EVERY;
        }
        let mut wake = now + poll;
        if let (Some(deadline), Some(timeout)) = (deadline, timeout) {
            if now >= deadline {
                let unsynced = unsynced(synced);
                tracing::info!(?timeout, ?unsynced, "timed out waiting for caches to sync");
                return Err(CacheSyncError::Timeout { timeout, unsynced });
            }
            wake = wake.min(deadline);
        }
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = tokio::time::sleep_until(wake) => {}
        }
        poll = (poll * 2).min(MAX_POLL);
    }
}

fn unsynced(synced: &[&dyn HasSynced]) -> Vec<String> {
    synced.iter().flat_map(|s| s.unsynced()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test]
    async fn shutdown_and_timeout_end_the_wait() {
        let never = SyncedFn(|| false);
        let always = SyncedFn(|| true);
        let token = CancellationToken::new();
        let err = wait_for_cache_sync(&token, Some(Duration::from_millis(20)), &[&always, &never])
            .await
            .unwrap_err();
        assert!(
            matches!(&err, CacheSyncError::Timeout { unsynced, .. } if unsynced == &["unnamed"]),
            "{err}"
        );
        let t2 = token.clone();
        tokio::spawn(async move {
            // shapes the interleaving; cancelled before or during the
            // wait, the wait ends the same way
            tokio::time::sleep(Duration::from_millis(10)).await;
            t2.cancel();
        });
        let err = wait_for_cache_sync(&token, None, &[&never])
            .await
            .unwrap_err();
        assert!(matches!(err, CacheSyncError::Shutdown { .. }), "{err}");
        let err = wait_for_cache_sync(&token, Some(Duration::from_secs(60)), &[&never, &always])
            .await
            .unwrap_err();
        assert_eq!(
            err,
            CacheSyncError::Shutdown {
                unsynced: vec!["unnamed".to_owned()]
            }
        );
        // an unrepresentable deadline is no deadline
        let fresh = CancellationToken::new();
        wait_for_cache_sync(&fresh, Some(Duration::MAX), &[&always])
            .await
            .unwrap();
        // nothing to wait for: synced at once, even after shutdown
        wait_for_cache_sync(&token, None, &[]).await.unwrap();
        wait_for_cache_sync(&token, None, &[&always]).await.unwrap();
    }

    #[tokio::test]
    async fn sees_a_later_sync() {
        let flag = Arc::new(AtomicBool::new(false));
        let f = Arc::clone(&flag);
        tokio::spawn(async move {
            // shapes the interleaving (most likely a sync the wait must
            // notice later); synced before the wait, it passes the same
            tokio::time::sleep(Duration::from_millis(30)).await;
            f.store(true, Ordering::SeqCst);
        });
        let arc: Arc<dyn HasSynced> = Arc::new(SyncedFn(move || flag.load(Ordering::SeqCst)));
        wait_for_cache_sync(
            &CancellationToken::new(),
            Some(Duration::from_secs(30)),
            &[&arc],
        )
        .await
        .unwrap();
    }
}
