//! [`Error`]: every kcontrol layer's error in one type, so a controller's
//! own functions can return [`Result`] and use `?` on whatever they call —
//! the client, the event recorder, the store, the informers and their
//! factory, the cache-sync wait, leader election, controllers and their
//! manager, operator flags, CRDs.

use crate::{client, controller, deltafifo, indexer, informer, reflector, workqueue};

/// Any kcontrol error. Each variant is one crate's error type, unchanged
/// (match on it to see the details); `Display` is the inner error's.
///
/// ```
/// use kcontrol::indexer::meta_namespace_key;
/// use kcontrol::k8s_openapi::api::core::v1::ConfigMap;
///
/// fn key_of(cm: &ConfigMap) -> kcontrol::Result<String> {
///     Ok(meta_namespace_key(cm)?)
/// }
/// let err = key_of(&ConfigMap::default()).unwrap_err();
/// assert!(matches!(err, kcontrol::Error::Key(_)));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An API request failed, or the client could not be built.
    #[error(transparent)]
    Client(#[from] client::Error),
    /// The client configuration (kubeconfig, in-cluster) could not be loaded.
    #[error(transparent)]
    Config(#[from] client::ConfigError),
    /// The event recorder could not be built.
    #[error(transparent)]
    Recorder(#[from] client::events::RecorderError),
    /// An object has no key (no name).
    #[error(transparent)]
    Key(#[from] indexer::KeyError),
    /// A store or index operation failed.
    #[error(transparent)]
    Store(#[from] indexer::StoreError),
    /// A label selector does not parse.
    #[error(transparent)]
    Selector(#[from] indexer::labels::SelectorError),
    /// The DeltaFIFO refused a change.
    #[error(transparent)]
    Fifo(#[from] deltafifo::FifoError),
    /// A list or watch failed.
    #[error(transparent)]
    Reflector(#[from] reflector::ReflectorError),
    /// An informer could not run or take a handler.
    #[error(transparent)]
    Informer(#[from] informer::InformerError),
    /// An informer factory could not start.
    #[error(transparent)]
    Factory(#[from] informer::FactoryError),
    /// Caches did not sync before a timeout or shutdown.
    #[error(transparent)]
    CacheSync(#[from] informer::CacheSyncError),
    /// A rate limiter was configured wrongly.
    #[error(transparent)]
    RateLimiter(#[from] workqueue::RateLimiterError),
    /// Leader election failed.
    #[error(transparent)]
    LeaderElection(#[from] controller::LeaderElectionError),
    /// An awaited event was not written.
    #[error(transparent)]
    Publish(#[from] client::events::PublishError),
    /// A controller stopped with an error.
    #[error(transparent)]
    Controller(#[from] controller::ControllerError),
    /// A manager stopped with an error.
    #[error(transparent)]
    Manager(#[from] controller::ManagerError),
    /// The operator flags could not set up the client or the manager.
    #[error(transparent)]
    Args(#[from] controller::ArgsError),
    /// A CRD could not be printed or installed.
    #[error(transparent)]
    Crd(#[from] controller::crd::CrdError),
    /// A value did not convert to or from JSON (an object built with
    /// `serde_json::json!`).
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// Reading or writing a file or a stream failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// `Result` with kcontrol's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_layer_s_error_converts_and_keeps_its_message() {
        let from_client: Error = client::Error::Timeout(std::time::Duration::from_secs(3)).into();
        assert_eq!(from_client.to_string(), "request timed out after 3s");
        let selector = indexer::labels::Selector::parse("a in (b").unwrap_err();
        let message = selector.to_string();
        let from_selector: Error = selector.into();
        assert!(matches!(from_selector, Error::Selector(_)));
        assert_eq!(from_selector.to_string(), message);
        let from_fifo: Error = deltafifo::FifoError::Closed.into();
        assert!(matches!(from_fifo, Error::Fifo(_)));
    }
}
