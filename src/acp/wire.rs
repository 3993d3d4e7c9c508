//! JSON-RPC 2.0 over newline-delimited JSON (ACP's stdio transport): reading one line
//! into a request or a notification, and [`Outgoing`], the writer every thread answers
//! through, one whole line at a time.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::{Value as Json, json};

/// The message was not JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// The message was JSON but not a request, or the request cannot be served now (a
/// prompt while one runs in the same session).
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
/// The parameters do not have the method's shape.
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// The run failed: the model server, the context, the setup.
pub(crate) const INTERNAL_ERROR: i64 = -32603;
/// ACP's code for a resource (here: a session) that does not exist.
pub(crate) const RESOURCE_NOT_FOUND: i64 = -32002;

/// A JSON-RPC error: its code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }
}

/// One message from the client.
#[derive(Debug, PartialEq)]
pub(crate) enum Incoming {
    /// A request, to be answered with its `id`.
    Request {
        id: Json,
        method: String,
        params: Json,
    },
    /// A notification: no answer.
    Notification { method: String, params: Json },
    /// A response to a request of ours (the agent sends none): ignored.
    Response,
}

/// Reads one line; an error comes with the id to answer it with (`null` when none can
/// be read).
pub(crate) fn read(line: &str) -> Result<Incoming, (Json, RpcError)> {
    let value: Json = serde_json::from_str(line).map_err(|e| {
        (
            Json::Null,
            RpcError::new(PARSE_ERROR, format!("parse error: {e}")),
        )
    })?;
    let Json::Object(mut message) = value else {
        let error = RpcError::new(INVALID_REQUEST, "invalid request: not a JSON object");
        return Err((Json::Null, error));
    };
    let id = message.remove("id");
    let params = message.remove("params").unwrap_or(Json::Null);
    let method = match message.remove("method") {
        Some(Json::String(method)) => method,
        Some(_) => {
            let error = RpcError::new(INVALID_REQUEST, "invalid request: `method` is not a string");
            return Err((id.unwrap_or(Json::Null), error));
        }
        None if id.is_some() => return Ok(Incoming::Response),
        None => {
            let error = RpcError::new(INVALID_REQUEST, "invalid request: no `method`");
            return Err((Json::Null, error));
        }
    };
    Ok(match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method, params },
    })
}

/// Where answers and notifications go: shared by the reader and the sessions' threads,
/// each message written whole and flushed. Once the client is gone, writes are dropped.
#[derive(Clone)]
pub(crate) struct Outgoing {
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl Outgoing {
    pub fn new(writer: impl Write + Send + 'static) -> Outgoing {
        Outgoing {
            writer: Arc::new(Mutex::new(Box::new(writer))),
        }
    }

    /// Answers request `id` with `result`.
    pub fn respond(&self, id: &Json, result: &impl Serialize) {
        let result = serde_json::to_value(result).unwrap_or(Json::Null);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    /// Answers request `id` with `error`.
    pub fn error(&self, id: &Json, error: &RpcError) {
        let error = json!({"code": error.code, "message": error.message});
        self.send(&json!({"jsonrpc": "2.0", "id": id, "error": error}));
    }

    /// Sends notification `method`.
    pub fn notify(&self, method: &str, params: &impl Serialize) {
        let params = serde_json::to_value(params).unwrap_or(Json::Null);
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    fn send(&self, message: &Json) {
        let mut line = message.to_string();
        line.push('\n');
        let mut writer = self
            .writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // A client that went away is noticed by the reader (its input ends).
        let _ = writer
            .write_all(line.as_bytes())
            .and_then(|()| writer.flush());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_that_is_not_json_is_a_parse_error_with_a_null_id() {
        let (id, error) = read("{not json").unwrap_err();
        assert_eq!((id, error.code), (Json::Null, PARSE_ERROR));
    }

    #[test]
    fn requests_notifications_and_responses_are_told_apart_by_id_and_method() {
        let request = read(r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{}}"#);
        assert!(
            matches!(request, Ok(Incoming::Request { ref method, .. }) if method == "initialize")
        );
        let notification = read(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#);
        assert!(matches!(notification, Ok(Incoming::Notification { .. })));
        assert_eq!(
            read(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
            Ok(Incoming::Response)
        );
        let (id, error) = read(r#"{"jsonrpc":"2.0","id":4,"method":7}"#).unwrap_err();
        assert_eq!((id, error.code), (json!(4), INVALID_REQUEST));
    }
}
