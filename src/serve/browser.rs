//! What a web page in the user's browser may do to a server on their machine: nothing,
//! unless its origin is on the allow-list or is the server's own.
//!
//! A browser sends "simple" cross-site requests (`text/plain`, form-encoded and
//! multipart POSTs) without asking first, with a loopback `Host`, so neither the Host
//! check nor CORS stops them. Three rules do:
//! - a request carrying an `Origin` that is neither on the allow-list nor the server's
//!   own loopback origin gets 403 before any work (the MCP transport's rule, applied to
//!   every route);
//! - a request with a body must say `Content-Type: application/json` (415 otherwise),
//!   which a browser never sends cross-site without a CORS preflight;
//! - a preflight is answered only for an allowed origin.

use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::{Request, State as Shared};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::IncomingStream;
use serde_json::json;
use tokio::net::TcpListener;

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

/// The port a connection reached the server on, read from the accepted socket: what
/// tells the server's own origin from a page on another port of the same machine.
#[derive(Clone, Copy, Debug)]
pub(super) struct LocalPort(Option<u16>);

impl Connected<IncomingStream<'_, TcpListener>> for LocalPort {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> LocalPort {
        LocalPort(stream.io().local_addr().ok().map(|address| address.port()))
    }
}

/// Whether `name` (a host without its port; an IPv6 address with or without brackets)
/// names this machine's loopback interface: `localhost` or a loopback address.
pub(super) fn is_loopback_name(name: &str) -> bool {
    let bare = name
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(name);
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A `Host` header's name and port (80 when it gives none); `None` when it is not
/// `name[:port]`.
pub(super) fn split_host(host: &str) -> Option<(&str, u16)> {
    let (name, port) = match host.strip_prefix('[') {
        Some(rest) => {
            let (inner, after) = rest.split_once(']')?;
            (inner, after.strip_prefix(':'))
        }
        None => match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        },
    };
    let port = match port {
        Some(port) => port.parse().ok()?,
        None => 80,
    };
    Some((name, port))
}

/// Whether `origin` is the server's own: plain `http` on a loopback name and on
/// `own_port`, the port the request came in on, which its `Host` names too, with a
/// loopback name. Such a page can only have been served from this port of this machine
/// (the server, or a process that could call it directly anyway); a page from any other
/// port, host or scheme is another origin and needs the allow-list.
fn is_own_origin(origin: &str, host: Option<&str>, own_port: u16) -> bool {
    let Some(origin) = parse_origin(origin, false) else {
        return false;
    };
    let host_is_own = host
        .and_then(split_host)
        .is_some_and(|(name, port)| is_loopback_name(name) && port == own_port);
    origin.scheme == "http"
        && is_loopback_name(&origin.host)
        && origin.port == Some(own_port)
        && host_is_own
}

/// Whether the request's `Origin` may proceed: on the allow-list, or the server's own
/// origin when the connection's port is known ([`LocalPort`]).
fn origin_allowed(
    allowed: &AllowedOrigins,
    origin: &str,
    headers: &HeaderMap,
    own_port: Option<u16>,
) -> bool {
    if allowed.allows(origin) {
        return true;
    }
    let host = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok());
    own_port.is_some_and(|port| is_own_origin(origin, host, port))
}

/// What this layer reads: the allow-list and the body limit.
pub(super) struct Browser {
    pub(super) allowed: AllowedOrigins,
    pub(super) body_limit: usize,
}

/// The outermost layer: refuses foreign origins, answers allowed origins' preflights,
/// refuses bodies that are not JSON, and adds CORS headers for allowed origins.
pub(super) async fn guard(
    Shared(browser): Shared<std::sync::Arc<Browser>>,
    request: Request,
    next: Next,
) -> Response {
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .map(|value| value.to_str().unwrap_or("").to_string());
    let own_port = request
        .extensions()
        .get::<ConnectInfo<LocalPort>>()
        .and_then(|info| info.0.0);
    if let Some(origin) = &origin
        && !origin_allowed(&browser.allowed, origin, request.headers(), own_port)
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
    let request = match non_json_body(request, browser.body_limit).await {
        Ok(request) => request,
        Err(refusal) => return refusal,
    };
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
/// `Content-Type`, or with a non-empty body and none. Empty bodies without a type pass
/// (`curl -X POST .../v1/sessions`); to tell, a body without a type is read here.
async fn non_json_body(request: Request, limit: usize) -> Result<Request, Response> {
    if !matches!(
        *request.method(),
        Method::POST | Method::PUT | Method::PATCH
    ) {
        return Ok(request);
    }
    let declared = request
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|value| value.to_str().unwrap_or("").to_string());
    let unsupported = |declared: Option<&str>| {
        refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "a request body must be JSON sent with Content-Type: application/json (got {})",
                declared.map_or("no Content-Type".to_string(), |v| format!("`{v}`"))
            ),
        )
    };
    match declared.as_deref() {
        Some(value) if is_json(value) => Ok(request),
        Some(other) => Err(unsupported(Some(other))),
        None => {
            let (parts, body) = request.into_parts();
            let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
                refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the request body is larger than {limit} bytes (--body-limit)"),
                )
            })?;
            if !bytes.is_empty() {
                return Err(unsupported(None));
            }
            Ok(Request::from_parts(parts, axum::body::Body::from(bytes)))
        }
    }
}

fn is_json(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
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
    fn only_plain_http_on_a_loopback_name_and_the_own_port_is_the_own_origin() {
        let own = |origin: &str, host: &str| is_own_origin(origin, Some(host), 8765);
        for (origin, host) in [
            ("http://127.0.0.1:8765", "127.0.0.1:8765"),
            ("http://localhost:8765", "localhost:8765"),
            ("http://LOCALHOST:8765/", "127.0.0.1:8765"),
            ("http://[::1]:8765", "[::1]:8765"),
            ("http://127.0.0.1:8765", "localhost:8765"),
        ] {
            assert!(own(origin, host), "{origin} with Host {host}");
        }
        for (origin, host) in [
            ("http://127.0.0.1:8766", "127.0.0.1:8765"),
            ("http://127.0.0.1", "127.0.0.1:8765"),
            ("https://127.0.0.1:8765", "127.0.0.1:8765"),
            ("http://localhost.evil.com:8765", "127.0.0.1:8765"),
            ("http://127.0.0.1.evil:8765", "127.0.0.1:8765"),
            ("http://evil.example.com:8765", "127.0.0.1:8765"),
            ("http://10.0.0.1:8765", "127.0.0.1:8765"),
            ("null", "127.0.0.1:8765"),
            ("http://127.0.0.1:8765", "evil.example.com:8765"),
            ("http://127.0.0.1:8765", "127.0.0.1:8766"),
            ("http://127.0.0.1:8765", "127.0.0.1"),
            ("http://127.0.0.1:8765", "127.0.0.1:x"),
        ] {
            assert!(!own(origin, host), "{origin} with Host {host}");
        }
        assert!(!is_own_origin("http://127.0.0.1:8765", None, 8765));
        assert!(is_own_origin("http://localhost", Some("localhost"), 80));
    }

    #[test]
    fn json_content_types_are_recognised_with_parameters() {
        assert!(is_json("application/json"));
        assert!(is_json("Application/JSON; charset=utf-8"));
        assert!(!is_json("text/plain"));
        assert!(!is_json("application/x-www-form-urlencoded"));
        assert!(!is_json("application/jsonp"));
    }
}
