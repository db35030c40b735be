//! `sample-controller` (its main lands with the controller).

fn main() {}
