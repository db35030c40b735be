//! Status conditions (`status.conditions`, a list of
//! [`Condition`]s keyed by `type`), kept as apimachinery's `meta` helpers
//! keep them: a condition's `lastTransitionTime` moves only when its status
//! changes, so readers can tell how long it has been `True`; reason,
//! message and `observedGeneration` follow every update. CT15.
//!
//! ```
//! use kcontrol_controller::conditions::{
//!     is_condition_true, new_condition, set_condition, ConditionStatus,
//! };
//! use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
//!
//! let mut foo = ConfigMap::default(); // a custom resource in practice
//! foo.metadata.generation = Some(3);
//! let mut conditions = Vec::new();
//! let ready = new_condition(&foo, "Ready", ConditionStatus::True, "Synced", "all replicas up");
//! assert!(set_condition(&mut conditions, ready.clone())); // added, stamped now
//! assert!(!set_condition(&mut conditions, ready)); // the same again: no change, no write
//! assert!(is_condition_true(&conditions, "Ready"));
//! assert_eq!(conditions[0].observed_generation, Some(3));
//! ```

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kcontrol_indexer::Object;

/// A condition's `status`: `True`, `False` or `Unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`: the controller cannot tell (yet).
    Unknown,
}

impl ConditionStatus {
    /// The wire form: `"True"`, `"False"` or `"Unknown"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(b: bool) -> Self {
        if b {
            Self::True
        } else {
            Self::False
        }
    }
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `lastTransitionTime` that means "not set": [`set_condition`] puts
/// the current time in its place (the Unix epoch; any time at or before it,
/// such as Go's zero time, is taken as unset too).
pub fn unset_time() -> Time {
    Time(Timestamp::UNIX_EPOCH)
}

fn is_unset(time: &Time) -> bool {
    time.0 <= Timestamp::UNIX_EPOCH
}

/// Now, in whole seconds (as the API server stores and serializes times,
/// so a condition read back equals the one written).
fn now() -> Time {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    // out of range only for a clock beyond year 9999; then the latest time
    Time(Timestamp::from_second(seconds).unwrap_or(Timestamp::MAX))
}

/// A condition of `type_` about `obj`: `observedGeneration` is the
/// object's `metadata.generation` (the spec this status describes),
/// `lastTransitionTime` unset (so [`set_condition`] decides it).
pub fn new_condition<K: Object + ?Sized>(
    obj: &K,
    type_: impl Into<String>,
    status: ConditionStatus,
    reason: impl Into<String>,
    message: impl Into<String>,
) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.as_str().to_owned(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: obj.meta().generation,
        last_transition_time: unset_time(),
    }
}

/// Sets `condition.observedGeneration` to `obj`'s `metadata.generation`.
pub fn observe_generation<K: Object + ?Sized>(condition: &mut Condition, obj: &K) {
    condition.observed_generation = obj.meta().generation;
}

/// Adds `new`, or updates the condition of its type; whether anything
/// changed (false: no status write is needed). CT15:
///
/// - absent: `new` is appended, its `lastTransitionTime` set to now when
///   unset;
/// - present with another status: status updated, `lastTransitionTime`
///   set to `new`'s, or now when unset;
/// - present with the same status: `lastTransitionTime` kept;
/// - in both cases reason, message and `observedGeneration` take `new`'s.
pub fn set_condition(conditions: &mut Vec<Condition>, new: Condition) -> bool {
    set_condition_at(conditions, new, now)
}

/// [`set_condition`] with the clock given (the tests').
fn set_condition_at(
    conditions: &mut Vec<Condition>,
    mut new: Condition,
    now: impl FnOnce() -> Time,
) -> bool {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == new.type_) else {
        if is_unset(&new.last_transition_time) {
            new.last_transition_time = now();
        }
        conditions.push(new);
        return true;
    };
    let mut changed = false;
    if existing.status != new.status {
        existing.status = new.status;
        existing.last_transition_time = if is_unset(&new.last_transition_time) {
            now()
        } else {
            new.last_transition_time
        };
        changed = true;
    }
    if existing.reason != new.reason {
        existing.reason = new.reason;
        changed = true;
    }
    if existing.message != new.message {
        existing.message = new.message;
        changed = true;
    }
    if existing.observed_generation != new.observed_generation {
        existing.observed_generation = new.observed_generation;
        changed = true;
    }
    changed
}

/// The condition of `type_`, if any.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Removes the condition of `type_`; whether there was one.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// Whether the condition of `type_` is present with status `True`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    has_status(conditions, type_, ConditionStatus::True)
}

/// Whether the condition of `type_` is present with status `False`
/// (absent or `Unknown` is neither true nor false).
pub fn is_condition_false(conditions: &[Condition], type_: &str) -> bool {
    has_status(conditions, type_, ConditionStatus::False)
}

/// Whether the condition of `type_` is present with `status`.
pub fn has_status(conditions: &[Condition], type_: &str, status: ConditionStatus) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == status.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use proptest::prelude::*;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).unwrap_or(Timestamp::UNIX_EPOCH))
    }

    fn cond(type_: &str, status: &str, reason: &str, gen: Option<i64>, ltt: Time) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: format!("{reason} message"),
            observed_generation: gen,
            last_transition_time: ltt,
        }
    }

    #[test]
    fn ct15_added_with_now_unless_a_time_is_given() {
        let mut list = Vec::new();
        assert!(set_condition_at(
            &mut list,
            cond("Ready", "False", "Init", Some(1), unset_time()),
            || at(100)
        ));
        assert!(set_condition_at(
            &mut list,
            cond("Synced", "True", "Ok", None, at(50)),
            || at(100)
        ));
        assert_eq!(list[0].last_transition_time, at(100));
        assert_eq!(list[1].last_transition_time, at(50));
        assert!(is_condition_false(&list, "Ready") && is_condition_true(&list, "Synced"));
        assert!(!is_condition_true(&list, "Missing") && !is_condition_false(&list, "Missing"));
    }

    #[test]
    fn ct15_the_transition_time_moves_only_with_the_status() {
        let mut list = vec![cond("Ready", "False", "Init", Some(1), at(10))];
        // same status, new reason and generation: updated, time kept
        assert!(set_condition_at(
            &mut list,
            cond("Ready", "False", "Waiting", Some(2), unset_time()),
            || at(20)
        ));
        assert_eq!(list, [cond("Ready", "False", "Waiting", Some(2), at(10))]);
        // status change: time now
        assert!(set_condition_at(
            &mut list,
            cond("Ready", "True", "Up", Some(2), unset_time()),
            || at(30)
        ));
        assert_eq!(list, [cond("Ready", "True", "Up", Some(2), at(30))]);
        // status change with a time given: that time
        assert!(set_condition_at(
            &mut list,
            cond("Ready", "Unknown", "Lost", Some(2), at(25)),
            || at(40)
        ));
        assert_eq!(list[0].last_transition_time, at(25));
        // unchanged
        assert!(!set_condition_at(
            &mut list,
            cond("Ready", "Unknown", "Lost", Some(2), unset_time()),
            || at(50)
        ));
        assert_eq!(list[0].last_transition_time, at(25));
    }

    #[test]
    fn ct15_find_remove_and_observed_generation() {
        let mut cm = ConfigMap::default();
        cm.metadata.generation = Some(7);
        let mut c = new_condition(&cm, "Ready", ConditionStatus::from(true), "R", "m");
        assert_eq!(
            (c.status.as_str(), c.observed_generation),
            ("True", Some(7))
        );
        assert!(is_unset(&c.last_transition_time));
        cm.metadata.generation = Some(8);
        observe_generation(&mut c, &cm);
        assert_eq!(c.observed_generation, Some(8));
        let mut list = Vec::new();
        assert!(set_condition(&mut list, c));
        assert!(!is_unset(&list[0].last_transition_time));
        assert!(find_condition(&list, "Ready").is_some());
        assert!(!remove_condition(&mut list, "Other"));
        assert!(remove_condition(&mut list, "Ready"));
        assert!(list.is_empty() && find_condition(&list, "Ready").is_none());
        // the stamped time survives the wire (whole seconds)
        assert!(set_condition(
            &mut list,
            new_condition(&cm, "Ready", ConditionStatus::Unknown, "R", "m")
        ));
        let wire = serde_json::to_value(&list[0]).unwrap_or_default();
        let back: Result<Condition, _> = serde_json::from_value(wire);
        assert_eq!(back.ok().as_ref(), list.first());
    }

    fn any_condition() -> impl Strategy<Value = Condition> {
        (
            prop::sample::select(vec!["Ready", "Synced", "Degraded"]),
            prop::sample::select(vec!["True", "False", "Unknown"]),
            prop::sample::select(vec!["A", "B"]),
            prop::option::of(1i64..3),
            prop::option::of(1i64..1_000),
        )
            .prop_map(|(t, s, r, gen, ltt)| cond(t, s, r, gen, ltt.map_or_else(unset_time, at)))
    }

    proptest! {
        /// lastTransitionTime changes iff the status changes (or the
        /// condition is new); the other fields always follow; other types
        /// are untouched; the same condition set twice changes nothing.
        #[test]
        fn ct15_set_condition_properties(
            initial in prop::collection::vec(any_condition(), 0..4),
            new in any_condition(),
        ) {
            // one condition per type, as set_condition keeps them
            let mut list = Vec::new();
            for c in initial {
                set_condition_at(&mut list, c, || at(2_000));
            }
            let before = list.clone();
            let old = find_condition(&before, &new.type_).cloned();
            let changed = set_condition_at(&mut list, new.clone(), || at(5_000));
            let got = find_condition(&list, &new.type_).cloned();
            prop_assert!(got.is_some());
            let got = got.unwrap_or_else(|| new.clone());
            prop_assert_eq!(&got.status, &new.status);
            prop_assert_eq!(&got.reason, &new.reason);
            prop_assert_eq!(&got.message, &new.message);
            prop_assert_eq!(got.observed_generation, new.observed_generation);
            let transition = old.as_ref().is_none_or(|o| o.status != new.status);
            let expected_time = if !transition {
                old.as_ref().map(|o| o.last_transition_time.clone()).unwrap_or_else(unset_time)
            } else if is_unset(&new.last_transition_time) {
                at(5_000)
            } else {
                new.last_transition_time.clone()
            };
            prop_assert_eq!(&got.last_transition_time, &expected_time);
            // with no time given: the time moves iff the status changes
            if let (Some(o), true) = (&old, is_unset(&new.last_transition_time)) {
                prop_assert_eq!(
                    got.last_transition_time != o.last_transition_time,
                    o.status != new.status
                );
            }
            // a time never given is never kept unset
            prop_assert!(!is_unset(&got.last_transition_time));
            let same_fields = old.as_ref().is_some_and(|o| {
                o.status == new.status
                    && o.reason == new.reason
                    && o.message == new.message
                    && o.observed_generation == new.observed_generation
            });
            prop_assert_eq!(changed, !same_fields);
            prop_assert_eq!(changed, list != before);
            for c in &before {
                if c.type_ != new.type_ {
                    prop_assert_eq!(find_condition(&list, &c.type_), Some(c));
                }
            }
            // idempotent
            let after = list.clone();
            prop_assert!(!set_condition_at(&mut list, new, || at(9_000)));
            prop_assert_eq!(list, after);
        }
    }
}
