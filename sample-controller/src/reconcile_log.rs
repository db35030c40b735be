//! `--reconcile-log`: one line per reconcile, `<replica> <key> <start>
//! <end>` (nanoseconds since the Unix epoch), appended to a file several
//! replicas may share. Each line goes out in one `write` on a file opened
//! with `O_APPEND`, so lines of different processes never interleave.
//! Off by default; when on, its cost is one small write per reconcile.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
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

/// Reads a growing reconcile log a piece at a time: each
/// [`read_new`](Self::read_new) parses only the lines appended since the
/// last one, so that a harness polling a long log does not take the CPU
/// from the replicas it measures.
#[derive(Debug)]
pub struct LogTail {
    path: PathBuf,
    offset: u64,
    /// The start of a line not yet complete.
    rest: Vec<u8>,
}

impl LogTail {
    /// A tail of `path`, from its start.
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
            offset: 0,
            rest: Vec::new(),
        }
    }

    /// The reconciles of the lines completed since the last call (none
    /// while the file does not exist).
    ///
    /// # Errors
    /// When the file exists and cannot be read.
    pub fn read_new(&mut self) -> std::io::Result<Vec<LoggedReconcile>> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        file.seek(SeekFrom::Start(self.offset))?;
        // into a buffer of its own: a read that fails part way leaves
        // the tail as it was, to read again
        let mut new = Vec::new();
        file.read_to_end(&mut new)?;
        self.offset += new.len() as u64;
        self.rest.extend_from_slice(&new);
        let complete = self
            .rest
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let lines: Vec<u8> = self.rest.drain(..complete).collect();
        Ok(parse(&String::from_utf8_lossy(&lines)))
    }
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

    #[test]
    fn a_tail_reads_each_complete_line_once() {
        let dir = std::env::temp_dir().join(format!("reconcile-log-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log");
        let mut tail = LogTail::new(&path);
        assert!(tail.read_new().unwrap().is_empty(), "no file yet");
        let append = |text: &str| {
            let mut f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap();
            f.write_all(text.as_bytes()).unwrap();
        };
        append("a ns/x 1 2\nb ns/");
        let first = tail.read_new().unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].key, "ns/x");
        append("y 3 4\n");
        let second = tail.read_new().unwrap();
        assert_eq!((second.len(), second[0].key.as_str()), (1, "ns/y"));
        assert!(tail.read_new().unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
