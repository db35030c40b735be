//! Where a relist puts the objects it lists (RF9, RF1): streamed into the
//! FIFO as they arrive, so a relist never holds the list twice, or —
//! once a relist has failed after delivering part of its objects —
//! buffered and handed to the FIFO in one replace at its end, as client-go
//! handles every list. A streamed relist cut short leaves the store mixed
//! (objects at the newer version beside objects deleted before it, which
//! only the finished replace would delete); buffering the attempts that
//! follow means none of them can mix it further or leave it mixed: each
//! either completes the replace or delivers nothing. The store stays mixed
//! from the first failure until a relist completes, and
//! [`Reflector::relist_incomplete`] says so meanwhile.
//!
//! Buffering costs the list's memory once more, only in that recovery.

use std::collections::BTreeMap;
use std::sync::Arc;

use kcontrol_deltafifo::{DeltaFifo, FifoError, ReplaceStream};
use kcontrol_indexer::{KubeObject, ObjectOrTombstone};
use serde::de::DeserializeOwned;

use crate::reflector::Reflector;

/// A replace under way: streamed, or buffered until it completes.
pub(crate) enum Relist<'a, K: KubeObject> {
    /// Every object queued in the FIFO as it comes.
    Streamed(ReplaceStream<'a, K>),
    /// Objects kept by key until [`finish`](Relist::finish).
    Buffered {
        fifo: &'a DeltaFifo<K>,
        objects: BTreeMap<String, Arc<K>>,
    },
}

impl<K: KubeObject> Relist<'_, K> {
    /// A listed object (an initial event, a change among them).
    pub(crate) fn add(&mut self, obj: K) -> Result<(), FifoError> {
        match self {
            Self::Streamed(stream) => stream.add(obj),
            Self::Buffered { fifo, objects } => {
                let obj = Arc::new(obj);
                let key = fifo.key_of(&ObjectOrTombstone::Object(obj.clone()))?;
                objects.insert(key, obj);
                Ok(())
            }
        }
    }

    /// Listed objects in order, handed over at once (a list's decoded
    /// chunk); an object without a name fails after those before it.
    pub(crate) fn extend(&mut self, objs: impl IntoIterator<Item = K>) -> Result<(), FifoError> {
        match self {
            Self::Streamed(stream) => stream.extend(objs),
            Self::Buffered { .. } => objs.into_iter().try_for_each(|obj| self.add(obj)),
        }
    }

    /// An object deleted while the list streamed (WatchList).
    pub(crate) fn remove(&mut self, obj: K) -> Result<(), FifoError> {
        match self {
            Self::Streamed(stream) => stream.remove(&obj),
            Self::Buffered { fifo, objects } => {
                let key = fifo.key_of(&ObjectOrTombstone::Object(Arc::new(obj)))?;
                objects.remove(&key);
                Ok(())
            }
        }
    }

    /// Completes the replace at `resource_version`: deletions for what the
    /// list no longer has (and, buffered, the objects themselves).
    pub(crate) fn finish(self, resource_version: &str) -> Result<(), FifoError> {
        match self {
            Self::Streamed(stream) => stream.finish(resource_version),
            Self::Buffered { fifo, objects } => {
                fifo.replace(objects.into_values(), resource_version)
            }
        }
    }

    /// Whether this relist is buffered.
    pub(crate) fn is_buffered(&self) -> bool {
        matches!(self, Self::Buffered { .. })
    }
}

impl<K> Reflector<K>
where
    K: KubeObject + DeserializeOwned,
{
    /// The replace a list or WatchList attempt feeds: buffered when an
    /// earlier attempt delivered objects without completing, else streamed.
    pub(crate) fn begin_relist(&self) -> Result<Relist<'_, K>, FifoError> {
        if self.relist_incomplete() {
            // begin_replace's checks, without holding the FIFO's replace
            if self.fifo.is_closed() {
                return Err(FifoError::Closed);
            }
            return Ok(Relist::Buffered {
                fifo: &self.fifo,
                objects: BTreeMap::new(),
            });
        }
        self.fifo.begin_replace().map(Relist::Streamed)
    }
}
