//! The integration tests of controller in one test binary (one link instead
//! of one per file; each file is a module). A file that needs a process of
//! its own (environment variables, say) stays beside this directory.

mod support;
mod widgets;

mod apply_owned;
mod configmap_to_secret;
mod controller;
mod converge;
mod expectations;
mod finalizers;
mod health;
mod leader_election;
mod long_running_task;
mod manager;
mod metrics;
mod operator;
mod read_your_writes;
mod sharding;
mod webhook_example;
mod webhook_server;
mod webhooks;
mod workers;
