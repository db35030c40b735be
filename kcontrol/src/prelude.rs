//! What a controller or an operator needs in scope: `use kcontrol::prelude::*;`.
//!
//! The client and its request parameters, the object trait and key
//! function, listers, the informer factory and its handlers, the cache-sync
//! barrier, the rate-limited work queue and the cancellation token that
//! stops them; the controller builder, the [`Manager`] and its flags
//! ([`Args`]), what a reconciler returns; the operator helpers —
//! finalizers, status conditions, owner references, converging writes,
//! events, health — and the custom resource macros ([`resource`],
//! [`schema`]) with the CRD trait. Everything else stays under its module
//! ([`crate::client`], [`crate::informer`], …).

pub use crate::client::events::{EventType, Recorder};
pub use crate::client::{Api, Client, Config, Patch, PatchParams, PostParams};
pub use crate::controller::conditions::{
    find_condition, is_condition_true, new_condition, set_condition, ConditionStatus,
};
pub use crate::controller::converge::apply_owned_if_changed;
pub use crate::controller::crd::{crd_yaml, install_crd, CustomResourceExt};
pub use crate::controller::finalizers::{finalizer, Event as FinalizerEvent, FinalizerError};
pub use crate::controller::owner::{get_controller_of, is_controlled_by, new_controller_ref};
pub use crate::controller::signals::shutdown_on_signal;
pub use crate::controller::{
    create_or_update, Action, Args, Context, Controller, Health, Manager, Operation, Reconciler,
    SharedRegistry,
};
pub use crate::indexer::{meta_namespace_key, Lister, Object, ObjectOrTombstone};
pub use crate::informer::{
    wait_for_cache_sync, HasSynced, InformerFactory, ResourceEventHandler,
    ResourceEventHandlerFuncs, SharedIndexInformer, WatchConfig,
};
pub use crate::k8s_openapi;
pub use crate::k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
pub use crate::workqueue::RateLimitingQueue;
pub use crate::CancellationToken;
pub use crate::{clap, resource, schema, serde, tokio};
