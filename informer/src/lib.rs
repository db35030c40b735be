//! Shared index informers with per-handler buffering, resync and cache-sync barriers
//!
//! Not built yet: see the open issue that introduces this crate.
