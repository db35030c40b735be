//! Graceful shutdown on SIGINT (Ctrl-C) and SIGTERM: the first signal
//! cancels a token the controller watches; a second one exits at once.
//!
//! The handlers are installed when [`cancel_on_signal`] (or
//! [`Signals::listen`]) returns, not when a task first runs: a SIGTERM sent
//! right after the controller says it is running must not meet the default
//! action (death without a graceful shutdown).

use tokio_util::sync::CancellationToken;

/// Exit code after a second signal (128 + SIGINT, as shells report it).
const FORCED_EXIT: i32 = 130;

/// SIGINT and SIGTERM handlers, installed by [`Signals::listen`].
pub struct Signals {
    #[cfg(unix)]
    unix: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl std::fmt::Debug for Signals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signals").finish_non_exhaustive()
    }
}

impl Signals {
    /// Installs the handlers now. Must be called on a tokio runtime.
    pub fn listen() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let unix = match (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) {
                (Ok(int), Ok(term)) => Some((int, term)),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the controller");
                    None
                }
            };
            Self { unix }
        }
        #[cfg(not(unix))]
        {
            Self {}
        }
    }

    /// Waits for the next SIGINT or SIGTERM and returns its name.
    pub async fn recv(&mut self) -> &'static str {
        #[cfg(unix)]
        if let Some((int, term)) = &mut self.unix {
            return tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            };
        }
        let _ = tokio::signal::ctrl_c().await;
        "SIGINT"
    }
}

/// Waits for SIGINT or SIGTERM and returns its name (handlers installed at
/// the first poll; see [`Signals`] to install them earlier).
pub async fn wait_for_signal() -> &'static str {
    Signals::listen().recv().await
}

/// Cancels `token` on the first SIGINT or SIGTERM, and exits the process on
/// the second (when a graceful shutdown hangs, a second Ctrl-C still works).
/// The handlers are in place when it returns.
pub fn cancel_on_signal(token: CancellationToken) {
    let mut signals = Signals::listen();
    tokio::spawn(async move {
        let name = signals.recv().await;
        tracing::info!(
            signal = name,
            "shutting down (a second signal exits at once)"
        );
        token.cancel();
        let name = signals.recv().await;
        tracing::warn!(signal = name, "second signal: exiting now");
        std::process::exit(FORCED_EXIT);
    });
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A SIGTERM that comes right after `listen` returns, before anything
    /// polls, is caught (installing the handlers at the first poll let the
    /// default action kill the process: the binary test
    /// `sigterm_shuts_down_gracefully_with_exit_0` failed so under load).
    #[tokio::test]
    async fn a_signal_right_after_listen_is_caught() {
        let mut signals = Signals::listen();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let name = tokio::time::timeout(std::time::Duration::from_secs(30), signals.recv())
            .await
            .unwrap();
        assert_eq!(name, "SIGTERM");
    }
}
