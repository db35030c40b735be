//! Adding and removing event handlers: the resync-period rules of IN4, and
//! the atomic switch of IN2 (a handler added after start gets the store
//! contents, then live events, with none lost or repeated).

use std::sync::Arc;
use std::time::Duration;

use kcontrol_indexer::KubeObject;

use crate::async_handler::AsyncResourceEventHandler;
use crate::error::InformerError;
use crate::handler::ResourceEventHandler;
use crate::informer::SharedIndexInformer;
use crate::listener::{HandlerKind, HandlerSync, Listener, ResyncSchedule};
use crate::notification::Notification;
use crate::registration::{HandlerOptions, HandlerRegistration};
use crate::synced::HasSynced;

/// The shortest resync period a handler gets (client-go's `minimumResyncPeriod`).
pub const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

impl<K: KubeObject> SharedIndexInformer<K> {
    /// Registers a handler with the informer's resync period. See
    /// [`add_event_handler_with_options`](Self::add_event_handler_with_options).
    pub fn add_event_handler<H>(&self, handler: H) -> Result<HandlerRegistration, InformerError>
    where
        H: ResourceEventHandler<K>,
    {
        self.add_event_handler_with_options(handler, HandlerOptions::default())
    }

    /// Registers a handler with its own resync period. See
    /// [`add_event_handler_with_options`](Self::add_event_handler_with_options).
    pub fn add_event_handler_with_resync_period<H>(
        &self,
        handler: H,
        resync_period: Duration,
    ) -> Result<HandlerRegistration, InformerError>
    where
        H: ResourceEventHandler<K>,
    {
        self.add_event_handler_with_options(
            handler,
            HandlerOptions::new().resync_period(resync_period),
        )
    }

    /// Registers a handler and starts its tokio task (on the current
    /// runtime), or its own OS thread when `options.blocking` is set or no
    /// runtime is current (IN1). Before start, it will see
    /// the initial list as adds with `is_in_initial_list = true`; after
    /// start, it first gets an add (`is_in_initial_list = true`) for every
    /// object in the store, then every later change (IN2). Fails once the
    /// informer has stopped.
    ///
    /// Resync period (IN4, client-go's rules): the default is the informer's
    /// resync period; zero means none; below [`MINIMUM_RESYNC_PERIOD`] it is
    /// raised to it. Below the informer's resync check period, it lowers the
    /// check period if the informer has not started, and is raised to the
    /// check period if it has. An informer whose check period is zero never
    /// resyncs.
    pub fn add_event_handler_with_options<H>(
        &self,
        handler: H,
        options: HandlerOptions,
    ) -> Result<HandlerRegistration, InformerError>
    where
        H: ResourceEventHandler<K>,
    {
        let on_task = !options.blocking && tokio::runtime::Handle::try_current().is_ok();
        let handler = if on_task {
            HandlerKind::Inline(Box::new(handler))
        } else {
            HandlerKind::Thread(Box::new(handler))
        };
        self.register(handler, options)
    }

    /// Registers an async handler: the same notifications, in the same
    /// order and with the same rules as
    /// [`add_event_handler_with_options`](Self::add_event_handler_with_options),
    /// delivered on a tokio task of its own (see
    /// [`AsyncResourceEventHandler`]). Must be called on a tokio runtime;
    /// the task runs there.
    pub fn add_async_event_handler<H>(
        &self,
        handler: H,
        options: HandlerOptions,
    ) -> Result<HandlerRegistration, InformerError>
    where
        H: AsyncResourceEventHandler<K>,
    {
        self.register(HandlerKind::Task(Box::new(handler)), options)
    }

    fn register(
        &self,
        handler: HandlerKind<K>,
        options: HandlerOptions,
    ) -> Result<HandlerRegistration, InformerError> {
        let mut lc = self.lifecycle.lock();
        if lc.stopped {
            return Err(self.stopped_error());
        }
        let requested = self.requested_resync(&mut lc, options.resync_period);
        lc.handlers_added += 1;
        let id = lc.handlers_added;
        let name: Arc<str> = options
            .name
            .unwrap_or_else(|| format!("handler-{id}"))
            .into();
        let upstream: Arc<dyn HasSynced> = self.sync.clone();
        let sync = Arc::new(HandlerSync::new(
            Arc::clone(&name),
            upstream,
            self.metrics.clone(),
        ));
        let schedule = ResyncSchedule::new(
            requested,
            lc.resync_check_period,
            self.processor.clock().now(),
        );
        let listener = Arc::new(Listener::new(
            id,
            Arc::clone(&name),
            handler,
            Arc::clone(&sync),
            schedule,
            self.metrics.clone(),
        ));
        let done = listener.spawn(&self.name)?;
        let registration = HandlerRegistration {
            informer_id: self.id,
            listener_id: id,
            name: Arc::clone(&name),
            sync: Arc::clone(&sync),
            resync: Arc::clone(&listener.resync),
        };
        if let Some(m) = &self.metrics {
            m.handler_registered(&name, true);
        }
        if !lc.started {
            self.processor.add(listener, done);
            return Ok(registration);
        }
        // Joining a running informer: no pop may update the store or
        // notify between the snapshot and the listener joining. The
        // snapshot's adds are queued (and counted for `has_synced`) before
        // the registration is handed out.
        let block = self.block_deltas.lock();
        self.processor.add(Arc::clone(&listener), done);
        let snapshot = self.store.list();
        tracing::debug!(informer = %self.name, handler = %name, objects = snapshot.len(), "handler joins a running informer");
        for obj in snapshot {
            listener.add(Notification::Add { obj, initial: true });
        }
        drop(block);
        sync.report_if_synced();
        Ok(registration)
    }

    /// Applies the minimum and the check-period rules to a requested period.
    fn requested_resync(
        &self,
        lc: &mut crate::informer::Lifecycle,
        requested: Option<Duration>,
    ) -> Duration {
        let mut period = requested.unwrap_or(self.default_handler_resync);
        if period.is_zero() {
            return period;
        }
        if period < MINIMUM_RESYNC_PERIOD {
            tracing::info!(?period, minimum = ?MINIMUM_RESYNC_PERIOD, "handler resync period raised to the minimum");
            period = MINIMUM_RESYNC_PERIOD;
        }
        if period < lc.resync_check_period {
            if lc.started {
                tracing::info!(?period, check = ?lc.resync_check_period, "handler resync period raised to the started informer's resync check period");
                period = lc.resync_check_period;
            } else {
                lc.resync_check_period = period;
                self.processor.resync_check_period_changed(period);
            }
        }
        period
    }

    /// Unregisters a handler: it gets no further notification, what it had
    /// pending is dropped, and its thread ends once it returns from the
    /// notification it is handling (this call does not wait for that, so a
    /// handler may remove itself). Removing twice is not an error.
    pub fn remove_event_handler(
        &self,
        registration: &HandlerRegistration,
    ) -> Result<(), InformerError> {
        if registration.informer_id != self.id {
            return Err(InformerError::ForeignRegistration {
                informer: self.name.to_string(),
                handler: registration.name.to_string(),
            });
        }
        let _lc = self.lifecycle.lock();
        let _block = self.block_deltas.lock();
        if self.processor.remove(registration.listener_id) {
            tracing::debug!(informer = %self.name, handler = %registration.name, "handler removed");
        }
        Ok(())
    }
}
