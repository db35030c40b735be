//! The ring's members as the sharder sees them: one
//! `coordination.k8s.io/v1` Lease per member, live while its record keeps
//! changing. As leader election's LE2, a Lease expires `leaseDurationSeconds`
//! after this process *saw its record change* — never by comparing the
//! `renewTime` written by another machine with this one's clock.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use tokio::time::Instant;

/// A member's Lease, as last seen.
#[derive(Debug)]
struct Seen {
    spec: LeaseSpec,
    /// When this process saw the record change.
    at: Instant,
}

impl Seen {
    fn holder(&self) -> Option<&str> {
        self.spec
            .holder_identity
            .as_deref()
            .filter(|h| !h.is_empty())
    }

    fn expiry(&self) -> Instant {
        let seconds = self.spec.lease_duration_seconds.unwrap_or(0);
        self.at + Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
    }
}

/// The ring's Leases, keyed by Lease name.
#[derive(Debug, Default)]
pub struct Members {
    leases: HashMap<String, Seen>,
}

impl Members {
    /// Records `lease` as seen at `now` (its record's change time moves
    /// only when the record changed).
    pub fn observe(&mut self, lease: &Lease, now: Instant) {
        let Some(name) = lease.metadata.name.clone() else {
            return;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        match self.leases.get_mut(&name) {
            Some(seen) if seen.spec == spec => {}
            Some(seen) => {
                seen.spec = spec;
                seen.at = now;
            }
            None => {
                self.leases.insert(name, Seen { spec, at: now });
            }
        }
    }

    /// Forgets a deleted Lease.
    pub fn remove(&mut self, name: &str) {
        self.leases.remove(name);
    }

    /// The holders of the Leases that have not expired at `now`.
    pub fn live(&self, now: Instant) -> BTreeSet<String> {
        self.leases
            .values()
            .filter(|s| s.expiry() > now)
            .filter_map(|s| s.holder().map(str::to_owned))
            .collect()
    }

    /// The next moment a held, live Lease expires (the live set may shrink
    /// then), if any.
    pub fn next_expiry(&self, now: Instant) -> Option<Instant> {
        self.leases
            .values()
            .filter(|s| s.holder().is_some())
            .map(Seen::expiry)
            .filter(|e| *e > now)
            .min()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

    /// A member Lease `name` held by `holder` for `seconds`, renewed at
    /// the Unix second `renew`.
    pub(in crate::sharding) fn lease(
        name: &str,
        holder: Option<&str>,
        seconds: i32,
        renew: i64,
    ) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                lease_duration_seconds: Some(seconds),
                renew_time: Some(MicroTime(
                    k8s_openapi::jiff::Timestamp::from_second(renew).unwrap_or_default(),
                )),
                ..LeaseSpec::default()
            }),
        }
    }

    /// SH5: a member is live until its Lease's duration has passed since
    /// its record was last seen to change; a renewal (a new record) keeps
    /// it; the same record seen again does not; a released Lease (no
    /// holder) is not a member.
    #[test]
    fn sh5_expiry_counts_from_the_local_observation_of_a_change() {
        let t0 = Instant::now();
        let mut members = Members::default();
        // a renewTime far in the past or future changes nothing (LE2)
        members.observe(&lease("a", Some("a"), 10, 0), t0);
        members.observe(&lease("b", Some("b"), 10, 99_999_999_999), t0);
        assert_eq!(
            members.live(t0),
            BTreeSet::from(["a".to_owned(), "b".to_owned()])
        );
        assert_eq!(members.next_expiry(t0), Some(t0 + Duration::from_secs(10)));
        let t1 = t0 + Duration::from_secs(6);
        members.observe(&lease("a", Some("a"), 10, 1), t1); // renewed
        members.observe(&lease("b", Some("b"), 10, 99_999_999_999), t1); // same record
        let t2 = t0 + Duration::from_secs(11);
        assert_eq!(members.live(t2), BTreeSet::from(["a".to_owned()]));
        assert_eq!(members.next_expiry(t2), Some(t1 + Duration::from_secs(10)));
        members.observe(&lease("a", None, 1, 2), t2); // released
        assert!(members.live(t2).is_empty());
        members.remove("a");
        assert_eq!(members.next_expiry(t2), None);
    }
}
