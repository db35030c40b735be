//! kcontrol benchmark harness

fn main() {}
