//! [`ReflectorSource`]: the informer's [`Source`] in use, a [`Reflector`]
//! listing and watching through a [`ListerWatcher`] into the informer's
//! DeltaFIFO, with the informer's resync hook and check period.

use std::sync::{Arc, OnceLock};

use kcontrol_indexer::KubeObject;
use kcontrol_reflector::{ListerWatcher, Reflector, ReflectorConfig};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;

use super::{Source, SourceContext, SourceFuture};

/// A reflector, created when the informer starts.
pub(crate) struct ReflectorSource<K: KubeObject> {
    lister_watcher: Arc<dyn ListerWatcher<K>>,
    /// The reflector's options until start; taken then.
    config: Mutex<Option<ReflectorConfig<K>>>,
    reflector: OnceLock<Arc<Reflector<K>>>,
}

impl<K: KubeObject> ReflectorSource<K> {
    pub(crate) fn new(
        lister_watcher: Arc<dyn ListerWatcher<K>>,
        config: ReflectorConfig<K>,
    ) -> Self {
        Self {
            lister_watcher,
            config: Mutex::new(Some(config)),
            reflector: OnceLock::new(),
        }
    }
}

impl<K: KubeObject + DeserializeOwned> Source<K> for ReflectorSource<K> {
    fn configure(&self, change: &mut dyn FnMut(&mut ReflectorConfig<K>)) -> bool {
        match self.config.lock().as_mut() {
            Some(config) => {
                change(config);
                true
            }
            None => false,
        }
    }

    fn start(&self, ctx: SourceContext<K>) -> SourceFuture {
        let mut config = self.config.lock().take().unwrap_or_default();
        config.resync_period = ctx.resync_period;
        config.should_resync = Some(ctx.should_resync);
        let reflector = Arc::new(Reflector::new(
            Arc::clone(&self.lister_watcher),
            ctx.fifo,
            config,
        ));
        let _ = self.reflector.set(Arc::clone(&reflector));
        let shutdown = ctx.shutdown;
        Box::pin(async move { reflector.run(shutdown).await })
    }

    fn last_sync_resource_version(&self) -> Option<String> {
        self.reflector
            .get()
            .and_then(|r| r.last_sync_resource_version())
    }

    fn relist_incomplete(&self) -> bool {
        self.reflector.get().is_some_and(|r| r.relist_incomplete())
    }

    fn last_error(&self) -> Option<String> {
        self.reflector.get().and_then(|r| r.last_error())
    }
}
