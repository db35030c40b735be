//! The integration tests of client in one test binary (one link instead
//! of one per file; each file is a module). A file that needs a process of
//! its own (environment variables, say) stays beside this directory.

mod support;

mod auth;
mod discovery;
mod errors;
mod events;
mod events_v1;
mod exec;
mod kubeconfig;
mod list_stream;
mod protobuf;
mod requests;
mod safe_defaults;
mod tls;
mod watch_decoder;
