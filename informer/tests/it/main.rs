//! Integration tests of the informer against the in-process API server
//! (`kcontrol-testserver`) over real HTTP on 127.0.0.1: every IN rule end
//! to end, the factory, and the chaos test (RF8 through the informer: the
//! store and every handler converge to the server after random faults).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod chaos;
mod e2e;
mod encodings;
mod factory;
#[cfg(feature = "prometheus")]
mod factory_metrics;
mod lean;
mod support;
