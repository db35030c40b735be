//! CPU time and memory of a process (this one or a child), from `/proc`
//! (Linux only; elsewhere every figure reads as zero).

use std::fs;
use std::time::Duration;

/// Clock ticks per second of `/proc/<pid>/stat` times (`USER_HZ`, 100 on
/// every Linux ABI).
const TICKS_PER_SECOND: u64 = 100;

/// User + system CPU time of process `pid` (`"self"` for this one).
pub fn cpu_time(pid: &str) -> Duration {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Duration::ZERO;
    };
    // The command name (field 2) may hold spaces: count fields after its ')'.
    let Some(rest) = stat.rfind(')').and_then(|i| stat.get(i + 1..)) else {
        return Duration::ZERO;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after the name.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Duration::from_millis((ticks(11) + ticks(12)) * 1000 / TICKS_PER_SECOND)
}

fn status_kib(pid: &str, field: &str) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(field))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Resident memory of `pid` in bytes (`VmRSS`).
pub fn rss_bytes(pid: &str) -> u64 {
    status_kib(pid, "VmRSS:") * 1024
}

/// Peak resident memory of `pid` in bytes since start or the last
/// [`reset_peak`] (`VmHWM`).
pub fn peak_rss_bytes(pid: &str) -> u64 {
    status_kib(pid, "VmHWM:") * 1024
}

/// Resets the peak of `pid` to its current RSS; whether the kernel agreed.
pub fn reset_peak(pid: &str) -> bool {
    fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        if !std::path::Path::new("/proc/self/stat").exists() {
            return;
        }
        let mut x = 0u64;
        for i in 0..50_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(cpu_time("self") > Duration::ZERO);
        assert!(rss_bytes("self") > 0);
        assert!(peak_rss_bytes("self") >= rss_bytes("self") / 2);
    }
}
