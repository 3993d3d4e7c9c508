//! MCP sessions as the server accounts for them: each holds a [`Slot`] under the one
//! session cap from `initialize` until it ends, has an idle expiry, and ends its running
//! executions at once when it ends (`DELETE /mcp`, a stdio client leaving, expiry).
//!
//! A call whose HTTP connection drops is not cancelled (the MCP transport allows the
//! client to resume the stream with `Last-Event-ID`); it keeps running for the
//! disconnect grace period, then is interrupted unless the client came back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio_util::sync::CancellationToken;

use super::State;
use super::slots::Slot;

/// One MCP session: its place under the cap, its `run_lua` environment (an id in the
/// environment table, created on first use), and what it is running.
pub(super) struct McpSession {
    state: Arc<State>,
    /// The id of the session's environment in the table, if it has one.
    pub(super) environment: Mutex<Option<String>>,
    slot: Mutex<Option<Slot>>,
    /// Cancelled when the session ends: every call's token is a child of it.
    ended: CancellationToken,
    last_used: Mutex<Instant>,
    busy: AtomicUsize,
    /// The running calls by JSON-RPC request id (as JSON text), with when they started,
    /// for the disconnect grace.
    calls: Mutex<HashMap<String, (CancellationToken, Instant)>>,
    /// When the client last resumed a stream: a call started before is not stopped.
    last_resumed: Arc<Mutex<Option<Instant>>>,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every value behind these locks stays consistent if a holder panicked.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl McpSession {
    pub(super) fn new(state: Arc<State>, slot: Option<Slot>) -> Arc<McpSession> {
        Arc::new(McpSession {
            state,
            environment: Mutex::new(None),
            slot: Mutex::new(slot),
            ended: CancellationToken::new(),
            last_used: Mutex::new(Instant::now()),
            busy: AtomicUsize::new(0),
            calls: Mutex::new(HashMap::new()),
            last_resumed: Arc::new(Mutex::new(None)),
        })
    }

    /// Fired when the session ends (for a transport that learns of its end first).
    pub(super) fn ended(&self) -> &CancellationToken {
        &self.ended
    }

    /// Ends the session now, as its client deleted it or it expired: its executions
    /// are interrupted, its slot and environment freed, the environment's journal
    /// (`--state-dir`) removed. Idempotent.
    pub(super) fn end(&self) {
        self.finish(true);
    }

    /// Ends the session as [`McpSession::end`] does, but keeps its environment's
    /// journal: the server is stopping, or the client left without deleting it, and
    /// may come back with the environment's id (`run_lua`'s `session`).
    pub(super) fn stop(&self) {
        self.finish(false);
    }

    fn finish(&self, forget: bool) {
        self.ended.cancel();
        drop(locked(&self.slot).take());
        if let Some(id) = locked(&self.environment).take() {
            match forget {
                true => {
                    self.state.sessions.remove(&id);
                }
                false => self.state.sessions.detach(&id),
            }
        }
    }

    pub(super) fn touch(&self) {
        *locked(&self.last_used) = Instant::now();
    }

    fn idle_for(&self, now: Instant) -> Duration {
        if self.busy.load(Ordering::Acquire) > 0 {
            return Duration::ZERO;
        }
        now.saturating_duration_since(*locked(&self.last_used))
    }

    /// Registers a running call under its request id: its token is cancelled when the
    /// session ends, when `cancel` (the request's own token) is, or when the grace after
    /// a dropped connection runs out. The call is the session's until the guard drops.
    pub(super) fn begin_call(
        self: &Arc<Self>,
        request_id: String,
        cancel: &CancellationToken,
    ) -> RunningCall {
        let token = self.ended.child_token();
        let link = {
            let (request, token) = (cancel.clone(), token.clone());
            tokio::spawn(async move {
                request.cancelled().await;
                token.cancel();
            })
        };
        self.busy.fetch_add(1, Ordering::AcqRel);
        locked(&self.calls).insert(request_id.clone(), (token.clone(), Instant::now()));
        RunningCall {
            session: Arc::clone(self),
            request_id,
            token,
            link,
        }
    }

    /// The connection that was to carry `request_id`'s answer dropped: the call keeps
    /// running for `grace`, then stops unless the client resumed a stream of the session
    /// since the call started (whether before or after the drop was noticed here).
    fn disconnected(&self, request_id: &str, grace: Duration) {
        let Some((token, started)) = locked(&self.calls).get(request_id).cloned() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime to wait on (shutting down): stop it now.
            token.cancel();
            return;
        };
        let last_resumed = Arc::clone(&self.last_resumed);
        runtime.spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(grace) => {}
                () = token.cancelled() => return,
            }
            let resumed = locked(&last_resumed).is_some_and(|at| at >= started);
            if !resumed {
                tracing::info!("a call's connection dropped and was not resumed: interrupting it");
                token.cancel();
            }
        });
    }

    fn resumed(&self) {
        *locked(&self.last_resumed) = Some(Instant::now());
    }
}

impl Drop for McpSession {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A call in progress; dropping it unregisters the call and refreshes the idle clock.
pub(super) struct RunningCall {
    session: Arc<McpSession>,
    request_id: String,
    token: CancellationToken,
    link: tokio::task::JoinHandle<()>,
}

impl RunningCall {
    /// Cancelled when the call must stop (request cancelled, session ended, connection
    /// gone past the grace period).
    pub(super) fn token(&self) -> &CancellationToken {
        &self.token
    }
}

impl Drop for RunningCall {
    fn drop(&mut self) {
        self.link.abort();
        locked(&self.session.calls).remove(&self.request_id);
        self.session.touch();
        self.session.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The live HTTP MCP sessions by `Mcp-Session-Id`, and the session manager that serves
/// them (to close the ones that expire).
#[derive(Default)]
pub(super) struct McpSessions {
    live: Mutex<HashMap<String, Weak<McpSession>>>,
    manager: OnceLock<Arc<LocalSessionManager>>,
}

impl McpSessions {
    /// Remembers the session manager the HTTP service uses.
    pub(super) fn set_manager(&self, manager: Arc<LocalSessionManager>) {
        let _ = self.manager.set(manager);
    }

    pub(super) fn register(&self, id: String, session: &Arc<McpSession>) {
        locked(&self.live).insert(id, Arc::downgrade(session));
    }

    fn get(&self, id: &str) -> Option<Arc<McpSession>> {
        locked(&self.live).get(id).and_then(Weak::upgrade)
    }

    /// `DELETE /mcp`: ends the session before rmcp closes it, so its executions stop and
    /// its slot is free when the answer goes out.
    pub(super) fn end(&self, id: &str) {
        let session = locked(&self.live)
            .remove(id)
            .and_then(|weak| weak.upgrade());
        if let Some(session) = session {
            session.end();
        }
    }

    pub(super) fn touch(&self, id: &str) {
        if let Some(session) = self.get(id) {
            session.touch();
        }
    }

    pub(super) fn resumed(&self, id: &str) {
        if let Some(session) = self.get(id) {
            session.resumed();
        }
    }

    pub(super) fn disconnected(&self, id: &str, request_id: &str, grace: Duration) {
        if let Some(session) = self.get(id) {
            session.disconnected(request_id, grace);
        }
    }

    /// Ends the sessions idle for `idle_timeout` (and forgets those already gone), then
    /// closes them in the session manager: their next request gets 404, which tells the
    /// client to initialize again. Returns how many ended.
    pub(super) async fn reap(&self, idle_timeout: Duration) -> usize {
        let now = Instant::now();
        let mut expired = Vec::new();
        locked(&self.live).retain(|id, weak| match weak.upgrade() {
            None => false,
            Some(session) if session.idle_for(now) >= idle_timeout => {
                session.end();
                expired.push(id.clone());
                false
            }
            Some(_) => true,
        });
        if let Some(manager) = self.manager.get() {
            for id in &expired {
                use rmcp::transport::streamable_http_server::session::SessionManager;
                let _ = manager.close_session(&id.as_str().into()).await;
            }
        }
        expired.len()
    }

    /// Ends every session (at shutdown), keeping their journals for a restart.
    pub(super) fn clear(&self) {
        let sessions: Vec<_> = locked(&self.live).drain().collect();
        for (_, weak) in sessions {
            if let Some(session) = weak.upgrade() {
                session.stop();
            }
        }
    }
}
