//! Predicates: which informer events may enqueue a key (controller-runtime's
//! `predicate` package). A [`Predicate`] looks at a [`Change`] (an add, an
//! update with both states, a delete) and says yes or no; predicates compose
//! with [`and`](Predicate::and), [`or`](Predicate::or) and
//! [`not`](Predicate::not).
//!
//! The ready-made ones judge updates only and let adds and deletes pass, as
//! controller-runtime's do: [`generation_changed`](Predicate::generation_changed)
//! (spec changes of resources with a `metadata.generation`; a ConfigMap has
//! none, so none of its updates pass),
//! [`resource_version_changed`](Predicate::resource_version_changed) (drops
//! periodic resyncs), [`labels_changed`](Predicate::labels_changed),
//! [`annotations_changed`](Predicate::annotations_changed). CT5.
//!
//! ```
//! use kcontrol_controller::predicate::{Change, Predicate};
//! use kcontrol_indexer::k8s_openapi::api::apps::v1::Deployment;
//!
//! let spec_or_labels = Predicate::<Deployment>::generation_changed().or(Predicate::labels_changed());
//! let (mut old, mut new) = (Deployment::default(), Deployment::default());
//! old.metadata.generation = Some(1);
//! new.metadata.generation = Some(1);
//! assert!(!spec_or_labels.matches(&Change::Updated { old: &old, new: &new }));
//! new.metadata.generation = Some(2);
//! assert!(spec_or_labels.matches(&Change::Updated { old: &old, new: &new }));
//! assert!(spec_or_labels.matches(&Change::Added(&new)));
//! ```

use std::fmt;
use std::sync::Arc;

use kcontrol_indexer::Object;

/// One informer event, as a predicate sees it.
#[derive(Debug)]
pub enum Change<'a, K> {
    /// An object was added (listed or created).
    Added(&'a K),
    /// An object changed, or was resynced (then both have one
    /// resourceVersion).
    Updated {
        /// The state before.
        old: &'a K,
        /// The state after.
        new: &'a K,
    },
    /// An object was deleted (its last known state).
    Deleted(&'a K),
}

type PredicateFn<K> = dyn Fn(&Change<'_, K>) -> bool + Send + Sync;

/// Whether an event may enqueue a key. Cheap to clone.
pub struct Predicate<K> {
    f: Arc<PredicateFn<K>>,
}

impl<K> Clone for Predicate<K> {
    fn clone(&self) -> Self {
        Self {
            f: Arc::clone(&self.f),
        }
    }
}

impl<K> fmt::Debug for Predicate<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Predicate")
    }
}

impl<K: 'static> Predicate<K> {
    /// A predicate judging every kind of event.
    pub fn new(f: impl Fn(&Change<'_, K>) -> bool + Send + Sync + 'static) -> Self {
        Self { f: Arc::new(f) }
    }

    /// A predicate judging updates by `(old, new)`; adds and deletes pass.
    pub fn on_update(f: impl Fn(&K, &K) -> bool + Send + Sync + 'static) -> Self {
        Self::new(move |change| match change {
            Change::Updated { old, new } => f(old, new),
            Change::Added(_) | Change::Deleted(_) => true,
        })
    }

    /// Events both predicates accept.
    #[must_use]
    pub fn and(self, other: Self) -> Self {
        Self::new(move |change| self.matches(change) && other.matches(change))
    }

    /// Events either predicate accepts.
    #[must_use]
    pub fn or(self, other: Self) -> Self {
        Self::new(move |change| self.matches(change) || other.matches(change))
    }

    /// Events this predicate refuses.
    #[allow(clippy::should_implement_trait)] // a builder-style combinator, as `and` and `or`
    #[must_use]
    pub fn not(self) -> Self {
        Self::new(move |change| !self.matches(change))
    }

    /// Whether `change` passes.
    pub fn matches(&self, change: &Change<'_, K>) -> bool {
        (self.f)(change)
    }
}

/// The ready-made predicates, for k8s-openapi objects.
impl<K: Object> Predicate<K> {
    /// Updates that change `metadata.generation` (the spec, for resources
    /// that count generations); adds and deletes pass.
    pub fn generation_changed() -> Self {
        Self::on_update(|old, new| old.meta().generation != new.meta().generation)
    }

    /// Updates that change `metadata.resourceVersion`: every real change,
    /// no periodic resync; adds and deletes pass.
    pub fn resource_version_changed() -> Self {
        Self::on_update(|old, new| old.resource_version() != new.resource_version())
    }

    /// Updates that change the labels; adds and deletes pass.
    pub fn labels_changed() -> Self {
        Self::on_update(|old, new| old.labels() != new.labels())
    }

    /// Updates that change the annotations; adds and deletes pass.
    pub fn annotations_changed() -> Self {
        Self::on_update(|old, new| old.annotations() != new.annotations())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(rv: &str, generation: Option<i64>, label: Option<&str>, note: Option<&str>) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.resource_version = Some(rv.into());
        cm.metadata.generation = generation;
        cm.metadata.labels = label.map(|v| [("app".to_owned(), v.to_owned())].into());
        cm.metadata.annotations = note.map(|v| [("note".to_owned(), v.to_owned())].into());
        cm
    }

    fn update(p: &Predicate<ConfigMap>, old: &ConfigMap, new: &ConfigMap) -> bool {
        p.matches(&Change::Updated { old, new })
    }

    #[test]
    fn ct5_ready_made_predicates_judge_updates_and_pass_adds_and_deletes() {
        let base = cm("1", Some(1), Some("a"), Some("x"));
        let resync = base.clone();
        let spec = cm("2", Some(2), Some("a"), Some("x"));
        let relabel = cm("2", Some(1), Some("b"), Some("x"));
        let annotate = cm("2", Some(1), Some("a"), Some("y"));
        let cases = [
            (Predicate::generation_changed(), [false, true, false, false]),
            (
                Predicate::resource_version_changed(),
                [false, true, true, true],
            ),
            (Predicate::labels_changed(), [false, false, true, false]),
            (
                Predicate::annotations_changed(),
                [false, false, false, true],
            ),
        ];
        for (p, expect) in cases {
            let got = [&resync, &spec, &relabel, &annotate].map(|new| update(&p, &base, new));
            assert_eq!(got, expect);
            assert!(p.matches(&Change::Added(&base)));
            assert!(p.matches(&Change::Deleted(&base)));
        }
    }

    #[test]
    fn ct5_predicates_compose() {
        let base = cm("1", Some(1), Some("a"), None);
        let relabel = cm("2", Some(1), Some("b"), None);
        let spec = cm("3", Some(2), Some("a"), None);
        let gen_or_labels = Predicate::generation_changed().or(Predicate::labels_changed());
        assert!(update(&gen_or_labels, &base, &relabel));
        assert!(update(&gen_or_labels, &base, &spec));
        assert!(!update(&gen_or_labels, &base, &base));
        let gen_and_labels = Predicate::generation_changed().and(Predicate::labels_changed());
        assert!(!update(&gen_and_labels, &base, &relabel));
        let not_gen = Predicate::generation_changed().not();
        assert!(update(&not_gen, &base, &relabel));
        assert!(!not_gen.matches(&Change::Added(&base)));
        // a custom predicate sees every kind of event
        let only_deletes =
            Predicate::new(|c: &Change<'_, ConfigMap>| matches!(c, Change::Deleted(_)));
        assert!(only_deletes.matches(&Change::Deleted(&base)));
        assert!(!only_deletes.matches(&Change::Added(&base)));
        assert!(!update(&only_deletes, &base, &spec));
    }
}
