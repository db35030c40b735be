//! `testserver-watch-replay`: a watch from an old resourceVersion that
//! replays the bulk load's events from the history to one watcher, beside
//! the same frames streamed by the bare reference server.
//! `testserver-watch-live`: updates through the in-process `objects()` API
//! from a writer thread, delivered live to one watcher: delivered events/s,
//! writes/s, and write-to-receive latency, at full speed and paced.

use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kcontrol_testserver::Objects;
use serde_json::{json, Value};

use super::conn::{read_frames, Conn};
use super::reference::Reference;
use super::{best, mb_per_sec, OBJECTS, RUNS};
use crate::fixtures::{self, NAMESPACE};
use crate::report::{row, Report};

/// Frames per chunk of the reference stream: what the server's watcher
/// sends per history read.
const REFERENCE_BATCH: usize = 1024;

fn watch_path(rv: u64) -> String {
    format!("/api/v1/namespaces/{NAMESPACE}/configmaps?watch=true&resourceVersion={rv}")
}

/// Replays the `events` events after `from_rv` (the bulk load) from the
/// history of the server at `addr`.
pub async fn replay(
    report: &mut Report,
    addr: SocketAddr,
    from_rv: u64,
    events: usize,
) -> Result<(), String> {
    let path = watch_path(from_rv);
    let frames = collect_frames(addr, &path, events).await?;
    let served = best(RUNS, async || {
        let mut conn = Conn::open(addr).await?;
        let start = Instant::now();
        let mut body = conn.get(&path).await?;
        let bytes = read_frames(&mut body, events, |_, _, _| {}).await?;
        Ok((bytes, start.elapsed().as_secs_f64()))
    })
    .await?;
    let reference = Reference::start(batches(&frames, REFERENCE_BATCH)).await?;
    let referenced = best(RUNS, async || {
        let mut conn = Conn::open(reference.addr()).await?;
        let start = Instant::now();
        let mut body = conn.get("/stream").await?;
        let bytes = read_frames(&mut body, events, |_, _, _| {}).await?;
        Ok((bytes, start.elapsed().as_secs_f64()))
    })
    .await?;
    let (bytes, secs) = (served.value, served.secs);
    let reference_secs = referenced.secs;
    let rate = events as f64 / secs;
    let reference_rate = events as f64 / reference_secs;
    report.row(row([
        ("scenario", json!("testserver-watch-replay")),
        ("events", json!(events)),
        ("bytes", json!(bytes)),
        ("seconds", json!(secs)),
        ("events_per_sec", json!(rate)),
        ("mb_per_sec", json!(mb_per_sec(bytes, secs))),
        ("reference_events_per_sec", json!(reference_rate)),
        ("ratio", json!(rate / reference_rate)),
        ("measured", json!(format!("best of {RUNS}: watch from the resourceVersion before the bulk load, request to last of {events} ADDED frames, read by a plain hyper client and not decoded; reference: the same frames streamed in chunks of {REFERENCE_BATCH} by a bare hyper server to the same client"))),
    ]));
    Ok(())
}

/// The first `events` frames of the watch at `path`, as received.
async fn collect_frames(addr: SocketAddr, path: &str, events: usize) -> Result<Bytes, String> {
    let mut conn = Conn::open(addr).await?;
    let mut body = conn.get(path).await?;
    let mut all = Vec::new();
    read_frames(&mut body, events, |data, _, _| {
        all.extend_from_slice(data);
    })
    .await?;
    if memchr::memchr_iter(b'\n', &all).count() != events || all.last() != Some(&b'\n') {
        return Err(format!(
            "watch replay: expected exactly {events} frames before the stream went idle"
        ));
    }
    Ok(Bytes::from(all))
}

/// `frames` cut into chunks of `per_chunk` whole frames.
fn batches(frames: &Bytes, per_chunk: usize) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut start = 0usize;
    for (n, end) in memchr::memchr_iter(b'\n', frames).enumerate() {
        if (n + 1) % per_chunk == 0 {
            out.push(frames.slice(start..=end));
            start = end + 1;
        }
    }
    if start < frames.len() {
        out.push(frames.slice(start..));
    }
    out
}

/// How the writer of a live run spaces its writes.
#[derive(Clone, Copy)]
pub enum Pace {
    /// As fast as the server accepts them.
    Max,
    /// This many writes a second.
    PerSec(u32),
}

/// What the writer thread measured.
struct Written {
    /// When each write was handed to the server.
    started: Vec<Instant>,
    /// When the last write returned.
    end: Instant,
    /// The writer thread's scheduler times during the writes.
    sched: Sched,
}

/// One live run, measured.
struct LiveRun {
    writes_per_sec: f64,
    events_per_sec: f64,
    /// Sorted write-to-receive latencies, µs.
    latencies: Vec<f64>,
    /// CPU time of the writer thread per write, µs.
    writer_cpu_us: f64,
    /// Share of the writer's wall time spent running.
    writer_cpu_share: f64,
    /// Share of the writer's wall time spent runnable but waiting for a CPU.
    writer_wait_share: f64,
}

/// `runs` live runs of `writes` updates from a writer thread delivered to
/// one watcher; reports the run that delivered fastest.
pub async fn live(
    report: &mut Report,
    addr: SocketAddr,
    objects: &Objects,
    (writes, runs): (usize, usize),
    pace: Pace,
) -> Result<(), String> {
    let (mode, target) = match pace {
        Pace::Max => ("max", Value::Null),
        Pace::PerSec(n) => ("paced", json!(n)),
    };
    let mut best: Option<LiveRun> = None;
    for run in 0..runs.max(1) {
        let measured = live_run(addr, objects, writes, pace, &format!("{mode}{run}")).await?;
        if best
            .as_ref()
            .is_none_or(|b| measured.events_per_sec > b.events_per_sec)
        {
            best = Some(measured);
        }
    }
    let Some(run) = best else {
        return Ok(());
    };
    report.row(row([
        ("scenario", json!("testserver-watch-live")),
        ("mode", json!(mode)),
        ("target_writes_per_sec", target),
        ("writes", json!(writes)),
        ("writes_per_sec", json!(run.writes_per_sec)),
        ("events_per_sec", json!(run.events_per_sec)),
        ("p50_latency_us", json!(percentile(&run.latencies, 0.50))),
        ("p99_latency_us", json!(percentile(&run.latencies, 0.99))),
        ("max_latency_us", json!(percentile(&run.latencies, 1.0))),
        ("writer_cpu_us_per_write", json!(run.writer_cpu_us)),
        ("writer_cpu_share", json!(run.writer_cpu_share)),
        ("writer_wait_share", json!(run.writer_wait_share)),
        ("measured", json!(format!("best of {runs} by events_per_sec: Objects::update of distinct fixture ConfigMaps (one data value changed) from one writer thread, watched over loopback HTTP/1.1 by a plain hyper client from the resourceVersion before the first write; events_per_sec: writes / (first write to last frame received); latency: write call start to arrival of the chunk holding its frame; writer_*: the writer thread's CPU time per write, and the shares of its wall time running and waiting for a CPU"))),
    ]));
    Ok(())
}

async fn live_run(
    addr: SocketAddr,
    objects: &Objects,
    writes: usize,
    pace: Pace,
    tag: &str,
) -> Result<LiveRun, String> {
    if writes == 0 {
        return Err("watch live: no writes".into());
    }
    let updates = updated_objects(writes, tag);
    let mut conn = Conn::open(addr).await?;
    let mut body = conn.get(&watch_path(objects.resource_version())).await?;
    let writer_objects = objects.clone();
    let writer = thread::Builder::new()
        .name("bench-writer".into())
        .spawn(move || write_all(&writer_objects, updates, pace))
        .map_err(|e| format!("starting the writer thread: {e}"))?;
    let mut arrivals: Vec<(usize, Instant)> = Vec::with_capacity(writes / 8);
    let mut tail: Vec<u8> = Vec::with_capacity(2 * TAIL);
    let read = read_frames(&mut body, writes, |data, seen, at| {
        arrivals.push((seen, at));
        keep_tail(&mut tail, data);
    })
    .await;
    let written = writer
        .join()
        .map_err(|_| "the writer thread panicked".to_owned())??;
    read?;
    // One writer, one resource, no other writes: the k-th frame is the
    // k-th write. Check the last one is the last write's.
    let last_mark = mark(tag, writes - 1);
    if memchr::memmem::find(&tail, last_mark.as_bytes()).is_none() {
        return Err("watch live: the last frame is not the last write".into());
    }
    let Some(&first) = written.started.first() else {
        return Err("watch live: no writes".into());
    };
    let Some(&(_, last_arrival)) = arrivals.last() else {
        return Err("watch live: no events".into());
    };
    let mut latencies = latencies_us(&written.started, &arrivals);
    latencies.sort_by(f64::total_cmp);
    let write_secs = written.end.duration_since(first).as_secs_f64();
    let deliver_secs = last_arrival.duration_since(first).as_secs_f64();
    Ok(LiveRun {
        writes_per_sec: writes as f64 / write_secs,
        events_per_sec: writes as f64 / deliver_secs,
        latencies,
        writer_cpu_us: written.sched.cpu_secs / writes as f64 * 1e6,
        writer_cpu_share: written.sched.cpu_secs / write_secs,
        writer_wait_share: written.sched.wait_secs / write_secs,
    })
}

/// Bytes kept from the end of a live watch stream: more than one frame.
const TAIL: usize = 4096;

/// Keeps the last [`TAIL`] bytes of a stream in `tail`.
fn keep_tail(tail: &mut Vec<u8>, data: &[u8]) {
    tail.extend_from_slice(
        data.get(data.len().saturating_sub(TAIL)..)
            .unwrap_or_default(),
    );
    let excess = tail.len().saturating_sub(TAIL);
    tail.drain(..excess);
}

/// The data value that marks write `i` of the run tagged `tag` (45 bytes,
/// as the fixture's).
fn mark(tag: &str, i: usize) -> String {
    format!("{:x<45}", format!("{tag}-{i}-"))
}

/// Fixture objects `0..writes`, each with one data value changed, as a
/// client would send them to update (no resourceVersion: unconditional).
/// Built before the run so the writer measures the server, not the harness.
fn updated_objects(writes: usize, tag: &str) -> Vec<Value> {
    (0..writes)
        .map(|i| {
            let mut v = fixtures::configmap_value(i % OBJECTS, 0);
            if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
                meta.remove("uid");
            }
            v["data"]["alpha"] = json!(mark(tag, i));
            v
        })
        .collect()
}

/// The writer thread: every update in order, spaced by `pace`.
fn write_all(objects: &Objects, updates: Vec<Value>, pace: Pace) -> Result<Written, String> {
    let mut started = Vec::with_capacity(updates.len());
    let sched_start = Sched::now();
    let begin = Instant::now();
    for (i, object) in updates.into_iter().enumerate() {
        if let Pace::PerSec(rate) = pace {
            let due = begin + Duration::from_secs_f64(i as f64 / f64::from(rate.max(1)));
            let now = Instant::now();
            if due > now {
                thread::sleep(due - now);
            }
        }
        started.push(Instant::now());
        objects
            .update("configmaps", NAMESPACE, object)
            .map_err(|e| format!("update {i}: {e}"))?;
    }
    let end = Instant::now();
    Ok(Written {
        started,
        end,
        sched: Sched::now().since(sched_start),
    })
}

/// The calling thread's scheduler times, from `/proc/thread-self/schedstat`
/// (zero where that file does not exist).
#[derive(Clone, Copy, Default)]
struct Sched {
    /// Time spent running on a CPU.
    cpu_secs: f64,
    /// Time spent runnable, waiting for a CPU.
    wait_secs: f64,
}

impl Sched {
    fn now() -> Self {
        let Ok(text) = std::fs::read_to_string("/proc/thread-self/schedstat") else {
            return Self::default();
        };
        let mut fields = text
            .split_whitespace()
            .map(|f| f.parse::<u64>().unwrap_or(0) as f64 / 1e9);
        Self {
            cpu_secs: fields.next().unwrap_or(0.0),
            wait_secs: fields.next().unwrap_or(0.0),
        }
    }

    fn since(self, start: Self) -> Self {
        Self {
            cpu_secs: (self.cpu_secs - start.cpu_secs).max(0.0),
            wait_secs: (self.wait_secs - start.wait_secs).max(0.0),
        }
    }
}

/// Latency of each write: from its start to the arrival of the chunk that
/// completed its frame. `arrivals` holds (frames complete, arrival time)
/// in order.
fn latencies_us(started: &[Instant], arrivals: &[(usize, Instant)]) -> Vec<f64> {
    let mut out = Vec::with_capacity(started.len());
    let mut chunk = arrivals.iter().peekable();
    for (k, start) in started.iter().enumerate() {
        while chunk.peek().is_some_and(|(seen, _)| *seen <= k) {
            chunk.next();
        }
        if let Some((_, at)) = chunk.peek() {
            out.push(at.saturating_duration_since(*start).as_secs_f64() * 1e6);
        }
    }
    out
}

/// The `q` quantile of sorted `values` (nearest rank), 0 when empty.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted.get(rank - 1).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_bytes_across_chunks() {
        let mut tail = Vec::new();
        keep_tail(&mut tail, &[1; TAIL]);
        keep_tail(&mut tail, b"ab");
        assert_eq!(tail.len(), TAIL);
        assert!(tail.ends_with(&[1, b'a', b'b']));
    }

    #[test]
    fn batches_keep_whole_frames() {
        let frames = Bytes::from_static(b"a\nb\nc\nd\ne\n");
        let chunks = batches(&frames, 2);
        let sizes: Vec<&[u8]> = chunks.iter().map(|b| b.as_ref()).collect();
        assert_eq!(sizes, [&b"a\nb\n"[..], b"c\nd\n", b"e\n"]);
    }

    #[test]
    fn each_write_meets_the_chunk_that_completed_its_frame() {
        let t0 = Instant::now();
        let at = |us| t0 + Duration::from_micros(us);
        let started = [at(0), at(10), at(20)];
        // frames 1 and 2 arrive together at 50 us, frame 3 at 70 us
        let arrivals = [(2, at(50)), (3, at(70))];
        let got = latencies_us(&started, &arrivals);
        assert_eq!(got.len(), 3);
        assert!((got[0] - 50.0).abs() < 1.0 && (got[1] - 40.0).abs() < 1.0);
        assert!((got[2] - 50.0).abs() < 1.0);
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&v, 1.0), 100.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
