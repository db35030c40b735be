//! CPU time and memory of a process (this one or a child), from `/proc`
//! (Linux only; elsewhere every figure reads as zero).

use std::fs;
use std::time::Duration;

/// Clock ticks per second of `/proc/<pid>/stat` times (`USER_HZ`, 100 on
/// every Linux ABI).
const TICKS_PER_SECOND: u64 = 100;

/// User + system CPU time of process `pid` (`"self"` for this one).
pub fn cpu_time(pid: &str) -> Duration {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_or(Duration::ZERO, |stat| parse_cpu_time(&stat))
}

/// User + system CPU time in the text of a `/proc/<pid>/stat` file (zero
/// when it cannot be read).
fn parse_cpu_time(stat: &str) -> Duration {
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
    fs::read_to_string(format!("/proc/{pid}/status")).map_or(0, |status| parse_kib(&status, field))
}

/// The `field` (e.g. `VmRSS:`) of a `/proc/<pid>/status` text, in KiB (0
/// when absent).
fn parse_kib(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
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
    use std::time::Instant;

    use super::*;

    /// The parsers, on fixed texts: a command name with spaces and a
    /// parenthesis, and missing or malformed fields.
    #[test]
    fn parses_stat_and_status_texts() {
        let stat = "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 500 0 0 0 \
                    250 130 0 0 20 0 3 0 100 12345678 900";
        assert_eq!(parse_cpu_time(stat), Duration::from_millis(3_800));
        assert_eq!(parse_cpu_time("4242 (cmd) S 1"), Duration::ZERO);
        assert_eq!(parse_cpu_time("no parenthesis"), Duration::ZERO);
        let status = "Name:\tcmd\nVmHWM:\t  20480 kB\nVmRSS:\t  10240 kB\n";
        assert_eq!(parse_kib(status, "VmRSS:"), 10_240);
        assert_eq!(parse_kib(status, "VmHWM:"), 20_480);
        assert_eq!(parse_kib(status, "VmSwap:"), 0);
        assert_eq!(parse_kib("VmRSS:\tlots kB\n", "VmRSS:"), 0);
    }

    /// The readers, on this process. CPU time grows in clock ticks (10 ms),
    /// so the test burns CPU until its own reading moves rather than assume
    /// that some fixed work is enough on a loaded machine; the deadline is
    /// only a safety net (a stuck reader fails there).
    #[test]
    fn reads_this_process() {
        if !std::path::Path::new("/proc/self/stat").exists() {
            return;
        }
        let before = cpu_time("self");
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut x = 0u64;
        while cpu_time("self") <= before {
            assert!(
                Instant::now() < deadline,
                "CPU time never moved from {before:?}"
            );
            for i in 0..1_000_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
        }
        assert!(rss_bytes("self") > 0);
        // Other tests may reset the peak meanwhile: it is then the size at
        // that moment, never zero.
        assert!(peak_rss_bytes("self") > 0);
    }
}
