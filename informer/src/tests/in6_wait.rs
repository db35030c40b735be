//! IN6: `wait_for_cache_sync` across several informers and handler
//! registrations, ended by success, a timeout or a shutdown.

use std::sync::Arc;

use super::*;
use crate::{wait_for_cache_sync, CacheSyncError, HasSynced};

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn in6_waits_for_every_informer_and_registration() {
    let mut hs: Vec<Harness> = (0..3)
        .map(|i| Harness::new(|b| b.name(format!("inf{i}"))))
        .collect();
    let gate = Arc::new(Gate::default());
    let gated = Recorder::gated(&gate);
    let reg = hs[0]
        .informer
        .add_event_handler(Arc::clone(&gated))
        .unwrap();
    let fifos: Vec<_> = hs.iter_mut().map(Harness::start).collect();
    fifos[0].replace([cm("a", "x", "1")], "1").unwrap();
    fifos[1].replace(Vec::<Arc<ConfigMap>>::new(), "1").unwrap();
    // the third informer never lists: a timeout names it (and the blocked handler)
    let token = CancellationToken::new();
    let synced: Vec<&dyn HasSynced> =
        vec![&*hs[0].informer, &*hs[1].informer, &*hs[2].informer, &reg];
    let err = block_on(wait_for_cache_sync(
        &token,
        Some(Duration::from_millis(50)),
        &synced,
    ))
    .unwrap_err();
    assert!(
        matches!(err, CacheSyncError::Timeout { timeout, .. } if timeout == Duration::from_millis(50)),
        "{err}"
    );
    let names = err.unsynced();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(names[0], "informer inf2");
    assert_eq!(names[1], format!("handler {}", reg.name()));
    // it lists, and the handler is let go, while we wait
    let third = Arc::clone(&fifos[2]);
    let opener = Arc::clone(&gate);
    let helper = std::thread::spawn(move || {
        // shapes the interleaving (most likely while the wait runs); the
        // wait ends the same whether it starts before or after
        std::thread::sleep(Duration::from_millis(20));
        third.replace([cm("b", "y", "1")], "7").unwrap();
        opener.open();
    });
    block_on(wait_for_cache_sync(&token, Some(WAIT), &synced)).unwrap();
    block_on(wait_for_cache_sync(&token, None, &synced)).unwrap();
    helper.join().unwrap();
    assert_eq!(
        hs[2].informer.last_sync_resource_version().as_deref(),
        Some("7")
    );
    for h in &mut hs {
        h.stop();
    }
}

#[test]
fn in6_shutdown_ends_the_wait() {
    let mut h = Harness::new(|b| b);
    h.start();
    let token = CancellationToken::new();
    let cancel = token.clone();
    let helper = std::thread::spawn(move || {
        // shapes the interleaving: a wait cancelled before or during it
        // ends the same way
        std::thread::sleep(Duration::from_millis(20));
        cancel.cancel();
    });
    let err = block_on(wait_for_cache_sync(&token, None, &[&*h.informer])).unwrap_err();
    assert!(matches!(err, CacheSyncError::Shutdown { .. }), "{err}");
    let err = block_on(wait_for_cache_sync(&token, Some(WAIT), &[&*h.informer])).unwrap_err();
    assert_eq!(
        err,
        CacheSyncError::Shutdown {
            unsynced: vec![format!("informer {}", h.informer.name())]
        }
    );
    helper.join().unwrap();
    h.stop();
}
