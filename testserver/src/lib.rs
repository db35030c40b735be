//! An in-process Kubernetes API server for testing controllers without a cluster
//!
//! Not built yet: see the open issue that introduces this crate.
