//! A deduplicating, delaying, rate-limited work queue with client-go semantics
//!
//! Not built yet: see the open issue that introduces this crate.
