//! kcontrol-testserver (under construction).
#![allow(dead_code)]
pub mod status;
pub(crate) mod timeutil;
pub(crate) mod meta;
pub mod resource;
pub mod store;
pub(crate) mod builtin;
pub(crate) mod registry;
pub(crate) mod selector;
pub(crate) mod schema;
pub(crate) mod patch;
pub(crate) mod crd;
pub(crate) mod rest;
pub(crate) mod controllers;
pub mod faults;
pub mod metrics;
pub(crate) mod tls;
pub(crate) mod kubeconfig;
pub(crate) mod http { pub mod request; }

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// TLS setup failed.
    #[error("TLS setup: {0}")]
    Tls(String),
    /// Binding or serving failed.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}
