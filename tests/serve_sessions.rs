//! `rlm serve`'s sessions: one cap for MCP and JSON-API sessions, idle expiry, and how
//! a session's end (DELETE /mcp, a stdio client leaving, a dropped connection) stops
//! its executions.

mod support;
