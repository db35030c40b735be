//! [`run_sharded`]: one replica of a sharded controller — its member
//! Lease, the sharder's election, and the controllers, started and stopped
//! in the order the move protocol needs (SH3, SH7).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use kcontrol_client::Client;
use tokio_util::sync::CancellationToken;

use super::{ShardGate, Sharder, ShardingConfig, ShardingError, RING_LABEL};
use crate::leader_election::LeaderElector;

/// Runs one replica of a sharded controller until `shutdown`:
///
/// 1. acquires this member's Lease (labelled with the ring) and keeps
///    renewing it;
/// 2. campaigns for the sharder's Lease and runs `sharder` while leading;
/// 3. runs `controllers` (their informers must select
///    [`ShardingConfig::selector`] and their reconciles pass `gate`) until
///    `shutdown` — or until the member Lease is lost: then `gate` closes
///    at once (no reconcile starts) and the controllers' token is
///    cancelled, before any observer can see the Lease expire (SH3);
/// 4. once the controllers have returned, stops the sharder and releases
///    both Leases (SH7: a member that stopped is reassigned at once).
///
/// `None` when shutdown came before the member Lease was held.
///
/// # Errors
/// [`ShardingError::Config`] for a bad configuration,
/// [`ShardingError::Membership`] when the member Lease was lost.
pub async fn run_sharded<F, Fut, R>(
    client: Client,
    config: ShardingConfig,
    sharder: Sharder,
    gate: ShardGate,
    shutdown: CancellationToken,
    controllers: F,
) -> Result<Option<R>, ShardingError>
where
    F: FnOnce(CancellationToken) -> Fut,
    Fut: Future<Output = R>,
{
    config.validate()?;
    let labels = BTreeMap::from([(RING_LABEL.to_owned(), config.ring.clone())]);
    let member = LeaderElector::new(client.clone(), config.member_lease())
        .map_err(|e| ShardingError::Config(e.to_string()))?
        .with_labels(labels);
    let member = Arc::new(member);
    let mut held = member.subscribe();
    let member_stop = CancellationToken::new();
    let mut membership = tokio::spawn({
        let (member, stop) = (Arc::clone(&member), member_stop.clone());
        async move { member.run(stop).await }
    });
    let joined = tokio::select! {
        () = shutdown.cancelled() => false,
        changed = held.wait_for(|h| *h) => changed.is_ok(),
        _ = &mut membership => false,
    };
    if !joined {
        gate.close();
        member_stop.cancel();
        return match membership.await {
            Ok(Err(e)) => Err(ShardingError::Membership(e)),
            _ => Ok(None),
        };
    }
    tracing::info!(ring = %config.ring, member = %config.member, "joined the ring");
    let sharder_stop = CancellationToken::new();
    let sharding = tokio::spawn(elect_and_shard(
        client,
        config.clone(),
        sharder,
        sharder_stop.clone(),
    ));
    let stop = shutdown.child_token();
    let lost = tokio::spawn({
        let (mut held, gate, stop) = (member.subscribe(), gate.clone(), stop.clone());
        async move {
            if held.wait_for(|h| !*h).await.is_ok() {
                tracing::error!("ring membership lost: no reconcile starts any more");
                gate.close();
                stop.cancel();
            }
        }
    });
    let result = controllers(stop).await;
    lost.abort();
    gate.close();
    sharder_stop.cancel();
    let _ = sharding.await;
    // the controllers have stopped: now the member Lease may go
    member_stop.cancel();
    match membership.await {
        Ok(Err(e)) => Err(ShardingError::Membership(e)),
        Ok(Ok(())) => Ok(Some(result)),
        Err(e) => Err(ShardingError::Membership(
            crate::LeaderElectionError::Config(format!("membership task: {e}")),
        )),
    }
}

/// Campaigns for the sharder's Lease and runs the sharder while leading;
/// after a lost Lease, campaigns again; until `stop`.
async fn elect_and_shard(
    client: Client,
    config: ShardingConfig,
    sharder: Sharder,
    stop: CancellationToken,
) {
    if sharder.is_empty() {
        return;
    }
    // every replica watches the members, so that an elected sharder's
    // expiry judgements start from its replica's first sight (LE2)
    let members = match sharder.watch_members() {
        Ok(members) => Arc::new(members),
        Err(e) => {
            tracing::error!(error = %e, "watching the ring's members");
            return;
        }
    };
    while !stop.is_cancelled() {
        let elector = match LeaderElector::new(client.clone(), config.sharder_lease()) {
            Ok(elector) => elector,
            Err(e) => {
                tracing::error!(error = %e, "the sharder's Lease");
                return;
            }
        };
        let running = Arc::new(parking_lot::Mutex::new(None));
        let (slot, sharder, watch) = (Arc::clone(&running), sharder.clone(), Arc::clone(&members));
        let elector = elector.on_started_leading(move |leading| {
            let (sharder, watch) = (sharder.clone(), Arc::clone(&watch));
            *slot.lock() = Some(tokio::spawn(async move {
                if let Err(e) = sharder.run_with(&watch, leading).await {
                    tracing::error!(error = %e, "the sharder stopped");
                }
            }));
        });
        let outcome = elector.run(stop.clone()).await;
        let task = running.lock().take();
        if let Some(task) = task {
            let _ = task.await;
        }
        if let Err(e) = outcome {
            tracing::warn!(error = %e, "the sharder's Lease was lost: campaigning again");
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(config.retry_period) => {}
            }
        }
    }
    if let Ok(members) = Arc::try_unwrap(members) {
        members.shutdown().await;
    }
}
