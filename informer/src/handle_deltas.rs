//! The processing of one pop (client-go's `HandleDeltas` and
//! `processDeltas`): apply each delta to the store, then hand the matching
//! notification to the listeners. An informer with a store filter keeps
//! only the objects it accepts: one that stops matching leaves the store
//! as a deletion.

use std::sync::Arc;

use kcontrol_deltafifo::{Delta, Deltas, ProcessError};
use kcontrol_indexer::{KubeObject, ObjectOrTombstone, StoreError};

use crate::informer::SharedIndexInformer;
use crate::notification::Notification;

impl<K: KubeObject> SharedIndexInformer<K> {
    /// Applies a key's deltas, oldest first, under the `block_deltas` lock:
    ///
    /// - added, updated, replaced or synced: the object is stored; if it
    ///   replaced one, `Update(old, new)`, else `Add(new, is_in_initial_list)`.
    ///   An update whose resourceVersion equals the old one (a resync, or a
    ///   relist that found the object unchanged) is a sync notification: it
    ///   goes only to the listeners whose resync is due;
    /// - deleted: the key is removed and `Delete` carries the final state or
    ///   the tombstone, as the delta does;
    /// - an object the store filter rejects is not stored: if the store held
    ///   the key, it is removed and `Delete` carries the rejected object.
    pub(crate) fn handle_deltas(
        &self,
        deltas: &Deltas<K>,
        is_in_initial_list: bool,
    ) -> Result<(), ProcessError<StoreError>> {
        let _block = self.block_deltas.lock();
        for delta in deltas.iter() {
            match delta {
                Delta::Added(obj)
                | Delta::Updated(obj)
                | Delta::Replaced(obj)
                | Delta::Sync(obj) => {
                    if self.filter.as_ref().is_some_and(|keep| !keep(obj)) {
                        if self.store.delete_by_key(deltas.key()).is_some() {
                            let gone = ObjectOrTombstone::Object(Arc::clone(obj));
                            self.processor.distribute(Notification::Delete(gone), false);
                        }
                        continue;
                    }
                    let old = self
                        .store
                        .update(Arc::clone(obj))
                        .map_err(ProcessError::Failed)?;
                    match old {
                        Some(old) => {
                            let sync = old.resource_version() == obj.resource_version();
                            let new = Arc::clone(obj);
                            self.processor
                                .distribute(Notification::Update { old, new }, sync);
                        }
                        None => self.processor.distribute(
                            Notification::Add {
                                obj: Arc::clone(obj),
                                initial: is_in_initial_list,
                            },
                            false,
                        ),
                    }
                }
                Delta::Deleted(gone) => {
                    self.store.delete_by_key(deltas.key());
                    self.processor
                        .distribute(Notification::Delete(gone.clone()), false);
                }
            }
        }
        Ok(())
    }
}
