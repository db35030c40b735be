//! What the controller layer's end-to-end tests share: a server and its
//! client, the longest wait, a condition polled until it holds, the next
//! message of a channel, a GET on a health server and a wait for its
//! answer.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::Duration;

use kcontrol_client::Client;
use kcontrol_testserver::TestServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// The longest any test waits for something to happen.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// An in-process API server and a client for it.
pub async fn server() -> (TestServer, Client) {
    let server = TestServer::start().await.unwrap();
    let client = Client::from_kubeconfig_yaml(&server.kubeconfig()).unwrap();
    (server, client)
}

#[allow(unused_imports)] // each test file uses some of the shared module
pub use kcontrol_testserver::{eventually, try_eventually};

/// The next message of `rx`, within [`DEADLINE`].
pub async fn next<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
    tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .expect("an event in time")
        .expect("channel open")
}

/// `GET path` on a health server: the status code and the body.
pub async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let code = response
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}

/// Polls `GET path` on a health server until it answers `code`; panics
/// naming the path and the code after [`DEADLINE`].
pub async fn wait_for_status(addr: SocketAddr, path: &str, code: u16) {
    let mut last = (0, String::new());
    let answered = try_eventually(format!("{path} to answer {code}"), async || {
        last = get(addr, path).await;
        last.0 == code
    })
    .await;
    assert!(
        answered.is_ok(),
        "{path} never answered {code} (last {}: {})",
        last.0,
        last.1
    );
}
