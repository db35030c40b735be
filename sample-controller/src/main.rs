//! `sample-controller`: the Foo → Deployment controller (see
//! `sample_controller::cli::Args` for the flags, `--help` for usage).

use std::process::ExitCode;

/// jemalloc returns the memory a relist spike freed to the system, where
/// glibc's malloc keeps much of it (measured by `kcontrol-bench controller`).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    sample_controller::app::main()
}
