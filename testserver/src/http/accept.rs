//! The accept loop: takes connections on the listening port until
//! shutdown, and plays an API server restart
//! ([`crate::Faults::restart`]): the port closed and every connection cut,
//! then the port listening again after a while.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch as tokio_watch;
use tokio::task::JoinSet;

use super::{serve_connection, State};
use crate::faults::{Listening, Restart};

/// What the accept loop was woken by.
enum Woken {
    Accepted(std::io::Result<(tokio::net::TcpStream, std::net::SocketAddr)>),
    Restart(Restart),
    Shutdown,
    Other,
}

/// Accepts connections until shutdown; then ends every connection. A
/// restart ([`crate::Faults::restart`]) closes the port, cuts every
/// connection, and listens again after the restart's down time.
pub(crate) async fn serve(
    mut listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    state: Arc<State>,
    mut shutdown: tokio_watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    let mut listening = state.faults.subscribe_listening();
    let mut restarts = 0;
    loop {
        let woken = tokio::select! {
            a = listener.accept() => Woken::Accepted(a),
            _ = shutdown.changed() => Woken::Shutdown,
            Ok(()) = listening.changed() => match *listening.borrow_and_update() {
                Listening::Down(r) => Woken::Restart(r),
                _ => Woken::Other,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => Woken::Other,
        };
        let accepted = match woken {
            Woken::Accepted(a) => a,
            Woken::Shutdown => break,
            Woken::Other => continue,
            Woken::Restart(r) => {
                let Some(addr) = go_down(listener, &mut conns).await else {
                    break;
                };
                state.faults.went_down();
                match listen_again(addr, r.down, &mut shutdown).await {
                    Some(l) => listener = l,
                    None => break,
                }
                restarts += 1;
                state.faults.came_back(r, restarts);
                continue;
            }
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "set_nodelay");
        }
        let state = state.clone();
        match tls.clone() {
            None => {
                conns.spawn(serve_connection(stream, state, false));
            }
            Some(acceptor) => {
                conns.spawn(async move {
                    match acceptor.accept(stream).await {
                        Ok(tls_stream) => {
                            let cert_ok = tls_stream
                                .get_ref()
                                .1
                                .peer_certificates()
                                .is_some_and(|c| !c.is_empty());
                            serve_connection(tls_stream, state, cert_ok).await;
                        }
                        Err(e) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                    }
                });
            }
        }
    }
    abort_all(&mut conns).await;
    state.faults.stopped();
}

async fn abort_all(conns: &mut JoinSet<()>) {
    conns.abort_all();
    while conns.join_next().await.is_some() {}
}

/// Goes down as a killed process does, closing its port and its
/// connections at once: the port is closed before any connection is cut,
/// so a client that sees its connection end finds the port refusing.
/// Returns the port's address (`None`, the server stops, if it is
/// unknown).
async fn go_down(listener: TcpListener, conns: &mut JoinSet<()>) -> Option<std::net::SocketAddr> {
    let addr = close(listener);
    abort_all(conns).await;
    addr
}

/// Closes the port (the listener is dropped on return) and returns its
/// address (`None` if it is unknown).
fn close(listener: TcpListener) -> Option<std::net::SocketAddr> {
    match listener.local_addr() {
        Ok(addr) => Some(addr),
        Err(e) => {
            tracing::error!(error = %e, "restart: the listening address is unknown");
            None
        }
    }
}

/// Waits `down` (or shutdown: `None`) and listens on `addr` again.
async fn listen_again(
    addr: std::net::SocketAddr,
    down: Duration,
    shutdown: &mut tokio_watch::Receiver<bool>,
) -> Option<TcpListener> {
    tokio::select! {
        () = tokio::time::sleep(down) => {}
        _ = shutdown.changed() => return None,
    }
    // the port was ours a moment ago; a short retry covers a slow release
    for _ in 0..100 {
        match TcpListener::bind(addr).await {
            Ok(l) => return Some(l),
            Err(e) => tracing::debug!(%addr, error = %e, "restart: rebinding"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tracing::error!(%addr, "restart: the port could not be bound again; the server stops");
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use std::sync::mpsc;

    /// Tries to connect to the port when dropped (as a cut connection's
    /// task is) and reports whether the port accepted.
    struct ConnectOnDrop(SocketAddr, mpsc::Sender<bool>);

    impl Drop for ConnectOnDrop {
        fn drop(&mut self) {
            let accepted = std::net::TcpStream::connect(self.0).is_ok();
            let _ = self.1.send(accepted);
        }
    }

    #[tokio::test]
    async fn going_down_closes_the_port_before_it_cuts_a_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = mpsc::channel();
        let mut conns = JoinSet::new();
        let guard = ConnectOnDrop(addr, tx);
        conns.spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        });
        assert_eq!(go_down(listener, &mut conns).await, Some(addr));
        assert!(conns.is_empty());
        assert!(
            !rx.recv().unwrap(),
            "a connection was cut while the port still accepted"
        );
    }
}
