//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//! `tools/leaderelection` semantics: of all the candidates that run a
//! [`LeaderElector`] on the same Lease, at most one leads at a time.
//!
//! - A candidate tries to acquire every retry period plus up to 1.2 times
//!   it (client-go's jitter), and when the holder's record will have
//!   expired. It may take the Lease when the Lease has no holder, or when
//!   the holder's record has not changed for the record's lease duration
//!   *as observed locally* (LE2: the holder's `renewTime` is never compared
//!   with this machine's clock; only the moment this candidate saw the
//!   record change is). With [`LeaderElectionConfig::watch`] a standby also
//!   watches the Lease, so that it sees each renewal when it happens.
//! - Every write carries the Lease's `resourceVersion` (LE3): of two
//!   candidates writing the same version, one gets 409 Conflict and loses.
//! - The leader renews every retry period, first with the Lease it wrote
//!   last (one request), and after a 409 at once again from a fresh read
//!   (LE5). If no renewal succeeded for the renew deadline since the last
//!   successful one started, it stops leading (LE4): its
//!   leading token is cancelled before the Lease can have expired for
//!   anyone else, since renew deadline < lease duration.
//! - On graceful shutdown the leader releases the Lease (no holder, a 1 s
//!   duration), so that a standby takes over at its next try (LE6).
//!
//! Defaults are client-go's: lease 15 s, renew deadline 10 s, retry 2 s.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kcontrol_client::{Api, Client, PostParams};
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use follow::Follow;

mod follow;

/// The client-go defaults.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// The client-go default renew deadline.
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// The client-go default retry period.
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// The wall clock as a Lease timestamp (written for people and for other
/// candidates' change detection; never compared with anything, LE2).
fn wall_clock_now() -> Timestamp {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let seconds = i64::try_from(since_epoch.as_secs()).unwrap_or(0);
    let nanos = i32::try_from(since_epoch.subsec_nanos()).unwrap_or(0);
    Timestamp::new(seconds, nanos).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The jitter factor of the retry period, client-go's `JitterFactor`: a
/// standby waits the retry period plus up to 1.2 times it (`[p, 2.2p)`),
/// as `wait.JitterUntil` does, so standbys never poll the Lease more often
/// than client-go's would.
const JITTER: f64 = 1.2;

/// `period` plus a random part of `JITTER × period` (client-go's
/// `wait.Jitter(period, JitterFactor)`).
fn jittered(period: Duration) -> Duration {
    let random = (uuid::Uuid::new_v4().as_u128() % 1000) as f64 / 1000.0;
    period.mul_f64(1.0 + JITTER * random)
}

/// Why leader election could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum LeaderElectionError {
    /// A configuration value is out of range.
    #[error("invalid leader election configuration: {0}")]
    Config(String),
    /// This candidate led and could not renew the Lease before its renew
    /// deadline: it stopped leading.
    #[error(
        "leader election lost: lease {namespace}/{name} not renewed within {renew_deadline:?}"
    )]
    Lost {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// The renew deadline that passed.
        renew_deadline: Duration,
    },
}

/// What a [`LeaderElector`] competes for, and how.
#[derive(Clone, Debug)]
pub struct LeaderElectionConfig {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This candidate's identity (default: [`default_identity`]).
    pub identity: String,
    /// How long a holder's record counts after a candidate saw it change
    /// (whole seconds, at least 1; default 15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops leading
    /// (default 10 s; less than the lease duration).
    pub renew_deadline: Duration,
    /// Between two tries to acquire or renew (default 2 s; renew deadline >
    /// 1.2 × retry period).
    pub retry_period: Duration,
    /// Release the Lease when [`LeaderElector::run`]'s shutdown token is
    /// cancelled (default true).
    pub release_on_cancel: bool,
    /// A standby watches the Lease besides polling it (default false, as
    /// client-go): it sees each renewal when it is written rather than at
    /// its next poll (up to 2.2 retry periods later), so it takes over a
    /// dead leader's Lease up to that much sooner, still a full lease
    /// duration after it saw the last renewal. Costs one watch per standby,
    /// opened at most once a lease duration.
    pub watch: bool,
}

impl LeaderElectionConfig {
    /// client-go's defaults for the Lease `namespace/name`, with a fresh
    /// [`default_identity`].
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            identity: default_identity(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
            release_on_cancel: true,
            watch: false,
        }
    }

    /// Checks client-go's constraints: lease duration > renew deadline >
    /// 1.2 × retry period > 0, a lease duration of whole seconds, non-empty
    /// names and identity.
    pub fn validate(&self) -> Result<(), LeaderElectionError> {
        let bad = |m: String| Err(LeaderElectionError::Config(m));
        if self.namespace.is_empty() || self.name.is_empty() {
            return bad("the Lease namespace and name must not be empty".into());
        }
        if self.identity.is_empty() {
            return bad("the identity must not be empty".into());
        }
        if self.retry_period.is_zero() {
            return bad("the retry period must be positive".into());
        }
        if self.lease_duration.as_secs() == 0 || self.lease_duration.subsec_nanos() != 0 {
            return bad(format!(
                "the lease duration must be whole seconds, at least 1 (got {:?})",
                self.lease_duration
            ));
        }
        if self.lease_duration <= self.renew_deadline {
            return bad(format!(
                "the lease duration ({:?}) must be greater than the renew deadline ({:?})",
                self.lease_duration, self.renew_deadline
            ));
        }
        if self.renew_deadline.as_secs_f64() <= JITTER * self.retry_period.as_secs_f64() {
            return bad(format!(
                "the renew deadline ({:?}) must be greater than {JITTER} × the retry period ({:?})",
                self.renew_deadline, self.retry_period
            ));
        }
        if i32::try_from(self.lease_duration.as_secs()).is_err() {
            return bad("the lease duration is too long".into());
        }
        Ok(())
    }
}

/// The host's name and a random suffix (`host_1a2b3c4d…`): two replicas on
/// one host, or one process restarted, never share an identity.
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    format!("{host}_{}", uuid::Uuid::new_v4().simple())
}

type StartedFn = Box<dyn Fn(CancellationToken) + Send + Sync>;
type StoppedFn = Box<dyn Fn() + Send + Sync>;
type NewLeaderFn = Box<dyn Fn(&str) + Send + Sync>;

#[derive(EncodeLabelSet, Clone, Debug, Hash, PartialEq, Eq)]
struct NameLabel {
    name: String,
}

/// The last Lease record seen, and when this process saw it change.
struct Observed {
    spec: Option<LeaseSpec>,
    at: Instant,
    /// The Lease as last read or written (the fast renewal path writes it).
    lease: Option<Lease>,
    /// The holder last reported to `on_new_leader`.
    reported: Option<String>,
}

/// A candidate for leadership of one Lease. Build it with
/// [`LeaderElector::new`], add callbacks, then [`LeaderElector::run`].
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderElectionConfig,
    on_started: Option<StartedFn>,
    on_stopped: Option<StoppedFn>,
    on_new_leader: Option<NewLeaderFn>,
    observed: Mutex<Observed>,
    leading: watch::Sender<bool>,
    status: Option<Family<NameLabel, Gauge>>,
    running: AtomicBool,
    /// Labels the Lease carries (set when it is created or acquired).
    labels: BTreeMap<String, String>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("config", &self.config)
            .field("leading", &self.is_leader())
            .finish_non_exhaustive()
    }
}

/// How one try to acquire or renew ended.
enum Attempt {
    /// This candidate holds the Lease (written just now).
    Held,
    /// Someone else holds it and it has not expired.
    HeldByOther,
}

impl LeaderElector {
    /// A candidate for `config`'s Lease, through `client`.
    pub fn new(client: Client, config: LeaderElectionConfig) -> Result<Self, LeaderElectionError> {
        config.validate()?;
        Ok(Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            on_started: None,
            on_stopped: None,
            on_new_leader: None,
            observed: Mutex::new(Observed {
                spec: None,
                at: Instant::now(),
                lease: None,
                reported: None,
            }),
            leading: watch::Sender::new(false),
            status: None,
            running: AtomicBool::new(false),
            labels: BTreeMap::new(),
        })
    }

    /// Called when this candidate starts leading, with a token cancelled
    /// when it stops (lost or shut down): work that only the leader may do
    /// runs until that token is cancelled.
    pub fn on_started_leading(
        mut self,
        f: impl Fn(CancellationToken) + Send + Sync + 'static,
    ) -> Self {
        self.on_started = Some(Box::new(f));
        self
    }

    /// Called when this candidate stops leading (after the leading token
    /// was cancelled).
    pub fn on_stopped_leading(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_stopped = Some(Box::new(f));
        self
    }

    /// Called with the holder's identity each time a new holder is
    /// observed (this candidate included).
    pub fn on_new_leader(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_new_leader = Some(Box::new(f));
        self
    }

    /// Labels the Lease carries: set when this candidate creates or
    /// acquires it (a sharding ring's member Leases carry the ring's name).
    pub fn with_labels(mut self, labels: BTreeMap<String, String>) -> Self {
        self.labels = labels;
        self
    }

    /// Registers `leader_election_master_status{name}` (1 while leading,
    /// else 0) in `registry`.
    pub fn with_registry(mut self, registry: &mut Registry) -> Self {
        let family = Family::<NameLabel, Gauge>::default();
        registry.register(
            "leader_election_master_status",
            "Whether this process leads the named lease (1) or not (0).",
            family.clone(),
        );
        family
            .get_or_create(&NameLabel {
                name: self.config.name.clone(),
            })
            .set(0);
        self.status = Some(family);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.config
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    /// Whether this candidate leads now.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// A receiver that sees each change of [`LeaderElector::is_leader`].
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.leading.subscribe()
    }

    /// The holder of the Lease as last observed (`None`: no holder, or not
    /// read yet).
    pub fn observed_leader(&self) -> Option<String> {
        self.observed
            .lock()
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .filter(|h| !h.is_empty())
    }

    fn set_leading(&self, leading: bool) {
        self.leading.send_replace(leading);
        if let Some(family) = &self.status {
            family
                .get_or_create(&NameLabel {
                    name: self.config.name.clone(),
                })
                .set(i64::from(leading));
        }
    }

    /// Competes for the Lease until `shutdown` is cancelled or, after
    /// leading, leadership is lost. Returns `Ok(())` after a shutdown (the
    /// Lease released when this candidate led and `release_on_cancel`),
    /// [`LeaderElectionError::Lost`] when a renewal deadline passed.
    /// Runs once per elector.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), LeaderElectionError> {
        if self.running.swap(true, Ordering::SeqCst) {
            return Err(LeaderElectionError::Config(
                "LeaderElector::run was called twice".into(),
            ));
        }
        tracing::info!(lease = %self.lease_name(), identity = %self.config.identity, "attempting to acquire the leader lease");
        if !self.acquire(&shutdown).await {
            return Ok(());
        }
        tracing::info!(lease = %self.lease_name(), identity = %self.config.identity, "acquired the leader lease");
        let leading = CancellationToken::new();
        self.set_leading(true);
        if let Some(f) = &self.on_started {
            f(leading.clone());
        }
        let outcome = self.renew(&shutdown).await;
        leading.cancel();
        self.set_leading(false);
        if let Some(f) = &self.on_stopped {
            f();
        }
        match outcome {
            Ok(()) => {
                if self.config.release_on_cancel {
                    self.release().await;
                }
                Ok(())
            }
            Err(e) => {
                tracing::error!(lease = %self.lease_name(), error = %e, "stopped leading");
                Err(e)
            }
        }
    }

    fn lease_name(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    /// A retry period with client-go's jitter: in `[p, (1 + JITTER) p)`.
    fn jittered_retry(&self) -> Duration {
        jittered(self.config.retry_period)
    }

    /// Tries every (jittered) retry period, and when the holder's record
    /// will have expired, until this candidate holds the Lease (true) or
    /// `shutdown` (false). With [`LeaderElectionConfig::watch`], watches
    /// the Lease between tries.
    async fn acquire(&self, shutdown: &CancellationToken) -> bool {
        let mut follow = Follow::new(self.config.lease_duration, self.config.retry_period);
        loop {
            if shutdown.is_cancelled() {
                return false;
            }
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Held) => return true,
                Ok(Attempt::HeldByOther) => {}
                Err(e) => {
                    tracing::debug!(lease = %self.lease_name(), error = %e, "could not acquire the lease");
                }
            }
            if self.config.watch {
                tokio::select! {
                    () = shutdown.cancelled() => return false,
                    () = follow.open(&self.api, &self.config.name) => {}
                }
            }
            let retry_at = Instant::now() + self.jittered_retry();
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return false,
                    () = tokio::time::sleep_until(self.next_try(retry_at)) => break,
                    Some(lease) = follow.next() => self.observe_followed(&lease),
                }
            }
        }
    }

    /// When to try next: at `retry_at`, or sooner when the observed
    /// holder's record expires (by local observation) before.
    fn next_try(&self, retry_at: Instant) -> Instant {
        let observed = self.observed.lock();
        let Some(spec) = observed.spec.as_ref() else {
            return retry_at;
        };
        if spec.holder_identity.as_deref().is_none_or(str::is_empty) {
            return retry_at;
        }
        let duration = Duration::from_secs(
            u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
        );
        let expiry = observed.at + duration;
        if expiry > Instant::now() {
            // a little after the expiry, so the next try finds it expired
            retry_at.min(expiry + Duration::from_millis(10))
        } else {
            retry_at
        }
    }

    /// Renews every retry period until `shutdown` (Ok) or until no renewal
    /// succeeded within the renew deadline (Err).
    async fn renew(&self, shutdown: &CancellationToken) -> Result<(), LeaderElectionError> {
        // The last successful write started no later than now.
        let mut last_renew = Instant::now();
        let mut wait = self.config.retry_period;
        loop {
            let deadline = last_renew + self.config.renew_deadline;
            let wake = (Instant::now() + wait).min(deadline);
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep_until(wake) => {}
            }
            let started = Instant::now();
            let attempt = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                attempt = tokio::time::timeout_at(deadline, self.renew_once()) => attempt,
            };
            match attempt {
                Ok(Ok(Attempt::Held)) => {
                    last_renew = started;
                    wait = self.config.retry_period;
                    continue;
                }
                Ok(Ok(Attempt::HeldByOther)) => {
                    tracing::warn!(lease = %self.lease_name(), holder = ?self.observed_leader(), "the lease is held by another candidate");
                }
                Ok(Err(e)) => {
                    tracing::warn!(lease = %self.lease_name(), error = %e, "failed to renew the lease");
                }
                Err(_) => {}
            }
            if Instant::now() >= deadline {
                return Err(LeaderElectionError::Lost {
                    namespace: self.config.namespace.clone(),
                    name: self.config.name.clone(),
                    renew_deadline: self.config.renew_deadline,
                });
            }
            wait = self.config.retry_period;
        }
    }

    /// One renewal: the fast path (write the Lease as last written); after
    /// a 409, at once the slow path (read, then write).
    async fn renew_once(&self) -> Result<Attempt, kcontrol_client::Error> {
        let cached = self.observed.lock().lease.clone();
        if let Some(lease) = cached {
            match self.write(lease, true).await {
                Ok(()) => return Ok(Attempt::Held),
                Err(e) if e.is_conflict() => {
                    tracing::debug!(lease = %self.lease_name(), "renewal met a conflict: retrying from a fresh read");
                }
                Err(e) => return Err(e),
            }
        }
        self.try_acquire_or_renew().await
    }

    /// The record this candidate writes over `old`.
    fn next_spec(&self, old: &LeaseSpec, now: Timestamp) -> LeaseSpec {
        let holds = old.holder_identity.as_deref() == Some(self.config.identity.as_str());
        let duration = i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(duration),
            acquire_time: if holds {
                old.acquire_time.clone()
            } else {
                Some(MicroTime(now))
            },
            renew_time: Some(MicroTime(now)),
            lease_transitions: if holds {
                old.lease_transitions
            } else {
                Some(old.lease_transitions.unwrap_or(0).saturating_add(1))
            },
            ..old.clone()
        }
    }

    /// Writes `lease` with this candidate's record (`renewing`: over the
    /// Lease it wrote last) and records what the server stored.
    async fn write(&self, lease: Lease, renewing: bool) -> Result<(), kcontrol_client::Error> {
        let old = lease.spec.clone().unwrap_or_default();
        let mut next = lease;
        if !renewing && !self.labels.is_empty() {
            let labels = next.metadata.labels.get_or_insert_with(BTreeMap::new);
            labels.extend(self.labels.clone());
        }
        next.spec = Some(if renewing {
            LeaseSpec {
                renew_time: Some(MicroTime(wall_clock_now())),
                ..old
            }
        } else {
            self.next_spec(&old, wall_clock_now())
        });
        let stored = self
            .api
            .replace(&self.config.name, &PostParams::default(), &next)
            .await?;
        self.observe(&stored);
        Ok(())
    }

    /// Records a Lease read or written: when its record changed, now is
    /// when this candidate saw it change (LE2).
    fn observe(&self, lease: &Lease) {
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let report = {
            let mut observed = self.observed.lock();
            if observed.spec.as_ref() != Some(&spec) {
                observed.spec = Some(spec);
                observed.at = Instant::now();
            }
            let mine = holder.as_deref() == Some(self.config.identity.as_str());
            observed.lease = mine.then(|| lease.clone());
            if holder.is_some() && observed.reported != holder {
                observed.reported.clone_from(&holder);
                holder
            } else {
                None
            }
        };
        if let Some(holder) = report {
            tracing::info!(lease = %self.lease_name(), %holder, "new leader observed");
            if let Some(f) = &self.on_new_leader {
                f(&holder);
            }
        }
    }

    /// Records a Lease its watch showed: only the record and when it
    /// changed (LE2), never the copy renewals write nor a new leader (the
    /// tries report those), so that a watch event older than a read cannot
    /// undo it; at worst it moves the expiry later.
    fn observe_followed(&self, lease: &Lease) {
        let spec = lease.spec.clone().unwrap_or_default();
        let mut observed = self.observed.lock();
        if observed.spec.as_ref() != Some(&spec) {
            observed.spec = Some(spec);
            observed.at = Instant::now();
        }
    }

    /// client-go's `tryAcquireOrRenew` (slow path): read the Lease (create
    /// it when missing); take it when it is free, expired by local
    /// observation, or already ours.
    async fn try_acquire_or_renew(&self) -> Result<Attempt, kcontrol_client::Error> {
        let Some(lease) = self.api.get_opt(&self.config.name).await? else {
            let now = wall_clock_now();
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    labels: (!self.labels.is_empty()).then(|| self.labels.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    lease_transitions: Some(0),
                    ..self.next_spec(&LeaseSpec::default(), now)
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(stored) => {
                    self.observe(&stored);
                    Ok(Attempt::Held)
                }
                Err(e) if e.is_conflict() => Ok(Attempt::HeldByOther),
                Err(e) => Err(e),
            };
        };
        self.observe(&lease);
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty());
        if holder.is_some_and(|h| h != self.config.identity) {
            let duration = Duration::from_secs(
                u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
            );
            let seen = self.observed.lock().at;
            if seen + duration > Instant::now() {
                return Ok(Attempt::HeldByOther);
            }
        }
        match self.write(lease, false).await {
            Ok(()) => Ok(Attempt::Held),
            Err(e) if e.is_conflict() => Ok(Attempt::HeldByOther),
            Err(e) => Err(e),
        }
    }

    /// Gives the Lease up (no holder, 1 s): a standby takes it at its next
    /// try instead of after the lease duration.
    async fn release(&self) {
        let lease = match self.api.get_opt(&self.config.name).await {
            Ok(Some(lease)) => lease,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(lease = %self.lease_name(), error = %e, "could not release the lease");
                return;
            }
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return;
        }
        let now = wall_clock_now();
        let mut next = lease;
        next.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            ..spec
        });
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &next)
            .await
        {
            Ok(stored) => {
                self.observe(&stored);
                tracing::info!(lease = %self.lease_name(), "released the leader lease");
            }
            Err(e) => {
                tracing::warn!(lease = %self.lease_name(), error = %e, "could not release the lease");
            }
        }
    }
}

#[cfg(test)]
mod jitter_tests {
    use std::time::Duration;

    /// LE1: a standby's retry is client-go's `wait.Jitter(p, 1.2)`, in
    /// `[p, 2.2p)`, spread over the whole window (it was `[p, 1.2p)`, up to
    /// 1.8x client-go's Lease reads from every standby).
    #[test]
    fn le1_the_retry_jitter_is_client_gos() {
        let period = Duration::from_secs(2);
        let waits: Vec<Duration> = (0..1000).map(|_| super::jittered(period)).collect();
        assert!(waits
            .iter()
            .all(|w| *w >= period && *w < period.mul_f64(2.2)));
        assert!(
            waits.iter().any(|w| *w > period.mul_f64(1.8)),
            "the top of the window"
        );
        assert!(
            waits.iter().any(|w| *w < period.mul_f64(1.4)),
            "the bottom of the window"
        );
    }
}
