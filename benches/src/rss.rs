//! Resident memory of this process, read from `/proc/self/status`
//! (Linux only; other systems report zero). Scenarios that measure memory
//! use these; the `fixtures` scenario has none yet.
#![allow(dead_code)]

use std::fs;

/// Current resident set size in bytes (`VmRSS`).
pub fn current_bytes() -> u64 {
    status_kib("VmRSS:") * 1024
}

/// Peak resident set size in bytes since start or the last [`reset_peak`] (`VmHWM`).
pub fn peak_bytes() -> u64 {
    status_kib("VmHWM:") * 1024
}

/// Resets the peak (`VmHWM`) to the current RSS by writing `5` to
/// `/proc/self/clear_refs`. Returns whether the kernel accepted it.
pub fn reset_peak() -> bool {
    fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// A field of another process's `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`)
/// in bytes; zero when it cannot be read.
pub fn process_bytes(pid: u32, field: &str) -> u64 {
    read_kib(&format!("/proc/{pid}/status"), field) * 1024
}

fn status_kib(field: &str) -> u64 {
    read_kib("/proc/self/status", field)
}

fn read_kib(path: &str, field: &str) -> u64 {
    let Ok(status) = fs::read_to_string(path) else {
        return 0;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
