//! [`ShardingConfig`]: the ring, this replica's member name, the Lease
//! timings, and the label names derived from them.

use std::time::Duration;

use crate::leader_election::{
    LeaderElectionConfig, LeaderElectionError, DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE,
    DEFAULT_RETRY_PERIOD,
};

/// The label every member Lease of a ring carries, its value the ring's name.
pub const RING_LABEL: &str = "sharding.kcontrol.dev/ring";
/// The prefix of the assignment label (`shard.kcontrol.dev/<ring>: <member>`).
pub const SHARD_LABEL_PREFIX: &str = "shard.kcontrol.dev/";
/// The prefix of the drain label (`drain.kcontrol.dev/<ring>: "true"`).
pub const DRAIN_LABEL_PREFIX: &str = "drain.kcontrol.dev/";

/// Why sharding could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShardingError {
    /// A configuration value is invalid.
    #[error("invalid sharding configuration: {0}")]
    Config(String),
    /// The member Lease could not be held (not renewed within the renew
    /// deadline): this replica stopped reconciling.
    #[error("ring membership lost: {0}")]
    Membership(#[source] LeaderElectionError),
    /// The sharder could not start its informers.
    #[error("sharder: {0}")]
    Sharder(String),
}

/// One replica's place in a ring: which ring, under which member name, with
/// which Lease timings (client-go's leader-election defaults: 15 s, 10 s,
/// 2 s).
#[derive(Clone, Debug)]
pub struct ShardingConfig {
    /// The namespace of the member Leases and of the sharder's Lease.
    pub namespace: String,
    /// The ring's name (a label name segment: at most 63 of `[A-Za-z0-9-_.]`).
    pub ring: String,
    /// This replica's member name: its Lease's name, holder identity and
    /// the shard label's value (a DNS label: at most 63 of `[a-z0-9-]`;
    /// default: the host name and a random suffix).
    pub member: String,
    /// The member Lease's duration (whole seconds).
    pub lease_duration: Duration,
    /// How long a member keeps trying to renew before it stops reconciling.
    pub renew_deadline: Duration,
    /// Between two renewals.
    pub retry_period: Duration,
    /// The sharder's concurrent writes per kind (default 16: after a
    /// member dies, its objects are reassigned as fast as the server takes
    /// the writes).
    pub sharder_workers: usize,
}

impl ShardingConfig {
    /// The ring `ring` with Leases in `namespace`, a fresh member name and
    /// client-go's Lease timings.
    pub fn new(namespace: impl Into<String>, ring: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            ring: ring.into(),
            member: default_member(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
            sharder_workers: 16,
        }
    }

    /// This member name instead of the generated one.
    #[must_use]
    pub fn member(mut self, member: impl Into<String>) -> Self {
        self.member = member.into();
        self
    }

    /// These Lease timings (duration > renew deadline > 1.2 × retry).
    #[must_use]
    pub fn lease_timings(
        mut self,
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Self {
        self.lease_duration = lease_duration;
        self.renew_deadline = renew_deadline;
        self.retry_period = retry_period;
        self
    }

    /// The assignment label's name, `shard.kcontrol.dev/<ring>`.
    pub fn shard_label(&self) -> String {
        format!("{SHARD_LABEL_PREFIX}{}", self.ring)
    }

    /// The drain label's name, `drain.kcontrol.dev/<ring>`.
    pub fn drain_label(&self) -> String {
        format!("{DRAIN_LABEL_PREFIX}{}", self.ring)
    }

    /// The label selector of this replica's informers:
    /// `shard.kcontrol.dev/<ring>=<member>`.
    pub fn selector(&self) -> String {
        format!("{}={}", self.shard_label(), self.member)
    }

    /// The sharder's leader-election Lease, `<ring>-sharder`. Its standbys
    /// watch it ([`LeaderElectionConfig::watch`]): a new sharder starts a
    /// lease duration after the dead one's last renewal, not after the
    /// poll that saw it.
    pub fn sharder_lease(&self) -> LeaderElectionConfig {
        LeaderElectionConfig {
            watch: true,
            ..self.lease(format!("{}-sharder", self.ring))
        }
    }

    /// This member's Lease (its own name; nobody else competes for it).
    pub fn member_lease(&self) -> LeaderElectionConfig {
        self.lease(self.member.clone())
    }

    fn lease(&self, name: String) -> LeaderElectionConfig {
        LeaderElectionConfig {
            namespace: self.namespace.clone(),
            name,
            identity: self.member.clone(),
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
            release_on_cancel: true,
            watch: false,
        }
    }

    /// Checks the names (ring, member) and the Lease timings.
    ///
    /// # Errors
    /// [`ShardingError::Config`] naming what is wrong.
    pub fn validate(&self) -> Result<(), ShardingError> {
        let bad = |m: String| Err(ShardingError::Config(m));
        let ring_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if self.ring.is_empty() || self.ring.len() > 63 || !self.ring.chars().all(ring_ok) {
            return bad(format!(
                "the ring name {:?} must be 1-63 characters of [A-Za-z0-9-_.]",
                self.ring
            ));
        }
        let member_ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
        if self.member.is_empty()
            || self.member.len() > 63
            || !self.member.chars().all(member_ok)
            || self.member.starts_with('-')
            || self.member.ends_with('-')
        {
            return bad(format!(
                "the member name {:?} must be a DNS label (1-63 characters of [a-z0-9-], alphanumeric at both ends)",
                self.member
            ));
        }
        if self.sharder_workers == 0 {
            return bad("the sharder needs at least one worker".into());
        }
        self.member_lease()
            .validate()
            .map_err(|e| ShardingError::Config(e.to_string()))
    }
}

/// The host's name (made a DNS label) and a random suffix: two replicas on
/// one host, or one restarted, never share a member name.
pub fn default_member() -> String {
    let host = crate::leader_election::default_identity();
    let host = host.rsplit_once('_').map_or(host.as_str(), |(h, _)| h);
    let mut clean: String = host
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    clean = clean.trim_matches('-').to_owned();
    if clean.is_empty() {
        clean = "member".to_owned();
    }
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{clean}-{}", &suffix[..10])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_selector_and_leases_follow_the_ring_and_member() {
        let config = ShardingConfig::new("kube-system", "foos").member("r-1");
        assert_eq!(config.shard_label(), "shard.kcontrol.dev/foos");
        assert_eq!(config.drain_label(), "drain.kcontrol.dev/foos");
        assert_eq!(config.selector(), "shard.kcontrol.dev/foos=r-1");
        assert_eq!(config.sharder_lease().name, "foos-sharder");
        assert_eq!(config.member_lease().name, "r-1");
        assert_eq!(config.member_lease().identity, "r-1");
        assert!(config.validate().is_ok());
    }

    #[test]
    fn bad_names_and_timings_are_typed_errors() {
        let base = ShardingConfig::new("ns", "foos");
        assert!(base.validate().is_ok(), "{:?}", base.member);
        for bad in [
            base.clone().member("Upper"),
            base.clone().member("a_b"),
            base.clone().member(""),
            base.clone().member("-a"),
            ShardingConfig {
                ring: "a/b".into(),
                ..base.clone()
            },
            ShardingConfig {
                ring: String::new(),
                ..base.clone()
            },
            base.clone().lease_timings(
                Duration::from_secs(5),
                Duration::from_secs(10),
                Duration::from_secs(2),
            ),
        ] {
            assert!(
                matches!(bad.validate(), Err(ShardingError::Config(_))),
                "{bad:?}"
            );
        }
    }
}
