//! Foo to Deployment sample controller built on kcontrol

fn main() {}
