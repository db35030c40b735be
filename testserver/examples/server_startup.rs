//! Measures what a test pays for a testserver: the first start in a
//! process (which builds whatever the server builds once per process) and
//! then the median and 90th percentile of further starts and shutdowns,
//! beside a reference run in the same process: binding a loopback
//! listener and spawning an accept task, the least any server start
//! costs. Prints the ratios.
//!
//! `cargo run --release -p kcontrol-testserver --example server_startup [starts]`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs
)]

use kcontrol_testserver::TestServer;
use std::time::{Duration, Instant};

async fn reference_start() -> Duration {
    let t = Instant::now();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let task = tokio::spawn(async move {
        let _ = listener.accept().await;
    });
    let took = t.elapsed();
    task.abort();
    took
}

async fn server_start() -> Duration {
    let t = Instant::now();
    let server = TestServer::builder().start().await.unwrap();
    let took = t.elapsed();
    server.shutdown().await;
    took
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let starts: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let first = server_start().await;
    let mut servers = Vec::with_capacity(starts);
    let mut references = Vec::with_capacity(starts);
    for _ in 0..starts {
        references.push(reference_start().await);
        servers.push(server_start().await);
    }
    servers.sort();
    references.sort();
    let (s50, s90) = (percentile(&servers, 0.5), percentile(&servers, 0.9));
    let (r50, r90) = (percentile(&references, 0.5), percentile(&references, 0.9));
    println!("testserver starts: {starts} (after a first one)");
    println!(
        "first start in the process: {:>10.3} ms",
        first.as_secs_f64() * 1e3
    );
    println!(
        "start, median:              {:>10.3} ms  (reference {:.3} ms, ratio {:.1}x)",
        s50.as_secs_f64() * 1e3,
        r50.as_secs_f64() * 1e3,
        s50.as_secs_f64() / r50.as_secs_f64()
    );
    println!(
        "start, p90:                 {:>10.3} ms  (reference {:.3} ms, ratio {:.1}x)",
        s90.as_secs_f64() * 1e3,
        r90.as_secs_f64() * 1e3,
        s90.as_secs_f64() / r90.as_secs_f64()
    );
}
