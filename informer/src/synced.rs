//! Cache-sync barriers: the [`HasSynced`] trait (informers and handler
//! registrations implement it) and [`wait_for_cache_sync`] /
//! [`wait_for_cache_sync_timeout`], which wait until every one of many has
//! synced, until shutdown, or until a deadline (IN6).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Something that reports when it has synced: an informer (its store holds
/// the initial list), a handler registration (its handler has also handled
/// the initial list), or a closure through [`SyncedFn`].
pub trait HasSynced: Send + Sync {
    /// Whether it has synced. Once true, it stays true.
    fn has_synced(&self) -> bool;
}

impl<T: HasSynced + ?Sized> HasSynced for Arc<T> {
    fn has_synced(&self) -> bool {
        (**self).has_synced()
    }
}

impl<T: HasSynced + ?Sized> HasSynced for &T {
    fn has_synced(&self) -> bool {
        (**self).has_synced()
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

/// Why [`wait_for_cache_sync_timeout`] gave up.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CacheSyncError {
    /// The deadline passed first; `unsynced` lists the positions (in the
    /// slice given) of those that had not synced.
    #[error("caches not synced after {timeout:?} (unsynced: {unsynced:?})")]
    Timeout {
        /// The timeout given.
        timeout: Duration,
        /// Positions of the unsynced ones.
        unsynced: Vec<usize>,
    },
    /// The shutdown token was cancelled first.
    #[error("shut down before the caches synced (unsynced: {unsynced:?})")]
    Shutdown {
        /// Positions of the unsynced ones.
        unsynced: Vec<usize>,
    },
}

/// The first poll interval; it doubles up to [`MAX_POLL`].
const FIRST_POLL: Duration = Duration::from_millis(1);
/// client-go polls every 100 ms; this waits at most that long between checks.
const MAX_POLL: Duration = Duration::from_millis(100);

/// Waits until every one of `synced` has synced (`true`), or until
/// `shutdown` is cancelled (`false`), like client-go's `WaitForCacheSync`.
///
/// It checks right away, then polls at growing intervals (1 ms doubling to
/// 100 ms), so a fast sync is seen quickly and a slow one costs little.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use tokio_util::sync::CancellationToken;
/// use kcontrol_informer::{wait_for_cache_sync, SyncedFn};
///
/// let flag = Arc::new(AtomicBool::new(false));
/// let f = Arc::clone(&flag);
/// tokio::spawn(async move { f.store(true, Ordering::SeqCst) });
/// let ready = SyncedFn(move || flag.load(Ordering::SeqCst));
/// assert!(wait_for_cache_sync(&CancellationToken::new(), &[&ready]).await);
/// # }
/// ```
pub async fn wait_for_cache_sync(shutdown: &CancellationToken, synced: &[&dyn HasSynced]) -> bool {
    wait(shutdown, None, synced).await.is_ok()
}

/// [`wait_for_cache_sync`] with a deadline: `Ok(())` once all have synced,
/// or an error saying whether the timeout or the shutdown came first and
/// which ones had not synced.
pub async fn wait_for_cache_sync_timeout(
    timeout: Duration,
    shutdown: &CancellationToken,
    synced: &[&dyn HasSynced],
) -> Result<(), CacheSyncError> {
    wait(shutdown, Some(timeout), synced).await
}

fn unsynced(synced: &[&dyn HasSynced]) -> Vec<usize> {
    synced
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.has_synced())
        .map(|(i, _)| i)
        .collect()
}

async fn wait(
    shutdown: &CancellationToken,
    timeout: Option<Duration>,
    synced: &[&dyn HasSynced],
) -> Result<(), CacheSyncError> {
    // A timeout too long to represent is no timeout.
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    let mut poll = FIRST_POLL;
    loop {
        // Skip those already synced: once true, they stay true.
        if synced.iter().all(|s| s.has_synced()) {
            tracing::debug!(count = synced.len(), "caches synced");
            return Ok(());
        }
        if shutdown.is_cancelled() {
            return Err(CacheSyncError::Shutdown {
                unsynced: unsynced(synced),
            });
        }
        let mut wake = Instant::now() + poll;
        if let (Some(deadline), Some(timeout)) = (deadline, timeout) {
            if Instant::now() >= deadline {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test]
    async fn shutdown_and_timeout_end_the_wait() {
        let never = SyncedFn(|| false);
        let always = SyncedFn(|| true);
        let token = CancellationToken::new();
        let err =
            wait_for_cache_sync_timeout(Duration::from_millis(20), &token, &[&always, &never])
                .await
                .unwrap_err();
        assert!(
            matches!(&err, CacheSyncError::Timeout { unsynced, .. } if unsynced == &[1]),
            "{err}"
        );
        let t2 = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            t2.cancel();
        });
        assert!(!wait_for_cache_sync(&token, &[&never]).await);
        let err = wait_for_cache_sync_timeout(Duration::from_secs(60), &token, &[&never, &always])
            .await
            .unwrap_err();
        assert_eq!(err, CacheSyncError::Shutdown { unsynced: vec![0] });
        // an unrepresentable deadline is no deadline
        let fresh = CancellationToken::new();
        assert!(
            wait_for_cache_sync_timeout(Duration::MAX, &fresh, &[&always])
                .await
                .is_ok()
        );
        // nothing to wait for: synced at once, even after shutdown
        assert!(wait_for_cache_sync(&token, &[]).await);
        assert!(wait_for_cache_sync(&token, &[&always]).await);
    }

    #[tokio::test]
    async fn sees_a_later_sync() {
        let flag = Arc::new(AtomicBool::new(false));
        let f = Arc::clone(&flag);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            f.store(true, Ordering::SeqCst);
        });
        let arc: Arc<dyn HasSynced> = Arc::new(SyncedFn(move || flag.load(Ordering::SeqCst)));
        wait_for_cache_sync_timeout(Duration::from_secs(30), &CancellationToken::new(), &[&arc])
            .await
            .unwrap();
    }
}
