//! Management routes: HTTP endpoints a provider offers next to its functions,
//! for what the host manages rather than what the model calls (the provider's data, its
//! settings). They are plain data here, with no web framework: `rlm serve` mounts them
//! under `/v1/providers/<provider>/`, behind the server's token, body limit and error
//! format, and runs them off the async runtime.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::{Value, json};

/// The HTTP method a [`Route`] answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    /// `GET`: read.
    Get,
    /// `POST`: create or act.
    Post,
    /// `PUT`: replace.
    Put,
    /// `PATCH`: change in part.
    Patch,
    /// `DELETE`: remove.
    Delete,
}

impl Method {
    /// The method's name on the wire.
    ///
    /// ```
    /// use rlm_registry::providers::Method;
    /// assert_eq!(Method::Get.as_str(), "GET");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }

    /// The method named `name` (upper case, as on the wire); `None` for any other.
    ///
    /// ```
    /// use rlm_registry::providers::Method;
    /// assert_eq!(Method::parse("DELETE"), Some(Method::Delete));
    /// assert_eq!(Method::parse("TRACE"), None);
    /// ```
    pub fn parse(name: &str) -> Option<Method> {
        [
            Method::Get,
            Method::Post,
            Method::Put,
            Method::Patch,
            Method::Delete,
        ]
        .into_iter()
        .find(|m| m.as_str() == name)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a route's handler receives.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RouteRequest {
    /// The `{name}` segments of the route's path, by name.
    pub params: BTreeMap<String, String>,
    /// The query string's parameters.
    pub query: BTreeMap<String, String>,
    /// The JSON body (`null` without one).
    pub body: Value,
}

/// What a route's handler answers: a status and a JSON body.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteResponse {
    /// The HTTP status (200, 404, …).
    pub status: u16,
    /// The JSON body.
    pub body: Value,
}

impl RouteResponse {
    /// `200` with `body`.
    ///
    /// ```
    /// use rlm_registry::providers::RouteResponse;
    /// assert_eq!(RouteResponse::ok(serde_json::json!([1])).status, 200);
    /// ```
    pub fn ok(body: Value) -> RouteResponse {
        RouteResponse { status: 200, body }
    }

    /// `status` with `{"error": message}`, the server's error format.
    ///
    /// ```
    /// use rlm_registry::providers::RouteResponse;
    /// let missing = RouteResponse::error(404, "no such item");
    /// assert_eq!(missing.body["error"], "no such item");
    /// ```
    pub fn error(status: u16, message: impl Into<String>) -> RouteResponse {
        RouteResponse {
            status,
            body: json!({ "error": message.into() }),
        }
    }
}

type RouteHandler = Arc<dyn Fn(&RouteRequest) -> RouteResponse + Send + Sync>;

/// One management route of a provider: a method, a path relative to the provider
/// (`/prices/{item}`: literal segments and `{name}` captures), a description and a
/// handler.
///
/// ```
/// use rlm_registry::providers::{Method, Route, RouteRequest, RouteResponse};
///
/// let route = Route::new(Method::Get, "/prices/{item}", "One item's price.", |request| {
///     RouteResponse::ok(serde_json::json!({ "item": request.params["item"] }))
/// });
/// assert_eq!(route.path(), "/prices/{item}");
/// let mut request = RouteRequest::default();
/// request.params.insert("item".into(), "tea".into());
/// assert_eq!(route.call(&request).body["item"], "tea");
/// ```
#[derive(Clone)]
pub struct Route {
    method: Method,
    path: String,
    description: String,
    handler: RouteHandler,
}

impl Route {
    /// A route answering `method` on `path` with `handler`. The path is checked when its
    /// provider is registered ([`Providers::register`](super::Providers::register)).
    pub fn new(
        method: Method,
        path: impl Into<String>,
        description: impl Into<String>,
        handler: impl Fn(&RouteRequest) -> RouteResponse + Send + Sync + 'static,
    ) -> Route {
        Route {
            method,
            path: path.into(),
            description: description.into(),
            handler: Arc::new(handler),
        }
    }

    /// The method it answers.
    pub fn method(&self) -> Method {
        self.method
    }

    /// Its path, relative to the provider.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What it does.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Runs the handler.
    pub fn call(&self, request: &RouteRequest) -> RouteResponse {
        (self.handler)(request)
    }

    /// The captures when `path` (relative to the provider) matches this route's path.
    pub(crate) fn captures(&self, path: &str) -> Option<BTreeMap<String, String>> {
        let pattern = segments(&self.path);
        let given = segments(path);
        if pattern.len() != given.len() {
            return None;
        }
        let mut captures = BTreeMap::new();
        for (expected, actual) in pattern.into_iter().zip(given) {
            match capture_name(expected) {
                Some(name) if !actual.is_empty() => {
                    captures.insert(name.to_string(), actual.to_string());
                }
                None if expected == actual => {}
                _ => return None,
            }
        }
        Some(captures)
    }

    /// Why the path cannot be served, if it cannot: it must start with `/`, have at least
    /// one segment, no empty segment, and captures named like identifiers, once each.
    pub(crate) fn path_problem(&self) -> Option<String> {
        let path = &self.path;
        if !path.starts_with('/') || path.len() == 1 {
            return Some(format!(
                "route `{self}`: the path must start with `/` and name at least one segment"
            ));
        }
        let mut names = Vec::new();
        for segment in segments(path) {
            let problem = match capture_name(segment) {
                _ if segment.is_empty() => Some("has an empty segment"),
                Some(name) if !crate::conventions::is_lua_name(name) => {
                    Some("has a `{…}` capture whose name is not an identifier")
                }
                Some(name) if names.contains(&name) => Some("captures one name twice"),
                Some(name) => {
                    names.push(name);
                    None
                }
                None if segment.contains(['{', '}']) => {
                    Some("has a `{` or `}` outside a whole-segment capture")
                }
                None => None,
            };
            if let Some(problem) = problem {
                return Some(format!("route `{self}`: the path {problem}"));
            }
        }
        None
    }

    /// Whether two routes would answer the same requests (same method, same shape).
    pub(crate) fn overlaps(&self, other: &Route) -> bool {
        let shape = |route: &Route| -> Vec<Option<String>> {
            segments(&route.path)
                .into_iter()
                .map(|s| capture_name(s).is_none().then(|| s.to_string()))
                .collect()
        };
        self.method == other.method && shape(self) == shape(other)
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

/// Two routes are equal when they answer the same method and path with the same
/// description (handlers cannot be compared).
impl PartialEq for Route {
    fn eq(&self, other: &Route) -> bool {
        (self.method, &self.path, &self.description)
            == (other.method, &other.path, &other.description)
    }
}

impl Eq for Route {}

/// `{"method", "path", "description"}`: how listings show a route.
impl serde::Serialize for Route {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        json!({
            "method": self.method.as_str(),
            "path": self.path,
            "description": self.description,
        })
        .serialize(serializer)
    }
}

impl fmt::Debug for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Route")
            .field("method", &self.method)
            .field("path", &self.path)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

fn segments(path: &str) -> Vec<&str> {
    path.strip_prefix('/').unwrap_or(path).split('/').collect()
}

fn capture_name(segment: &str) -> Option<&str> {
    segment.strip_prefix('{')?.strip_suffix('}')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(method: Method, path: &str) -> Route {
        Route::new(method, path, "", |_| RouteResponse::ok(Value::Null))
    }

    #[test]
    fn a_path_matches_literals_and_captures_segments() {
        let prices = route(Method::Get, "/prices/{item}");
        let captured = prices.captures("/prices/tea").unwrap();
        assert_eq!(captured["item"], "tea");
        assert_eq!(prices.captures("prices/tea").unwrap()["item"], "tea");
        assert!(prices.captures("/prices").is_none());
        assert!(prices.captures("/prices/").is_none());
        assert!(prices.captures("/costs/tea").is_none());
        assert!(prices.captures("/prices/tea/more").is_none());
    }

    #[test]
    fn bad_paths_are_named() {
        for (path, problem) in [
            ("prices", "must start with `/`"),
            ("/", "at least one segment"),
            ("/a//b", "empty segment"),
            ("/a/{1x}", "not an identifier"),
            ("/{a}/{a}", "twice"),
            ("/a{b}", "outside a whole-segment capture"),
        ] {
            let found = route(Method::Get, path).path_problem();
            assert!(
                found.as_deref().is_some_and(|f| f.contains(problem)),
                "{path}: {found:?}"
            );
        }
        assert_eq!(route(Method::Get, "/a/{b}/c").path_problem(), None);
    }

    #[test]
    fn routes_overlap_when_method_and_shape_agree() {
        let a = route(Method::Get, "/prices/{item}");
        assert!(a.overlaps(&route(Method::Get, "/prices/{name}")));
        assert!(!a.overlaps(&route(Method::Put, "/prices/{item}")));
        assert!(!a.overlaps(&route(Method::Get, "/prices/all")));
    }
}
