//! kcontrol cross-crate end-to-end tests
//!
//! Not built yet: see the open issue that introduces this crate.
