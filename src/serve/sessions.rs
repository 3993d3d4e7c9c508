//! Live sessions (JSON API sessions and MCP sessions that used `run_lua`): a table with a
//! cap, and an idle timeout enforced by a reaper task. Removing a session from the table
//! drops its thread and environment once no request holds it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::executor::SessionThread;

/// One live session.
pub struct Session {
    /// The thread that owns the environment.
    pub thread: SessionThread,
    last_used: Mutex<Instant>,
    running: AtomicUsize,
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
    Full(usize),
    /// The thread or environment could not be created.
    Setup(String),
}

impl std::fmt::Display for CreateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CreateError::Full(max) => write!(
                f,
                "too many live sessions (at most {max}): end one (DELETE /v1/sessions/ID) or wait for one to time out"
            ),
            CreateError::Setup(message) => f.write_str(message),
        }
    }
}

/// The table of live sessions.
pub struct Sessions {
    live: Mutex<HashMap<String, Arc<Session>>>,
    max: usize,
    idle_timeout: Duration,
}

impl Sessions {
    /// A table of at most `max` sessions, each dropped after `idle_timeout` unused.
    pub fn new(max: usize, idle_timeout: Duration) -> Sessions {
        Sessions {
            live: Mutex::new(HashMap::new()),
            max,
            idle_timeout,
        }
    }

    fn live(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        // A panic while holding this lock cannot leave the map inconsistent.
        self.live
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Creates a session with `start`'s thread; returns its id.
    pub fn create(
        &self,
        start: impl FnOnce() -> Result<SessionThread, String>,
    ) -> Result<String, CreateError> {
        if self.len() >= self.max {
            return Err(CreateError::Full(self.max));
        }
        let thread = start().map_err(CreateError::Setup)?;
        let mut live = self.live();
        if live.len() >= self.max {
            return Err(CreateError::Full(self.max));
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let session = Session {
            thread,
            last_used: Mutex::new(Instant::now()),
            running: AtomicUsize::new(0),
        };
        live.insert(id.clone(), Arc::new(session));
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
        self.live().remove(id).is_some()
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
        live.retain(|_, session| session.idle_for(now) < self.idle_timeout);
        before - live.len()
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
