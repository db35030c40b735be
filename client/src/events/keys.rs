//! The cache keys of events: which events are the same occurrence, which
//! are similar enough to aggregate, and which share a spam budget (client-go's
//! `getEventKey`, `EventAggregatorByReasonFunc` and `getSpamKey`). Each key
//! joins the event's source and involved object with the fields of its kind.

use k8s_openapi::api::core::v1::Event;

/// Source and involved object: what every key starts with.
fn source_and_object(event: &Event) -> [Option<&str>; 7] {
    let source = event.source.as_ref();
    let obj = &event.involved_object;
    [
        source.and_then(|s| s.component.as_deref()),
        source.and_then(|s| s.host.as_deref()),
        obj.kind.as_deref(),
        obj.namespace.as_deref(),
        obj.name.as_deref(),
        obj.uid.as_deref(),
        obj.api_version.as_deref(),
    ]
}

fn join(event: &Event, more: &[Option<&str>]) -> String {
    source_and_object(event)
        .iter()
        .chain(more)
        .map(|p| p.unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\u{1f}")
}

/// Source, object, type and reason: what similar events share.
pub(crate) fn aggregate_key(event: &Event) -> String {
    join(
        event,
        &[
            event.type_.as_deref(),
            event.reason.as_deref(),
            event.reporting_component.as_deref(),
            event.reporting_instance.as_deref(),
        ],
    )
}

/// Everything that makes two events the same occurrence.
pub(crate) fn event_key(event: &Event) -> String {
    join(
        event,
        &[
            event.involved_object.field_path.as_deref(),
            event.type_.as_deref(),
            event.reason.as_deref(),
            event.message.as_deref(),
        ],
    )
}

/// The key of a source + involved object: reason, type and message are not
/// part of it, so a hot loop that varies its message is limited too.
pub(crate) fn spam_key(event: &Event) -> String {
    join(event, &[])
}
