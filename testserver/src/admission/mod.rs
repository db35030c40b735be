//! Admission and conversion webhooks, called as kube-apiserver calls
//! them. `MutatingWebhookConfiguration`s and
//! `ValidatingWebhookConfiguration`s (admissionregistration.k8s.io/v1)
//! are served as resources ([`config`]); every create, update, patch
//! (apply included), status write, delete and delete-collection of any
//! resource goes through [`pipeline`]: the mutating webhooks that match
//! ([`matching`]) change the object by JSON patches, then the storage's
//! defaults and validation run, then the validating webhooks see the
//! final object ([`dispatch`], over HTTPS verified against the webhook's
//! `caBundle`: [`client`]). Custom resources whose CRD converts by
//! webhook are converted between the requested and the storage version
//! on every read, list, watch and write ([`convert`]).
//!
//! When no webhook configuration exists and no conversion webhook is
//! involved, requests go straight to storage as before (one cheap check).
//! The server's own writes (the in-process [`Objects`](crate::Objects)
//! API, garbage collection, the Deployment simulator) bypass admission:
//! they stand for etcd and kube-controller-manager, and a test seeds
//! objects with them. Webhooks named by a Service are reached through the
//! address a test registers for it
//! ([`TestServer::register_service`](crate::TestServer::register_service)).

mod client;
mod config;
mod convert;
mod dispatch;
mod matching;
mod pipeline;
mod review;

pub(crate) use config::{
    default_configuration, resources, validate_configuration, webhook_count, GROUP,
};
pub(crate) use convert::validate_crd_conversion;
pub(crate) use pipeline::Change;

use crate::resource::ResourceInfo;
use crate::rest::Core;
use crate::status::StatusError;
use crate::store::{Event, StoredObject};
use client::Services;
use std::net::SocketAddr;
use std::sync::Arc;

/// The admission state of a server: where Services are reached.
#[derive(Debug, Default)]
pub(crate) struct Admission {
    services: Services,
}

impl Admission {
    /// Webhooks naming Service `name` in `namespace` are called at `addr`.
    pub(crate) fn register_service(&self, namespace: &str, name: &str, addr: SocketAddr) {
        self.services.register(namespace, name, addr);
    }

    /// Whether reads of `info` are converted by a webhook.
    pub(crate) fn converts(&self, core: &Core, info: &ResourceInfo) -> bool {
        convert::needs_webhook(core, info)
    }

    /// Stored objects as the request's version shows them (one
    /// `ConversionReview` for all of them when a webhook converts; the
    /// objects as they are otherwise).
    pub(crate) async fn read(
        &self,
        core: &Core,
        info: &ResourceInfo,
        items: Vec<Arc<StoredObject>>,
    ) -> Result<Vec<Arc<StoredObject>>, StatusError> {
        if items.is_empty() || !convert::needs_webhook(core, info) {
            return Ok(items);
        }
        let values = items.iter().map(|o| o.value().clone()).collect();
        let converted = convert::convert(core, &self.services, info, values, &info.version).await?;
        items
            .iter()
            .zip(converted)
            .map(|(o, v)| {
                StoredObject::detached(v, o.resource_version(), o.key().to_owned())
                    .map(Arc::new)
                    .map_err(|e| StatusError::internal(&e.to_string()))
            })
            .collect()
    }

    /// One stored object as the request's version shows it.
    pub(crate) async fn read_one(
        &self,
        core: &Core,
        info: &ResourceInfo,
        obj: Arc<StoredObject>,
    ) -> Result<Arc<StoredObject>, StatusError> {
        let mut out = self.read(core, info, vec![obj]).await?;
        out.pop()
            .ok_or_else(|| StatusError::internal("conversion lost the object"))
    }

    /// A watch event as the request's version shows it (the object and
    /// the previous state in one review).
    pub(crate) async fn read_event(
        &self,
        core: &Core,
        info: &ResourceInfo,
        ev: &Arc<Event>,
    ) -> Result<Arc<Event>, StatusError> {
        let mut items = vec![Arc::clone(&ev.object)];
        items.extend(ev.prev.iter().cloned());
        let mut converted = self.read(core, info, items).await?.into_iter();
        let object = converted
            .next()
            .ok_or_else(|| StatusError::internal("conversion lost the object"))?;
        Ok(Arc::new(Event {
            kind: ev.kind,
            rv: ev.rv,
            seq: ev.seq,
            object,
            prev: converted.next(),
            frame: ev.frame.clone(),
        }))
    }
}
