//! Detects calls made from inside a processor that would wait for that same
//! processor to end (a deadlock), so they fail with an error instead.

use std::cell::Cell;

thread_local! {
    /// Identity of the FIFO whose processor runs on this thread, 0 if none.
    static PROCESSING: Cell<usize> = const { Cell::new(0) };
}

/// Marks the current thread as running a processor of FIFO `id` until dropped.
pub(crate) struct ProcessorScope {
    previous: usize,
}

impl ProcessorScope {
    /// Enters the processor of FIFO `id`.
    pub(crate) fn enter(id: usize) -> Self {
        Self {
            previous: PROCESSING.with(|p| p.replace(id)),
        }
    }
}

impl Drop for ProcessorScope {
    fn drop(&mut self) {
        PROCESSING.with(|p| p.set(self.previous));
    }
}

/// Whether this thread is running a processor of FIFO `id`.
pub(crate) fn inside(id: usize) -> bool {
    PROCESSING.with(|p| p.get() == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_nest_and_restore() {
        assert!(!inside(7));
        {
            let _a = ProcessorScope::enter(7);
            assert!(inside(7));
            {
                let _b = ProcessorScope::enter(9);
                assert!(inside(9));
                assert!(!inside(7));
            }
            assert!(inside(7));
        }
        assert!(!inside(7));
    }
}
