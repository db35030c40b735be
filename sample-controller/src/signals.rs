//! Graceful shutdown on SIGINT (Ctrl-C) and SIGTERM: the first signal
//! cancels a token the controller watches; a second one exits at once.

use tokio_util::sync::CancellationToken;

/// Exit code after a second signal (128 + SIGINT, as shells report it).
const FORCED_EXIT: i32 = 130;

/// Waits for SIGINT or SIGTERM and returns its name.
pub async fn wait_for_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = tokio::signal::ctrl_c() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            },
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the controller");
                let _ = tokio::signal::ctrl_c().await;
                "SIGINT"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "SIGINT"
    }
}

/// Cancels `token` on the first SIGINT or SIGTERM, and exits the process on
/// the second (when a graceful shutdown hangs, a second Ctrl-C still works).
pub fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        let name = wait_for_signal().await;
        tracing::info!(
            signal = name,
            "shutting down (a second signal exits at once)"
        );
        token.cancel();
        let name = wait_for_signal().await;
        tracing::warn!(signal = name, "second signal: exiting now");
        std::process::exit(FORCED_EXIT);
    });
}
