//! client-go's DeltaFIFO for kcontrol informers
//!
//! Not built yet: see the open issue that introduces this crate.
