//! The soak's time series: the controller's RSS sampled every
//! [`SAMPLE_EVERY`] from the first start to the end of the settle, and the
//! time of each fault, both in seconds since the run started. The soak row
//! carries them as `rss_samples: [[seconds, bytes], ...]` and
//! `fault_times: [[seconds, "kind"], ...]`, with `rss_warm_at_s` (the
//! warm-up reading), `churn_end_s` (churn and faults stop, the settle
//! begins) and `settled_at_s`; `kcontrol-bench plot` draws them.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::process::Controller;

/// How often the controller's RSS is read (one `/proc/<pid>/status` read).
pub const SAMPLE_EVERY: Duration = Duration::from_millis(500);

/// RSS samples and fault times of one soak run.
#[derive(Debug)]
pub struct Timeline {
    started: Instant,
    next_sample: Instant,
    rss: Vec<(f64, u64)>,
    faults: Vec<(f64, &'static str)>,
    marks: Vec<(&'static str, f64)>,
}

impl Timeline {
    /// An empty timeline whose clock starts at `started`.
    pub fn new(started: Instant) -> Self {
        Self {
            started,
            next_sample: started,
            rss: Vec::new(),
            faults: Vec::new(),
            marks: Vec::new(),
        }
    }

    fn seconds(&self, at: Instant) -> f64 {
        // milliseconds are enough and keep the JSON line short
        (at.saturating_duration_since(self.started).as_secs_f64() * 1000.0).round() / 1000.0
    }

    /// Reads the controller's RSS when a sample is due (none while no
    /// controller runs, or when its RSS cannot be read).
    pub fn sample(&mut self, controller: Option<&Controller>) {
        let now = Instant::now();
        if now < self.next_sample {
            return;
        }
        while self.next_sample <= now {
            self.next_sample += SAMPLE_EVERY;
        }
        if let Some(rss) = controller.map(Controller::rss).filter(|rss| *rss > 0) {
            self.rss.push((self.seconds(now), rss));
        }
    }

    /// Notes a fault (its kind's name) injected now.
    pub fn fault(&mut self, kind: &'static str) {
        self.faults.push((self.seconds(Instant::now()), kind));
    }

    /// Notes a named moment (`rss_warm_at_s`, `churn_end_s`, ...) now; a
    /// later mark of the same name replaces the earlier one.
    pub fn mark(&mut self, name: &'static str) {
        let at = self.seconds(Instant::now());
        self.marks.retain(|(n, _)| *n != name);
        self.marks.push((name, at));
    }

    /// The row's fields: `rss_samples`, `fault_times` and each mark.
    pub fn fields(&self) -> Vec<(&'static str, Value)> {
        let rss: Vec<Value> = self.rss.iter().map(|(t, b)| json!([t, b])).collect();
        let faults: Vec<Value> = self.faults.iter().map(|(t, k)| json!([t, k])).collect();
        let mut fields = vec![("rss_samples", json!(rss)), ("fault_times", json!(faults))];
        fields.extend(self.marks.iter().map(|(name, t)| (*name, json!(t))));
        fields
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_only_when_due_and_with_a_controller() {
        let mut timeline = Timeline::new(Instant::now());
        // no controller: nothing recorded, but the sample was due
        timeline.sample(None);
        timeline.sample(None);
        timeline.fault("watch_drop");
        timeline.mark("churn_end_s");
        timeline.mark("churn_end_s");
        let fields = timeline.fields();
        let names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["rss_samples", "fault_times", "churn_end_s"]);
        assert_eq!(fields[0].1, json!([]));
        let fault = &fields[1].1[0];
        assert_eq!(fault[1], "watch_drop");
        assert!(fault[0].as_f64().unwrap() >= 0.0);
        assert!(fields[2].1.as_f64().unwrap() >= fault[0].as_f64().unwrap());
        // the next sample is due one period after the first
        assert!(timeline.next_sample > timeline.started);
        assert!(timeline.next_sample <= timeline.started + SAMPLE_EVERY * 2);
    }
}
