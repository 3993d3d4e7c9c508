//! Live Lua environments (JSON API sessions and MCP sessions that used `run_lua`): a
//! table with an idle timeout enforced by a reaper task. The cap is not kept here but by
//! [`Slots`](super::slots::Slots): a JSON-API session's entry holds its slot, an MCP
//! session's environment lives under its MCP session's slot. Removing a session from the
//! table drops its thread and environment once no request holds it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::executor::SessionThread;
use super::slots::{SessionKind, Slot};
use super::state_dir::StateDir;

/// One live session.
pub struct Session {
    /// The thread that owns the environment.
    pub thread: SessionThread,
    last_used: Mutex<Instant>,
    running: AtomicUsize,
    /// A JSON-API session's place under the cap, freed with the entry.
    _slot: Option<Slot>,
}

/// Marks a session busy while alive (the reaper leaves busy sessions alone) and
/// refreshes its idle clock when dropped.
pub struct InUse(Arc<Session>);

impl InUse {
    /// The session.
    pub fn session(&self) -> &Session {
        &self.0
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        self.0.touch();
        self.0.running.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Session {
    fn touch(&self) {
        if let Ok(mut last_used) = self.last_used.lock() {
            *last_used = Instant::now();
        }
    }

    fn idle_for(&self, now: Instant) -> Duration {
        if self.running.load(Ordering::Acquire) > 0 {
            return Duration::ZERO;
        }
        self.last_used
            .lock()
            .map(|last_used| now.saturating_duration_since(*last_used))
            .unwrap_or_default()
    }
}

/// Why a session could not be created.
#[derive(Debug, PartialEq, Eq)]
pub enum CreateError {
    /// The cap on live sessions is reached.
    Full {
        /// The protocol the refused session came by (the advice differs).
        kind: SessionKind,
        /// The cap, MCP and JSON-API sessions together.
        max: usize,
        /// How long a session may stay idle before it ends.
        idle_timeout: Duration,
    },
    /// The thread or environment could not be created.
    Setup(String),
}

impl std::fmt::Display for CreateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CreateError::Full {
                kind,
                max,
                idle_timeout,
            } => {
                let idle = idle_timeout.as_secs_f64();
                let advice = match kind {
                    SessionKind::Mcp => format!(
                        "close an MCP session you no longer need (DELETE /mcp with its Mcp-Session-Id header; MCP clients do this when they close) or wait until one has been idle for {idle} s"
                    ),
                    SessionKind::Api => format!(
                        "end one (DELETE /v1/sessions/ID) or wait until one has been idle for {idle} s"
                    ),
                };
                write!(
                    f,
                    "too many live sessions (at most {max}, MCP and JSON-API sessions together): {advice}"
                )
            }
            CreateError::Setup(message) => f.write_str(message),
        }
    }
}

/// The table of live sessions.
pub struct Sessions {
    live: Mutex<HashMap<String, Arc<Session>>>,
    idle_timeout: Duration,
    /// Where sessions are journaled (`--state-dir`), if anywhere.
    state_dir: Option<Arc<StateDir>>,
}

impl Sessions {
    /// A table whose sessions are dropped after `idle_timeout` unused.
    pub fn new(idle_timeout: Duration) -> Sessions {
        Sessions {
            live: Mutex::new(HashMap::new()),
            idle_timeout,
            state_dir: None,
        }
    }

    /// Journals the sessions in `state_dir`: an ended session's journal is removed.
    pub(crate) fn with_state_dir(mut self, state_dir: Option<Arc<StateDir>>) -> Sessions {
        self.state_dir = state_dir;
        self
    }

    /// Where the sessions are journaled, if anywhere.
    pub(crate) fn state_dir(&self) -> Option<&Arc<StateDir>> {
        self.state_dir.as_ref()
    }

    fn live(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        // A panic while holding this lock cannot leave the map inconsistent.
        self.live
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Creates a session with `start`'s thread, holding `slot` (a JSON-API session's
    /// place under the cap; none for an MCP session's environment); returns its id.
    pub fn create(
        &self,
        slot: Option<Slot>,
        start: impl FnOnce(&str) -> Result<SessionThread, String>,
    ) -> Result<String, CreateError> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        self.create_with_id(id, slot, start)
    }

    /// [`Sessions::create`] under a given id (a journaled session coming back).
    pub fn create_with_id(
        &self,
        id: String,
        slot: Option<Slot>,
        start: impl FnOnce(&str) -> Result<SessionThread, String>,
    ) -> Result<String, CreateError> {
        let thread = start(&id).map_err(CreateError::Setup)?;
        let session = Session {
            thread,
            last_used: Mutex::new(Instant::now()),
            running: AtomicUsize::new(0),
            _slot: slot,
        };
        self.live().insert(id.clone(), Arc::new(session));
        Ok(id)
    }

    /// The session `id`, marked in use until the guard drops.
    pub fn get(&self, id: &str) -> Option<InUse> {
        let session = Arc::clone(self.live().get(id)?);
        session.running.fetch_add(1, Ordering::AcqRel);
        Some(InUse(session))
    }

    /// Ends the session `id`; false if there was none.
    pub fn remove(&self, id: &str) -> bool {
        let journaled = self.state_dir.as_ref().is_some_and(|dir| dir.has(id));
        if let Some(dir) = &self.state_dir {
            dir.remove(id);
        }
        self.live().remove(id).is_some() || journaled
    }

    /// Drops the session `id` from the table, keeping its journal: an MCP session
    /// that ended without its client deleting it (the server stopping, the client
    /// leaving), whose client may come back with the id after a restart. The journal
    /// expires unused ([`StateDir::sweep`]).
    pub(crate) fn detach(&self, id: &str) {
        self.live().remove(id);
    }

    /// Whether the session `id` is live.
    pub(crate) fn is_live(&self, id: &str) -> bool {
        self.live().contains_key(id)
    }

    /// How many sessions are live.
    pub fn len(&self) -> usize {
        self.live().len()
    }

    /// Ends the sessions idle longer than the timeout; returns how many.
    pub fn reap(&self) -> usize {
        let now = Instant::now();
        let mut live = self.live();
        let before = live.len();
        live.retain(|id, session| {
            let keep = session.idle_for(now) < self.idle_timeout;
            if let (false, Some(dir)) = (keep, &self.state_dir) {
                dir.remove(id);
            }
            keep
        });
        let reaped = before - live.len();
        drop(live);
        if let Some(dir) = &self.state_dir {
            dir.sweep(self.idle_timeout, |id| self.is_live(id));
        }
        reaped
    }

    /// How often the reaper should look: often enough that a session outlives its
    /// timeout by at most a quarter of it (and at most a few seconds).
    pub fn reap_interval(&self) -> Duration {
        (self.idle_timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(5))
    }

    /// Ends every session (at shutdown).
    pub fn clear(&self) {
        self.live().clear();
    }
}
