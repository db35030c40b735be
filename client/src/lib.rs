//! Kubernetes API client for kcontrol: config, TLS, auth, requests and watch streams
//!
//! Not built yet: see the open issue that introduces this crate.
