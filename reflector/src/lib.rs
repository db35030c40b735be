//! The Reflector: ListAndWatch from the Kubernetes API into a DeltaFIFO
//!
//! Not built yet: see the open issue that introduces this crate.
