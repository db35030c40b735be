//! The reflector's contracts RF1–RF9 against the testserver over real
//! loopback HTTP, each test making the server misbehave the way its rule
//! is about, with an informer-like consumer popping the DeltaFIFO into a
//! ThreadSafeStore.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod back_in_time;
mod backoff;
mod convergence;
mod encodings;
mod lifecycle;
mod list;
mod pacing;
mod relist;
mod restart;
mod support;
mod watch;
mod watch_list;
