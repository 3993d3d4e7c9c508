//! What a web page in the user's browser may do to a server on their machine: nothing,
//! unless its origin is on the allow-list.
//!
//! A browser sends "simple" cross-site requests (`text/plain`, form-encoded and
//! multipart POSTs) without asking first, with a loopback `Host`, so neither the Host
//! check nor CORS stops them. Three rules do:
//! - a request carrying an `Origin` not on the allow-list gets 403 before any work (the
//!   MCP transport's rule, applied to every route);
//! - a request with a body must say `Content-Type: application/json` (415 otherwise),
//!   which a browser never sends cross-site without a CORS preflight;
//! - a preflight is answered only for an allowed origin.

use axum::extract::{Request, State as Shared};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The origins whose pages may call the server (`--allow-origin`, `[serve]
/// allow_origins` in `rlm.toml`). Empty by default: MCP hosts and scripts send no
/// `Origin`, browsers always do.
///
/// ```
/// use rlm_registry::serve::AllowedOrigins;
///
/// let allowed = AllowedOrigins::parse(["http://localhost:5173", "https://app.example.com"])?;
/// assert!(allowed.allows("http://localhost:5173"));
/// assert!(allowed.allows("https://app.example.com:443"));
/// assert!(!allowed.allows("http://localhost:3000"));
/// assert!(!allowed.allows("http://evil.example.com"));
/// assert!(AllowedOrigins::parse(["localhost:5173"]).is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowedOrigins(Vec<Origin>);

/// `scheme://host:port`, normalised; `port: None` in an allow-list entry is `:*`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: Option<u16>,
}

impl AllowedOrigins {
    /// Parses allow-list entries: `scheme://host`, `scheme://host:port`, or
    /// `scheme://host:*` for any port. A path, query or missing scheme is an error.
    pub fn parse<S: AsRef<str>>(
        entries: impl IntoIterator<Item = S>,
    ) -> Result<AllowedOrigins, String> {
        entries
            .into_iter()
            .map(|entry| {
                let entry = entry.as_ref();
                parse_origin(entry, true).ok_or_else(|| {
                    format!(
                        "`{entry}` is not an origin: write scheme://host[:port], e.g. http://localhost:5173 (:* for any port)"
                    )
                })
            })
            .collect::<Result<_, _>>()
            .map(AllowedOrigins)
    }

    /// Whether a request with this `Origin` header value may proceed.
    pub fn allows(&self, origin: &str) -> bool {
        let Some(given) = parse_origin(origin, false) else {
            return false;
        };
        self.0.iter().any(|allowed| {
            allowed.scheme == given.scheme
                && allowed.host == given.host
                && (allowed.port.is_none() || allowed.port == given.port)
        })
    }

    /// Whether the list is empty (no browser may call).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Parses an origin; with `wildcard`, `:*` is any port (stored as `None`).
fn parse_origin(text: &str, wildcard: bool) -> Option<Origin> {
    let (scheme, rest) = text.trim().split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
        return None;
    }
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(':') && !port.contains(']') => (host, Some(port)),
        _ => (rest, None),
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        Some("*") if wildcard => None,
        Some(port) => Some(port.parse::<u16>().ok()?),
        None => Some(default_port(&scheme)?),
    };
    Some(Origin {
        scheme,
        host: host.to_ascii_lowercase(),
        port,
    })
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// The shared state this layer reads.
pub(super) type Allowed = std::sync::Arc<AllowedOrigins>;

/// The outermost layer: refuses foreign origins, answers allowed origins' preflights,
/// refuses bodies that are not JSON, and adds CORS headers for allowed origins.
pub(super) async fn guard(Shared(allowed): Shared<Allowed>, request: Request, next: Next) -> Response {
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .map(|value| value.to_str().unwrap_or("").to_string());
    if let Some(origin) = &origin
        && !allowed.allows(origin)
    {
        return refuse(
            StatusCode::FORBIDDEN,
            format!(
                "requests from the web origin `{origin}` are not allowed: a browser page may call this server only if it was started with --allow-origin {origin} (or allow_origins in rlm.toml's [serve])"
            ),
        );
    }
    if let Some(origin) = &origin
        && is_preflight(&request)
    {
        return with_cors(StatusCode::NO_CONTENT.into_response(), origin, true);
    }
    if let Some(refusal) = non_json_body(request.method(), request.headers()) {
        return refusal;
    }
    let response = next.run(request).await;
    match &origin {
        Some(origin) => with_cors(response, origin, false),
        None => response,
    }
}

fn is_preflight(request: &Request) -> bool {
    request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// 415 for a request whose body is not declared JSON: a POST, PUT or PATCH with another
/// `Content-Type`, or with a body and none. Empty bodies without a type pass
/// (`curl -X POST .../v1/sessions`).
fn non_json_body(method: &Method, headers: &HeaderMap) -> Option<Response> {
    if !matches!(*method, Method::POST | Method::PUT | Method::PATCH) {
        return None;
    }
    let declared = headers
        .get(header::CONTENT_TYPE)
        .map(|value| value.to_str().unwrap_or(""));
    let is_json = |value: &str| {
        value
            .split(';')
            .next()
            .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
    };
    let acceptable = match declared {
        Some(value) => is_json(value),
        None => !has_body(headers),
    };
    (!acceptable).then(|| {
        refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "a request body must be JSON with Content-Type: application/json (got {})",
                declared.map_or("no Content-Type".to_string(), |v| format!("`{v}`"))
            ),
        )
    })
}

fn has_body(headers: &HeaderMap) -> bool {
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    length.is_some_and(|n| n > 0) || headers.contains_key(header::TRANSFER_ENCODING)
}

fn refuse(status: StatusCode, message: String) -> Response {
    (status, axum::Json(json!({"error": message}))).into_response()
}

/// The CORS headers an allowed origin's page needs: the methods and headers MCP and the
/// JSON API use, and `Mcp-Session-Id` readable by the page.
fn with_cors(mut response: Response, origin: &str, preflight: bool) -> Response {
    let headers = response.headers_mut();
    if let Ok(origin) = HeaderValue::from_str(origin) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    }
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("Mcp-Session-Id, WWW-Authenticate"),
    );
    if preflight {
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, DELETE"),
        );
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static(
                "Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID",
            ),
        );
        headers.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_match_by_scheme_host_and_port_with_default_ports_and_wildcards() {
        let allowed =
            AllowedOrigins::parse(["http://localhost:*", "https://App.Example.com/"]).unwrap();
        assert!(allowed.allows("http://localhost:3000"));
        assert!(allowed.allows("http://localhost"));
        assert!(!allowed.allows("https://localhost:3000"));
        assert!(allowed.allows("https://app.example.com"));
        assert!(!allowed.allows("https://app.example.com:8443"));
        assert!(!allowed.allows("null"));
        assert!(!allowed.allows("https://app.example.com.evil.com"));
        assert!(AllowedOrigins::parse(["http://x.com/path"]).is_err());
        assert!(AllowedOrigins::parse(["http://:80"]).is_err());
        assert!(AllowedOrigins::parse(["http://x.com:99999"]).is_err());
    }

    #[test]
    fn bodies_must_be_declared_json() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("3"));
        assert!(non_json_body(&Method::POST, &headers).is_some(), "no type");
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert!(non_json_body(&Method::POST, &headers).is_some());
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        assert!(non_json_body(&Method::POST, &headers).is_none());
        assert!(non_json_body(&Method::POST, &HeaderMap::new()).is_none(), "empty");
        assert!(non_json_body(&Method::GET, &headers).is_none());
    }
}
