//! MCP `logging` (protocol versions before 2026-07-28, which deprecates it): once the
//! client sets a level (`logging/setLevel`), a `run_lua` call's printed output reaches it
//! as `notifications/message` at `info` while the code runs, and a run that fails ends
//! with a `warning`; messages below the client's level are not sent.
#![allow(deprecated)] // LoggingLevel: rmcp marks the whole capability deprecated (SEP-2577)

use std::sync::{Arc, Mutex};

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::{Peer, RoleServer};
use serde_json::json;
use tokio::task::JoinHandle;

use crate::environment::OutputObserver;

/// The logger name on every message.
const LOGGER: &str = "run_lua";
/// The most output one notification carries (queued pieces are joined up to this).
const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// The level the client asked for; none until it does (no messages then).
#[derive(Clone, Default)]
pub(super) struct LogLevel(Arc<Mutex<Option<LoggingLevel>>>);

fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl LogLevel {
    pub(super) fn set(&self, level: LoggingLevel) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(level);
    }

    /// Whether a message at `level` goes out.
    fn allows(&self, level: LoggingLevel) -> bool {
        let set = *self.0.lock().unwrap_or_else(|p| p.into_inner());
        set.is_some_and(|set| rank(level) >= rank(set))
    }

    /// An observer for one run that forwards its output as `info` messages, and the
    /// task sending them (await it so the messages precede the result); none when the
    /// client's level leaves `info` out.
    pub(super) fn forward_output(
        &self,
        peer: &Peer<RoleServer>,
    ) -> Option<(OutputObserver, JoinHandle<()>)> {
        if !self.allows(LoggingLevel::Info) {
            return None;
        }
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<String>();
        let observer: OutputObserver = Arc::new(move |text: &str| {
            let _ = sender.send(text.to_string());
        });
        let peer = peer.clone();
        let task = tokio::spawn(async move {
            while let Some(mut text) = receiver.recv().await {
                while text.len() < MAX_MESSAGE_BYTES {
                    match receiver.try_recv() {
                        Ok(more) => text.push_str(&more),
                        Err(_) => break,
                    }
                }
                let note = LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(text))
                    .with_logger(LOGGER);
                if peer.notify_logging_message(note).await.is_err() {
                    return;
                }
            }
        });
        Some((observer, task))
    }

    /// A `warning` that the run stopped, with why.
    pub(super) async fn warn(&self, peer: &Peer<RoleServer>, message: &str) {
        if self.allows(LoggingLevel::Warning) {
            let note = LoggingMessageNotificationParam::new(LoggingLevel::Warning, json!(message))
                .with_logger(LOGGER);
            let _ = peer.notify_logging_message(note).await;
        }
    }
}
