//! Metrics (WQ7): a recording provider on a fake clock sees depth, adds,
//! queue latency, work duration, retries, unfinished work and the longest
//! running processor move as client-go defines them; unnamed queues record
//! nothing; with the `prometheus` feature, the Prometheus provider exports
//! them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use kcontrol_workqueue::metrics::{
    CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, SettableGaugeMetric,
};
use kcontrol_workqueue::{DelayingQueue, FakeClock, Queue, QueueConfig};
use parking_lot::Mutex;

/// Every value any metric took, by "<queue>/<metric>".
#[derive(Default)]
struct Recording {
    values: Mutex<HashMap<String, Vec<f64>>>,
}

impl Recording {
    fn last(&self, key: &str) -> Option<f64> {
        self.values.lock().get(key).and_then(|v| v.last().copied())
    }
    fn all(&self, key: &str) -> Vec<f64> {
        self.values.lock().get(key).cloned().unwrap_or_default()
    }
    fn push(&self, key: &str, value: f64) {
        self.values
            .lock()
            .entry(key.to_owned())
            .or_default()
            .push(value);
    }
}

struct Metric {
    rec: Arc<Recording>,
    key: String,
    value: Mutex<f64>,
}

impl Metric {
    fn change(&self, by: f64) {
        let mut v = self.value.lock();
        *v += by;
        self.rec.push(&self.key, *v);
    }
}

impl GaugeMetric for Metric {
    fn inc(&self) {
        self.change(1.0);
    }
    fn dec(&self) {
        self.change(-1.0);
    }
}
impl CounterMetric for Metric {
    fn inc(&self) {
        self.change(1.0);
    }
}
impl SettableGaugeMetric for Metric {
    fn set(&self, value: f64) {
        self.rec.push(&self.key, value);
    }
}
impl HistogramMetric for Metric {
    fn observe(&self, value: f64) {
        self.rec.push(&self.key, value);
    }
}

struct Provider(Arc<Recording>);

impl Provider {
    fn metric(&self, name: &str, what: &str) -> Box<Metric> {
        Box::new(Metric {
            rec: Arc::clone(&self.0),
            key: format!("{name}/{what}"),
            value: Mutex::new(0.0),
        })
    }
}

impl MetricsProvider for Provider {
    fn new_depth_metric(&self, name: &str) -> Box<dyn GaugeMetric> {
        self.metric(name, "depth")
    }
    fn new_adds_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        self.metric(name, "adds")
    }
    fn new_latency_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        self.metric(name, "latency")
    }
    fn new_work_duration_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        self.metric(name, "work")
    }
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Box<dyn SettableGaugeMetric> {
        self.metric(name, "unfinished")
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        self.metric(name, "longest")
    }
    fn new_retries_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        self.metric(name, "retries")
    }
}

/// Polls `cond` for up to 5 s.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        thread::sleep(Duration::from_millis(2));
    }
    false
}

/// WQ7: depth, adds, latency, work duration and retries follow the items.
#[test]
fn wq7_metrics_follow_items_through_the_queue() {
    let rec = Arc::new(Recording::default());
    let clock = Arc::new(FakeClock::new());
    let queue: DelayingQueue<&str> = DelayingQueue::with_config(
        QueueConfig::new()
            .name("foos")
            .clock(clock.clone())
            .metrics_provider(Arc::new(Provider(rec.clone()))),
    );
    queue.add("a");
    queue.add("a"); // redundant: not counted
    queue.add("b");
    assert_eq!(rec.last("foos/adds"), Some(2.0));
    assert_eq!(rec.last("foos/depth"), Some(2.0));
    clock.step(Duration::from_secs(2));
    let a = queue.get().unwrap();
    assert_eq!(rec.last("foos/depth"), Some(1.0));
    assert_eq!(rec.all("foos/latency"), vec![2.0]);
    queue.add("a"); // dirty while processing: counted
    assert_eq!(rec.last("foos/adds"), Some(3.0));
    assert_eq!(rec.last("foos/depth"), Some(2.0));
    clock.step(Duration::from_secs(3));
    queue.done(&a);
    assert_eq!(rec.all("foos/work"), vec![3.0]);
    queue.add_after("c", Duration::from_secs(1));
    assert_eq!(rec.last("foos/retries"), Some(1.0));
    queue.shut_down();
}

/// WQ7: unfinished work and the longest running processor are updated in
/// the background while an item is stuck in a worker.
#[test]
fn wq7_unfinished_work_and_longest_running_processor() {
    let rec = Arc::new(Recording::default());
    let clock = Arc::new(FakeClock::new());
    let queue: Queue<&str> = Queue::with_config(
        QueueConfig::new()
            .name("stuck")
            .clock(clock.clone())
            .metrics_provider(Arc::new(Provider(rec.clone()))),
    );
    queue.add("a");
    queue.add("b");
    let _a = queue.get().unwrap();
    clock.step(Duration::from_secs(4));
    let _b = queue.get().unwrap();
    clock.step(Duration::from_secs(6));
    assert!(
        eventually(|| rec.last("stuck/unfinished") == Some(16.0)
            && rec.last("stuck/longest") == Some(10.0)),
        "unfinished {:?} longest {:?}",
        rec.last("stuck/unfinished"),
        rec.last("stuck/longest")
    );
    queue.shut_down();
}

/// WQ7: a queue without a name records nothing (as in client-go).
#[test]
fn wq7_unnamed_queue_records_nothing() {
    let rec = Arc::new(Recording::default());
    let queue: Queue<u8> =
        Queue::with_config(QueueConfig::new().metrics_provider(Arc::new(Provider(rec.clone()))));
    queue.add(1);
    let i = queue.get().unwrap();
    queue.done(&i);
    assert!(rec.values.lock().is_empty());
}

/// WQ7: the Prometheus provider exports client-go's metric names.
#[cfg(feature = "prometheus")]
#[test]
fn wq7_prometheus_exports_workqueue_metrics() {
    use kcontrol_workqueue::metrics::prometheus::PrometheusMetricsProvider;
    use prometheus_client::registry::Registry;

    let mut registry = Registry::default();
    let provider = Arc::new(PrometheusMetricsProvider::new(&mut registry));
    let clock = Arc::new(FakeClock::new());
    let queue: DelayingQueue<String> = DelayingQueue::with_config(
        QueueConfig::new()
            .name("deployments")
            .clock(clock.clone())
            .metrics_provider(provider),
    );
    queue.add("ns/a".to_owned());
    queue.add("ns/b".to_owned());
    clock.step(Duration::from_millis(1500));
    let a = queue.get().unwrap();
    queue.done(&a);
    queue.add_after("ns/c".to_owned(), Duration::from_secs(1));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for expected in [
        r#"workqueue_depth{name="deployments"} 1"#,
        r#"workqueue_adds_total{name="deployments"} 2"#,
        r#"workqueue_retries_total{name="deployments"} 1"#,
        r#"workqueue_queue_duration_seconds_count{name="deployments"} 1"#,
        r#"workqueue_queue_duration_seconds_sum{name="deployments"} 1.5"#,
        r#"workqueue_work_duration_seconds_count{name="deployments"} 1"#,
        "# TYPE workqueue_unfinished_work_seconds gauge",
        "# TYPE workqueue_longest_running_processor_seconds gauge",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    queue.shut_down();
}

/// The background thread of a delaying queue serves it while a handle is
/// alive, and stops when its last handle is dropped (and at shutdown): no
/// thread outlives its queue.
#[cfg(target_os = "linux")]
#[test]
fn delaying_queue_thread_stops_when_last_handle_dropped() {
    use std::future::Future;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::{Context, Poll, Wake, Waker};

    /// A waker that records that it was woken.
    struct Woken(AtomicBool);
    impl Wake for Woken {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    fn threads_named(name: &str) -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|comm| comm.trim() == name)
            .count()
    }
    let queue: DelayingQueue<u8> =
        DelayingQueue::with_config(QueueConfig::new().name("wq-drop-test"));
    let other = queue.clone();
    queue.add_after(1, Duration::from_secs(3600));
    assert!(eventually(|| threads_named("workqueue-wq-dr") == 1));
    drop(queue);
    // The other handle is still served: a task parked for an item (it has
    // no timer of its own) is woken by the thread when a delayed item is
    // due.
    let woken = Arc::new(Woken(AtomicBool::new(false)));
    let waker = Waker::from(Arc::clone(&woken));
    let mut get = Box::pin(other.get_async());
    assert!(get
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    other.add_after(2, Duration::from_millis(1));
    assert!(
        eventually(|| woken.0.load(Ordering::SeqCst)),
        "the thread stopped while a handle is alive"
    );
    let got = get.as_mut().poll(&mut Context::from_waker(&waker));
    assert_eq!(got, Poll::Ready(Some(2)));
    drop(get);
    assert_eq!(threads_named("workqueue-wq-dr"), 1);
    drop(other);
    assert!(
        eventually(|| threads_named("workqueue-wq-dr") == 0),
        "timer thread outlived its queue"
    );

    let queue: DelayingQueue<u8> =
        DelayingQueue::with_config(QueueConfig::new().name("wq-shut-test"));
    queue.add_after(1, Duration::from_secs(3600));
    assert!(eventually(|| threads_named("workqueue-wq-sh") == 1));
    queue.shut_down();
    assert!(
        eventually(|| threads_named("workqueue-wq-sh") == 0),
        "timer thread outlived shutdown"
    );
}
