//! `sample-controller`: the Foo → Deployment controller (see
//! `sample_controller::cli::Args` for the flags, `--help` for usage).

use std::process::ExitCode;

/// jemalloc returns the memory a relist spike freed to the system, where
/// glibc's malloc keeps it (measured by `kcontrol-bench controller`).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's start-up options (its `malloc_conf` symbol, under the prefix
/// tikv-jemallocator gives jemalloc's symbols): see
/// [`sample_controller::JEMALLOC_CONF`].
// SAFETY: jemalloc reads this symbol once, as a `const char *` to a
// NUL-terminated string; `&u8` has that layout and points into a static.
#[cfg(feature = "jemalloc")]
#[allow(unsafe_code)]
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: &u8 = &sample_controller::JEMALLOC_CONF[0];

fn main() -> ExitCode {
    sample_controller::app::main()
}
