//! Small serde helpers shared by the wire and config types.

use serde::{Deserialize, Deserializer};

/// A `null` (JSON `null`, or an empty YAML key such as `users:`) reads as
/// the type's default, e.g. an empty list.
pub(crate) fn null_as_empty<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}
