//! Graceful shutdown on SIGINT (Ctrl-C) and SIGTERM: [`shutdown_on_signal`]
//! returns a token that the first signal cancels; a second signal exits
//! the process at once (when a graceful shutdown hangs, Ctrl-C still
//! works). The handlers are installed before it returns, so a SIGTERM
//! right after start-up is never met by the default action. CT13.

use tokio_util::sync::CancellationToken;

/// The exit code after a second signal (128 + SIGINT, as shells report it).
pub const FORCED_EXIT_CODE: i32 = 130;

/// A token cancelled by the first SIGINT or SIGTERM; the second exits the
/// process with [`FORCED_EXIT_CODE`]. Must be called on a tokio runtime.
///
/// # Errors
/// When the signal handlers cannot be installed (no tokio runtime, or the
/// operating system refused).
pub fn shutdown_on_signal() -> std::io::Result<CancellationToken> {
    let runtime = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
    let token = CancellationToken::new();
    let mut signals = Signals::listen()?;
    let cancel = token.clone();
    runtime.spawn(async move {
        let name = signals.recv().await;
        tracing::info!(
            signal = name,
            "shutting down (a second signal exits at once)"
        );
        cancel.cancel();
        let name = signals.recv().await;
        tracing::warn!(signal = name, "second signal: exiting now");
        std::process::exit(FORCED_EXIT_CODE);
    });
    Ok(token)
}

/// The installed SIGINT and SIGTERM handlers.
struct Signals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    fn listen() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Self {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Self {})
        }
    }

    async fn recv(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => "SIGINT",
                _ = self.terminate.recv() => "SIGTERM",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "SIGINT"
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A SIGTERM sent right after the call returns cancels the token (the
    /// handler is in place; the default action would kill the test binary).
    #[tokio::test]
    async fn ct13_a_signal_right_after_the_call_cancels_the_token() {
        let token = shutdown_on_signal().unwrap();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        tokio::time::timeout(std::time::Duration::from_secs(30), token.cancelled())
            .await
            .unwrap();
    }
}
