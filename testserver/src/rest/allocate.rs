//! What the REST layer reserves for an object beyond storage: a Service's
//! cluster IP and node ports (`kinds::ipam`), taken under the Service's
//! write lock, given back when the write fails or the Service goes.

use super::Core;
use crate::kinds::ipam::Reserved;
use crate::meta;
use crate::resource::{Behavior, ResourceInfo};
use crate::status::StatusError;
use serde_json::Value;

impl Core {
    /// Reserves what `obj` needs (`previous`: the stored object, on
    /// update); `None` for kinds that need nothing.
    pub(super) fn allocate(
        &self,
        info: &ResourceInfo,
        obj: &mut Value,
        previous: Option<&Value>,
    ) -> Result<Option<Reserved>, StatusError> {
        if info.behavior != Behavior::Service || meta::is_deleting(obj) {
            return Ok(None);
        }
        self.ipam
            .lock()
            .assign(obj, previous)
            .map(Some)
            .map_err(|e| StatusError::invalid(&info.group, &info.kind, meta::name(obj), &[e]))
    }

    /// Gives back what a failed (or dry-run) write reserved.
    pub(super) fn give_back(&self, reserved: Option<Reserved>) {
        if let Some(r) = reserved {
            self.ipam.lock().give_back(&r);
        }
    }

    /// Releases what `old` held and `new` (`None`: the object is gone)
    /// does not.
    pub(super) fn release(&self, info: &ResourceInfo, old: &Value, new: Option<&Value>) {
        if info.behavior == Behavior::Service {
            self.ipam.lock().release(old, new);
        }
    }
}
