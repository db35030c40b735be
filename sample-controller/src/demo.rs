//! The `--embedded` demo (feature `embedded`): an in-process API server,
//! the Foo CRD, `--foos` Foos and the controller, with live progress.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kcontrol_client::Client;
use kcontrol_testserver::{Counters, TestServer};
use tokio_util::sync::CancellationToken;

use crate::app::{endpoint, options, serve};
use crate::cli::{Args, CliError};
use crate::controller::Controller;
use crate::embedded::{self, Progress, DEMO_NAMESPACE};

/// The demo: an in-process API server, the Foo CRD, `--foos` Foos and the
/// controller, with live progress; with `--until-synced`, done once every
/// Foo is in sync (an error after `--timeout`).
pub async fn run_embedded(args: &Args) -> Result<(), CliError> {
    let started = Instant::now();
    let run_error = |e: &dyn std::fmt::Display| CliError::Run(e.to_string());
    let (server, client) = seeded_server(args).await?;

    // the first SIGINT/SIGTERM shuts down gracefully, a second exits
    let shutdown = kcontrol_controller::signals::shutdown_on_signal()
        .map_err(|e| CliError::Run(format!("installing the signal handlers: {e}")))?;
    let endpoint = endpoint(args);
    let controller = Arc::new(
        Controller::new(
            client,
            options(args, Some(DEMO_NAMESPACE.to_owned()), endpoint.clone()),
        )
        .map_err(|e| run_error(&e))?,
    );
    serve(args, endpoint.as_ref(), &shutdown).await?;
    let stop_controller = CancellationToken::new();
    let running = {
        let controller = Arc::clone(&controller);
        let stop = stop_controller.clone();
        tokio::spawn(async move { controller.run(stop).await })
    };

    let objects = server.objects();
    let deadline = args
        .until_synced
        .then(|| started + args.until_synced_timeout());
    let outcome = watch_progress(&objects, &shutdown, deadline, started).await;

    stop_controller.cancel();
    match running.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(run_error(&e)),
        Err(e) => return Err(CliError::Run(format!("controller task: {e}"))),
    }
    let counters = server.counters();
    let writes = write_count(&counters);
    server.shutdown().await;
    match outcome {
        Watch::Synced(p) => {
            say(&format!(
                "All {} Foos synced in {:.1}s: {} Deployments, {} Normal and {} Warning events, {} API requests ({} writes).",
                p.foos,
                started.elapsed().as_secs_f64(),
                p.deployments,
                p.normal_events,
                p.warning_events,
                counters.total,
                writes
            ));
            Ok(())
        }
        Watch::Interrupted => Ok(()),
        Watch::TimedOut(p) => Err(CliError::Run(format!(
            "timed out after {:?}: {}/{} Foos synced (still waiting: {})",
            args.until_synced_timeout(),
            p.synced,
            p.foos,
            p.lagging.join("; ")
        ))),
    }
}

/// The in-process API server with the Foo CRD and `--foos` Foos, and a
/// client of it.
async fn seeded_server(args: &Args) -> Result<(TestServer, Client), CliError> {
    let run_error = |e: &dyn std::fmt::Display| CliError::Run(e.to_string());
    let server = embedded::start_server().await.map_err(|e| run_error(&e))?;
    let client = embedded::client_for(&server, args.rate_limit()).map_err(|e| run_error(&e))?;
    crate::artifacts::install_foo_crd(&client, Duration::from_secs(30))
        .await
        .map_err(|e| run_error(&e))?;
    let count = args.foo_count();
    say(&format!(
        "In-process API server at {} with the Foo CRD; creating {count} Foo{}...",
        server.url(),
        if count == 1 { "" } else { "s" }
    ));
    embedded::create_foos(&client, count)
        .await
        .map_err(|e| run_error(&e))?;
    Ok((server, client))
}

/// The write requests (create, update, patch, delete) the server served.
fn write_count(counters: &Counters) -> u64 {
    ["create", "update", "patch", "delete"]
        .iter()
        .map(|verb| {
            counters
                .by_verb_resource
                .iter()
                .filter(|((v, _), _)| v == verb)
                .map(|(_, n)| n)
                .sum::<u64>()
        })
        .sum()
}

/// How watching the demo ended.
enum Watch {
    Synced(Progress),
    Interrupted,
    TimedOut(Progress),
}

/// Shows progress (a redrawn line on a terminal, a line a second
/// otherwise) until every Foo is synced (with a deadline), the deadline
/// passes, or a signal arrives.
async fn watch_progress(
    objects: &kcontrol_testserver::Objects,
    shutdown: &CancellationToken,
    deadline: Option<Instant>,
    started: Instant,
) -> Watch {
    let tty = std::io::stdout().is_terminal();
    let tick = if tty {
        Duration::from_millis(250)
    } else {
        Duration::from_secs(1)
    };
    let mut last_line = String::new();
    loop {
        let p = embedded::progress(objects);
        let line = embedded::render(&p, started.elapsed());
        if tty {
            print_redrawn(&line);
        } else if line != last_line {
            say(&line);
        }
        last_line = line;
        if deadline.is_some() && p.all_synced() {
            finish_line(tty);
            return Watch::Synced(p);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            finish_line(tty);
            return Watch::TimedOut(p);
        }
        tokio::select! {
            () = shutdown.cancelled() => {
                finish_line(tty);
                return Watch::Interrupted;
            }
            () = tokio::time::sleep(tick) => {}
        }
    }
}

#[allow(clippy::print_stdout)]
fn say(line: &str) {
    println!("{line}");
}

#[allow(clippy::print_stdout)]
fn print_redrawn(line: &str) {
    print!("\r\x1b[2K{line}");
    let _ = std::io::stdout().flush();
}

#[allow(clippy::print_stdout)]
fn finish_line(tty: bool) {
    if tty {
        println!();
    }
}
