//! The Kubernetes API client of kcontrol: configuration (kubeconfig,
//! in-cluster), an HTTPS transport (hyper 1, rustls), authentication
//! (tokens, token files, client certificates, exec plugins), typed requests
//! through [`Api<K>`], watch streams, `Status` errors and client-side rate
//! limiting.
//!
//! Built to be what client-go's `rest` and `tools/cache` ListerWatcher need:
//! lists decode straight into [`ObjectList<K>`] (or, through
//! [`Api::list_stream`], one item at a time into a [`ListStream<K>`], so a
//! list of any size is never held whole), watches into [`WatchEvent<K>`],
//! and every failure is an [`Error`] with predicates such as
//! [`Error::is_expired`] and [`Error::retry_after`].
//!
//! Reads of built-in kinds go over protobuf by default, as client-go's do:
//! `Accept: application/vnd.kubernetes.protobuf,application/json`, each
//! answer decoded by its `Content-Type` (kcontrol-proto decodes protobuf
//! straight into the same types JSON decodes into, equal values).
//! Metadata-only reads ask `PartialObjectMetadata` in protobuf too; custom
//! resources and writes use JSON. To use JSON for everything, set
//! [`Config::content_type`] to [`ContentType::Json`]
//! (`config.with_content_type(ContentType::Json)`), or take a handle with
//! [`Client::with_content_type`] (same connections, another encoding).
//!
//! Controllers report what they did as Events through
//! [`events::Recorder`] (client-go's `tools/record`): recording never
//! blocks; call [`Recorder::flush`](events::Recorder::flush) before the
//! process exits, or the last events may be lost (a recorder dropped with
//! events still queued logs a warning).
//!
//! # Example
//!
//! Resolve a kubeconfig and build a client (runs without a server):
//!
//! ```
//! use kcontrol_client::{Client, Config, Kubeconfig, KubeconfigOptions};
//!
//! let kubeconfig = Kubeconfig::from_yaml(r#"
//! current-context: dev
//! clusters:
//! - name: local
//!   cluster: { server: "http://127.0.0.1:8001" }
//! users:
//! - name: me
//!   user: { token: "not-a-real-token" }
//! contexts:
//! - name: dev
//!   context: { cluster: local, user: me, namespace: team-a }
//! "#)?;
//! let config = Config::from_custom_kubeconfig(&kubeconfig, &KubeconfigOptions::default())?;
//! assert_eq!(config.default_namespace, "team-a");
//! assert!(!format!("{config:?}").contains("not-a-real-token"));
//! // A token is not sent over plain http:// unless explicitly allowed
//! // (meant for loopback test servers).
//! assert!(Client::try_from(config.clone()).is_err());
//! let client = Client::try_from(config.with_http_credentials_allowed(true))?;
//! assert_eq!(client.server(), "http://127.0.0.1:8001");
//! # Ok::<(), kcontrol_client::Error>(())
//! ```
//!
//! List, then watch from the list's version (needs a server):
//!
//! ```no_run
//! use futures::TryStreamExt;
//! use kcontrol_client::{Api, Client, ListParams, WatchEvent, WatchParams};
//! use kcontrol_indexer::k8s_openapi::api::core::v1::ConfigMap;
//!
//! # async fn run() -> Result<(), kcontrol_client::Error> {
//! let client = Client::try_default()?;
//! let configmaps: Api<ConfigMap> = Api::default_namespaced(client);
//! let list = configmaps.list(&ListParams::default().limit(500)).await?;
//! let version = list.resource_version().unwrap_or("").to_owned();
//! let mut events = configmaps.watch(&WatchParams::default().timeout(300), &version).await?;
//! while let Some(event) = events.try_next().await? {
//!     match event {
//!         WatchEvent::Added(cm) | WatchEvent::Modified(cm) => println!("{:?}", cm.metadata.name),
//!         WatchEvent::Deleted(cm) => println!("gone: {:?}", cm.metadata.name),
//!         WatchEvent::Bookmark(b) => println!("at {}", b.resource_version()),
//!         WatchEvent::Error(status) if status.is_expired() => break, // relist
//!         WatchEvent::Error(status) => return Err(status.into()),
//!         WatchEvent::Unknown { event_type, .. } => println!("skipped a {event_type} event"),
//!     }
//! }
//! # Ok(())
//! # }
//! ```

mod api;
mod auth;
mod chunks;
mod client;
pub mod config;
mod content;
pub mod discovery;
mod error;
pub mod events;
pub mod list_stream;
pub mod metrics;
mod params;
pub mod path;
mod ratelimit;
mod serde_util;
mod status;
mod tls;
pub mod watch;
mod wire;

pub use api::Api;
pub use auth::AuthError;
pub use client::Client;
pub use config::{
    Auth, ClientIdentity, Config, ConfigError, ExecConfig, Kubeconfig, KubeconfigOptions,
    RateLimit, TlsConfig, DEFAULT_MAX_RESPONSE_SIZE, DEFAULT_MAX_WATCH_FRAME_SIZE,
};
pub use content::ContentType;
pub use discovery::{DiscoveredResource, Discovery};
pub use error::{ApiError, BoxError, Error};
pub use list_stream::ListStream;
pub use metrics::ClientMetrics;
pub use params::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy,
    ResourceVersionMatch, WatchParams,
};
pub use status::{Status, StatusCause, StatusDetails};
pub use tls::{TlsError, TlsErrorKind};
pub use watch::WatchStream;
pub use wire::{
    Bookmark, BookmarkMeta, DeleteResponse, ObjectList, WatchEvent, INITIAL_EVENTS_END_ANNOTATION,
};

/// Re-export of the secret string type used for tokens and passwords.
pub use secrecy::{ExposeSecret, SecretString};
