//! [`parallelize`]: run `work(i)` for every piece `i` in `0..pieces` on up
//! to `workers` threads (client-go's `workqueue.ParallelizeUntil`), with
//! optional chunking and cancellation. The calling thread is one of the
//! workers; it returns when every piece ran or cancellation stopped the
//! handing out of pieces.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// How to split and when to stop a [`parallelize_with`] run.
#[derive(Clone, Copy, Debug)]
pub struct ParallelizeOptions<'a> {
    /// Pieces a worker takes at a time (at least 1).
    pub chunk_size: usize,
    /// Once set, no further piece is started.
    pub stop: Option<&'a AtomicBool>,
}

impl Default for ParallelizeOptions<'_> {
    fn default() -> Self {
        Self {
            chunk_size: 1,
            stop: None,
        }
    }
}

/// Runs `work(i)` for each `i` in `0..pieces` on up to `workers` threads
/// (at least one: the caller's). A panic in `work` is re-raised here once
/// every worker stopped.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// let sum = AtomicUsize::new(0);
/// kcontrol_workqueue::parallelize(100, 4, |i| {
///     sum.fetch_add(i, Ordering::Relaxed);
/// });
/// assert_eq!(sum.into_inner(), 4950);
/// ```
pub fn parallelize<F>(pieces: usize, workers: usize, work: F)
where
    F: Fn(usize) + Sync,
{
    parallelize_with(pieces, workers, ParallelizeOptions::default(), work);
}

/// [`parallelize`] that stops handing out pieces once `stop` is set.
/// Returns whether every piece ran.
pub fn parallelize_until<F>(pieces: usize, workers: usize, stop: &AtomicBool, work: F) -> bool
where
    F: Fn(usize) + Sync,
{
    let options = ParallelizeOptions {
        stop: Some(stop),
        ..ParallelizeOptions::default()
    };
    parallelize_with(pieces, workers, options, work) == pieces
}

/// [`parallelize`] with options. Returns how many pieces ran.
pub fn parallelize_with<F>(
    pieces: usize,
    workers: usize,
    options: ParallelizeOptions<'_>,
    work: F,
) -> usize
where
    F: Fn(usize) + Sync,
{
    if pieces == 0 {
        return 0;
    }
    let chunk = options.chunk_size.max(1);
    let chunks = pieces.div_ceil(chunk);
    let workers = workers.clamp(1, chunks);
    let next = AtomicUsize::new(0);
    let ran = AtomicUsize::new(0);
    let worker = || {
        let mut done = 0;
        loop {
            if options.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                break;
            }
            let start = next.fetch_add(chunk, Ordering::Relaxed);
            if start >= pieces {
                break;
            }
            let end = start.saturating_add(chunk).min(pieces);
            for i in start..end {
                work(i);
            }
            done += end - start;
        }
        ran.fetch_add(done, Ordering::Relaxed);
    };
    std::thread::scope(|scope| {
        for _ in 1..workers {
            scope.spawn(worker);
        }
        worker();
    });
    ran.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn every_piece_runs_exactly_once() {
        for (pieces, workers, chunk) in [
            (0, 4, 1),
            (1, 4, 1),
            (1000, 4, 1),
            (1000, 3, 7),
            (10, 100, 3),
            (5, 0, 1),
        ] {
            let seen = Mutex::new(vec![0u32; pieces]);
            let options = ParallelizeOptions {
                chunk_size: chunk,
                stop: None,
            };
            let ran = parallelize_with(pieces, workers, options, |i| seen.lock().unwrap()[i] += 1);
            assert_eq!(ran, pieces);
            assert!(seen.into_inner().unwrap().iter().all(|n| *n == 1));
        }
    }

    #[test]
    fn stop_flag_stops_handing_out_pieces() {
        let stop = AtomicBool::new(false);
        let count = AtomicUsize::new(0);
        let complete = parallelize_until(10_000, 2, &stop, |i| {
            count.fetch_add(1, Ordering::Relaxed);
            if i == 10 {
                stop.store(true, Ordering::Relaxed);
            }
        });
        assert!(!complete);
        assert!(count.into_inner() < 10_000);
        let stop = AtomicBool::new(false);
        assert!(parallelize_until(100, 2, &stop, |_| {}));
    }
}
