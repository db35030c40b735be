//! `--reconcile-log`: one line per reconcile, `<replica> <key> <start>
//! <end>` (nanoseconds since the Unix epoch), appended to a file several
//! replicas may share. Each line goes out in one `write` on a file opened
//! with `O_APPEND`, so lines of different processes never interleave.
//! Off by default; when on, its cost is one small write per reconcile.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

use parking_lot::Mutex;

/// An open reconcile log.
#[derive(Debug)]
pub struct ReconcileLog {
    replica: String,
    file: Mutex<File>,
}

/// Now, in nanoseconds since the Unix epoch.
pub fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

impl ReconcileLog {
    /// Opens (creates) `path` for appending, lines naming `replica`.
    ///
    /// # Errors
    /// When the file cannot be opened.
    pub fn open(path: &Path, replica: impl Into<String>) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            replica: replica.into(),
            file: Mutex::new(file),
        })
    }

    /// Records a reconcile of `key` from `start` to `end` (a failed write
    /// is logged, not fatal).
    pub fn record(&self, key: &str, start: u128, end: u128) {
        let line = format!("{} {key} {start} {end}\n", self.replica);
        if let Err(e) = self.file.lock().write_all(line.as_bytes()) {
            tracing::warn!(error = %e, "writing the reconcile log failed");
        }
    }
}

/// One reconcile read back from a log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedReconcile {
    /// The replica that ran it.
    pub replica: String,
    /// The key reconciled.
    pub key: String,
    /// When it started (ns since the epoch).
    pub start: u128,
    /// When it ended.
    pub end: u128,
}

/// Parses a reconcile log; malformed lines (a replica killed mid-write)
/// are skipped.
pub fn parse(text: &str) -> Vec<LoggedReconcile> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.split(' ');
            let replica = parts.next()?.to_owned();
            let key = parts.next()?.to_owned();
            let start = parts.next()?.parse().ok()?;
            let end = parts.next()?.parse().ok()?;
            parts.next().is_none().then_some(LoggedReconcile {
                replica,
                key,
                start,
                end,
            })
        })
        .collect()
}

/// Pairs of reconciles of one key by two replicas whose intervals overlap.
pub fn overlaps(log: &[LoggedReconcile]) -> Vec<(LoggedReconcile, LoggedReconcile)> {
    let mut by_key: std::collections::HashMap<&str, Vec<&LoggedReconcile>> =
        std::collections::HashMap::new();
    for r in log {
        by_key.entry(&r.key).or_default().push(r);
    }
    let mut found = Vec::new();
    for runs in by_key.values_mut() {
        runs.sort_by_key(|r| r.start);
        // the latest-ending interval so far: any later start before its
        // end on another replica overlaps it
        let mut reach: Option<&LoggedReconcile> = None;
        for r in runs.iter() {
            if let Some(prev) = reach {
                if r.start < prev.end && r.replica != prev.replica {
                    found.push(((*prev).clone(), (*r).clone()));
                }
                if r.end > prev.end {
                    reach = Some(r);
                }
            } else {
                reach = Some(r);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_intervals_of_one_key_on_two_replicas_are_found() {
        let log = parse(
            "a ns/x 10 20\nb ns/x 20 30\na ns/y 10 50\nb ns/y 40 45\na ns/z 1 5\na ns/z 2 3\ntorn",
        );
        assert_eq!(log.len(), 6);
        let found = overlaps(&log);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].1.key, "ns/y");
    }
}
