//! One cap for every session a server holds: MCP sessions (from `initialize` to their
//! end) and JSON-API sessions (`POST /v1/sessions`) take a [`Slot`] each from the same
//! [`Slots`]; a slot is given back when its holder drops it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Which protocol a session came by (for counting and for the refusal message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionKind {
    /// An MCP session (streamable HTTP or stdio).
    Mcp,
    /// A JSON-API session.
    Api,
}

/// The live-session counters under one cap.
#[derive(Debug)]
pub struct Slots {
    total: AtomicUsize,
    mcp: AtomicUsize,
    api: AtomicUsize,
    max: usize,
}

/// A taken slot; dropping it frees the slot.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
    kind: SessionKind,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.total.fetch_sub(1, Ordering::AcqRel);
        self.slots.counter(self.kind).fetch_sub(1, Ordering::AcqRel);
    }
}

impl Slots {
    /// At most `max` sessions of both kinds together.
    pub fn new(max: usize) -> Arc<Slots> {
        Arc::new(Slots {
            total: AtomicUsize::new(0),
            mcp: AtomicUsize::new(0),
            api: AtomicUsize::new(0),
            max,
        })
    }

    fn counter(&self, kind: SessionKind) -> &AtomicUsize {
        match kind {
            SessionKind::Mcp => &self.mcp,
            SessionKind::Api => &self.api,
        }
    }

    /// A slot for a new session of `kind`, or `None` when the cap is reached. Atomic:
    /// however many requests race, at most `max` slots are ever out.
    pub fn take(self: &Arc<Self>, kind: SessionKind) -> Option<Slot> {
        self.total
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |taken| {
                (taken < self.max).then_some(taken + 1)
            })
            .ok()?;
        self.counter(kind).fetch_add(1, Ordering::AcqRel);
        Some(Slot {
            slots: Arc::clone(self),
            kind,
        })
    }

    /// Live sessions of `kind`.
    pub fn count(&self, kind: SessionKind) -> usize {
        self.counter(kind).load(Ordering::Acquire)
    }

    /// Live sessions of both kinds.
    pub fn total(&self) -> usize {
        self.total.load(Ordering::Acquire)
    }

    /// The cap.
    pub fn max(&self) -> usize {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_kinds_share_one_cap_and_dropping_a_slot_frees_it() {
        let slots = Slots::new(2);
        let mcp = slots.take(SessionKind::Mcp).unwrap();
        let api = slots.take(SessionKind::Api).unwrap();
        assert!(slots.take(SessionKind::Mcp).is_none());
        assert_eq!(
            (slots.count(SessionKind::Mcp), slots.count(SessionKind::Api)),
            (1, 1)
        );
        drop(mcp);
        assert_eq!(slots.total(), 1);
        assert!(slots.take(SessionKind::Mcp).is_some());
        drop(api);
    }
}
