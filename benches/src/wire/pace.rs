//! The answer body of the wire server: the captured bytes in 64 KiB chunks,
//! on a token-bucket schedule counted from the start of the answer (chunk
//! `n` leaves once the bytes before it fit the rate: no chunk early, a late
//! one catches up at once, so the average rate is exact however coarse the
//! timer), then, for a watch, the connection held open without a byte
//! until `hold` has passed or the client has gone.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// Bytes a chunk.
pub const CHUNK: usize = 64 * 1024;

/// A paced answer body.
pub struct PacedBody {
    data: Bytes,
    sent: usize,
    /// Bytes a second; `None` sends as fast as the connection takes them.
    rate: Option<f64>,
    /// When the first chunk left (the schedule's origin).
    start: Option<Instant>,
    timer: Pin<Box<Sleep>>,
    /// How long a watch stays open after its bytes (`None`: the body ends).
    hold: Option<Duration>,
    hold_until: Option<Instant>,
}

impl PacedBody {
    /// `data` at `rate` bytes a second (`None`: unpaced), then held open
    /// for `hold` when given.
    pub fn new(data: Bytes, rate: Option<f64>, hold: Option<Duration>) -> Self {
        Self {
            data,
            sent: 0,
            rate: rate.filter(|r| r.is_finite() && *r > 0.0),
            start: None,
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
            hold,
            hold_until: None,
        }
    }

    /// When the chunk after `sent` bytes may leave.
    fn due(&self, start: Instant) -> Option<Instant> {
        let rate = self.rate?;
        Some(start + Duration::from_secs_f64(self.sent as f64 / rate))
    }

    /// Waits for `deadline` on the body's timer.
    fn wait(&mut self, deadline: Instant, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= deadline {
            return Poll::Ready(());
        }
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        self.timer.as_mut().poll(cx)
    }
}

impl Body for PacedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if this.sent < this.data.len() {
            let start = *this.start.get_or_insert_with(Instant::now);
            if let Some(due) = this.due(start) {
                if this.wait(due, cx).is_pending() {
                    return Poll::Pending;
                }
            }
            let end = (this.sent + CHUNK).min(this.data.len());
            let chunk = this.data.slice(this.sent..end);
            this.sent = end;
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        let Some(hold) = this.hold else {
            return Poll::Ready(None);
        };
        let until = *this.hold_until.get_or_insert_with(|| Instant::now() + hold);
        match this.wait(until, cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.sent >= self.data.len() && self.hold.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        // no Content-Length, as kube-apiserver streams its answers
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    fn data(len: usize) -> Bytes {
        Bytes::from((0..len).map(|i| i as u8).collect::<Vec<u8>>())
    }

    /// Unpaced: every byte in order, in chunks of at most CHUNK, then the end.
    #[tokio::test]
    async fn unpaced_sends_every_byte_in_chunks() {
        let bytes = data(3 * CHUNK + 17);
        let mut body = PacedBody::new(bytes.clone(), None, None);
        let mut got = Vec::new();
        while let Some(frame) = body.frame().await {
            let chunk = frame.unwrap().into_data().unwrap();
            assert!(chunk.len() <= CHUNK);
            got.extend_from_slice(&chunk);
        }
        assert_eq!(got, bytes);
        assert!(body.is_end_stream());
    }

    /// Paced on tokio's paused clock: chunk n leaves exactly when the bytes
    /// before it fit the rate, none earlier.
    #[tokio::test(start_paused = true)]
    async fn paced_chunks_leave_on_the_rate_schedule() {
        let rate = CHUNK as f64 * 10.0; // ten chunks a second
        let mut body = PacedBody::new(data(5 * CHUNK), Some(rate), None);
        let origin = Instant::now();
        let mut times = Vec::new();
        while let Some(frame) = body.frame().await {
            frame.unwrap();
            times.push(origin.elapsed());
        }
        let want: Vec<Duration> = (0..5).map(|n| Duration::from_millis(100 * n)).collect();
        assert_eq!(times.len(), 5);
        for (got, want) in times.iter().zip(&want) {
            assert!(got.abs_diff(*want) <= Duration::from_millis(1), "{times:?}");
        }
    }

    /// A watch body is held open after its bytes until the hold has passed.
    #[tokio::test(start_paused = true)]
    async fn a_watch_body_is_held_open_after_its_bytes() {
        let hold = Duration::from_secs(60);
        let mut body = PacedBody::new(data(10), None, Some(hold));
        assert_eq!(
            body.frame()
                .await
                .unwrap()
                .unwrap()
                .into_data()
                .unwrap()
                .len(),
            10
        );
        assert!(!body.is_end_stream());
        let held = Instant::now();
        assert!(body.frame().await.is_none());
        assert!(held.elapsed() >= hold);
    }
}
