//! What a controller needs in scope: `use kcontrol::prelude::*;`.
//!
//! The client and its request parameters, the object trait and key
//! function, listers, the informer factory and its handlers, the cache-sync
//! barrier, the rate-limited work queue and the cancellation token that
//! stops them; the controller builder and what a reconciler returns. Everything else stays under its module ([`crate::client`],
//! [`crate::informer`], …).

pub use crate::client::{Api, Client, Config, Patch, PatchParams, PostParams};
pub use crate::controller::{Action, Context, Controller, Manager, Reconciler};
pub use crate::indexer::{meta_namespace_key, Lister, Object, ObjectOrTombstone};
pub use crate::informer::{
    wait_for_cache_sync, HasSynced, InformerFactory, ResourceEventHandler,
    ResourceEventHandlerFuncs, SharedIndexInformer,
};
pub use crate::k8s_openapi;
pub use crate::workqueue::RateLimitingQueue;
pub use crate::CancellationToken;
