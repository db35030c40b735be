//! `sample-controller`: see `sample_controller::cli`.

fn main() {}
