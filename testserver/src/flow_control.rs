//! The admission limit: at most K API requests in flight, as
//! kube-apiserver's priority and fairness (APF) seats them, and 429 with
//! `Retry-After: 1` for a request that finds every seat taken.
//!
//! A request holds its seat from admission until its answer has been sent
//! (a list until the last byte of its body, as APF's handler returns only
//! then). A watch holds one only until it is initialized, as APF counts
//! watches (`WatchInitialized` in the watch cache, once the initial events
//! are out): a plain watch from a version as soon as its answer starts, a
//! WatchList (`sendInitialEvents=true`) until its initial events and their
//! end bookmark are queued to the client. Watches streaming afterwards take
//! no seat.
//!
//! Unlike APF there are no priority levels, no queues (a request that
//! finds no seat is rejected at once, as APF does when a level's queues are
//! full) and the `Retry-After` stays at 1 s (APF starts there and doubles it,
//! up to 32 s, while many requests are dropped).

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use crate::http::body::ResponseBody;

/// The `Retry-After` of a request rejected for want of a seat, in seconds.
pub(crate) const RETRY_AFTER_SECS: u64 = 1;

/// The limit and the seats taken.
#[derive(Debug, Default)]
pub(crate) struct FlowControl {
    /// 0: no limit.
    limit: AtomicUsize,
    in_flight: Arc<AtomicUsize>,
    rejected: AtomicU64,
}

/// A seat taken by an admitted request; freed when dropped.
#[derive(Debug)]
pub(crate) struct Seat {
    in_flight: Arc<AtomicUsize>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl FlowControl {
    /// An admission limit of `limit` seats (`None`: none).
    pub(crate) fn new(limit: Option<usize>) -> Self {
        let flow_control = Self::default();
        flow_control.set_limit(limit);
        flow_control
    }

    pub(crate) fn set_limit(&self, limit: Option<usize>) {
        self.limit.store(limit.unwrap_or(0), Ordering::SeqCst);
    }

    /// A seat for a request, `Err` when every one is taken (the request is
    /// answered 429). A request always gets one when there is no limit.
    pub(crate) fn admit(&self) -> Result<Seat, Rejected> {
        let limit = self.limit.load(Ordering::SeqCst);
        let taken = self
            .in_flight
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (limit == 0 || n < limit).then_some(n + 1)
            });
        match taken {
            Ok(_) => Ok(Seat {
                in_flight: self.in_flight.clone(),
            }),
            Err(_) => {
                self.rejected.fetch_add(1, Ordering::SeqCst);
                Err(Rejected)
            }
        }
    }

    /// Seats taken now.
    pub(crate) fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::SeqCst) as u64
    }

    /// Requests rejected since start.
    pub(crate) fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::SeqCst)
    }

    pub(crate) fn clear_rejected(&self) {
        self.rejected.store(0, Ordering::SeqCst);
    }
}

/// Every seat was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rejected;

/// The answer to a request that found no seat: 429 with `Retry-After`, a
/// plain-text body as APF writes it.
pub(crate) fn rejection() -> hyper::Response<ResponseBody> {
    let mut r = hyper::Response::new(crate::http::body::full(
        "Too many requests, please try again later.\n",
    ));
    *r.status_mut() = http::StatusCode::TOO_MANY_REQUESTS;
    let headers = r.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from(RETRY_AFTER_SECS),
    );
    r
}

/// A response body that keeps its request's seat until the last byte has
/// been handed to the connection (or the body is dropped: the client went
/// away).
pub(crate) struct SeatedBody {
    inner: ResponseBody,
    seat: Option<Seat>,
}

impl SeatedBody {
    pub(crate) fn new(inner: ResponseBody, seat: Seat) -> Self {
        Self {
            inner,
            seat: Some(seat),
        }
    }
}

impl Body for SeatedBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.seat = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[test]
    fn at_most_limit_seats_and_a_freed_seat_is_taken_again() {
        let flow_control = FlowControl::new(Some(2));
        let a = flow_control.admit().unwrap();
        let b = flow_control.admit().unwrap();
        assert_eq!(flow_control.admit().unwrap_err(), Rejected);
        assert_eq!((flow_control.in_flight(), flow_control.rejected()), (2, 1));
        drop(a);
        let c = flow_control.admit().unwrap();
        assert_eq!(flow_control.in_flight(), 2);
        drop((b, c));
        assert_eq!(flow_control.in_flight(), 0);
        flow_control.set_limit(None);
        let many: Vec<Seat> = (0..100).map(|_| flow_control.admit().unwrap()).collect();
        assert_eq!(flow_control.in_flight(), 100);
        drop(many);
        assert_eq!(flow_control.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_seated_body_frees_its_seat_at_its_end_or_when_dropped() {
        let flow_control = FlowControl::new(Some(1));
        let body = SeatedBody::new(
            crate::http::body::full("hello"),
            flow_control.admit().unwrap(),
        );
        assert_eq!(flow_control.in_flight(), 1);
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"hello");
        assert_eq!(flow_control.in_flight(), 0);

        let dropped = SeatedBody::new(
            crate::http::body::full("never read"),
            flow_control.admit().unwrap(),
        );
        assert!(flow_control.admit().is_err());
        drop(dropped);
        assert!(flow_control.admit().is_ok());
    }

    #[test]
    fn the_rejection_is_a_429_asking_for_one_second() {
        let r = rejection();
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()[http::header::RETRY_AFTER], "1");
    }
}
