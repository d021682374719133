//! The request that `tollgate explain` asks about, built from the command line.

use axum::body::Body;
use axum::extract::MatchedPath;
use axum::routing::any;
use axum::{Extension, Router};
use clap::Args;
use http::header::{HeaderName, HeaderValue, HOST};
use http::{Method, Request, Uri};
use std::net::{IpAddr, SocketAddr};
use tollgate::source::{Identity, PeerAddr};
use tower_service::Service;

/// What the request looks like to the rate limiter.
#[derive(Debug, Args)]
pub(crate) struct RequestArgs {
    /// The method.
    #[arg(long, default_value = "GET")]
    method: Method,
    /// The path, without the query.
    #[arg(long, default_value = "/")]
    path: String,
    /// A query parameter (repeatable).
    #[arg(long = "query", value_name = "NAME=VALUE", value_parser = pair)]
    queries: Vec<(String, String)>,
    /// A header, `NAME=VALUE` or `NAME: VALUE` (repeatable).
    #[arg(long = "header", value_name = "NAME=VALUE", value_parser = header)]
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The `Host` header.
    #[arg(long)]
    host: Option<HeaderValue>,
    /// The socket peer's address: the client, or the proxy in front of it.
    #[arg(long)]
    ip: Option<IpAddr>,
    /// The route template the application's router matched, e.g. `/users/{id}`.
    #[arg(long)]
    route: Option<String>,
    /// The identity an authentication layer put in the request.
    #[arg(long)]
    identity: Option<String>,
}

impl RequestArgs {
    /// The request, as the rate-limit layer would receive it.
    pub(crate) fn request(&self) -> Result<Request<()>, String> {
        let mut uri = self.path.clone();
        if !self.queries.is_empty() {
            let query = form_urlencoded::Serializer::new(String::new())
                .extend_pairs(&self.queries)
                .finish();
            uri = format!("{uri}?{query}");
        }
        let mut request = Request::builder()
            .method(self.method.clone())
            .uri(&uri)
            .body(())
            .map_err(|error| format!("--path {}: {error}", self.path))?;
        let headers = request.headers_mut();
        for (name, value) in &self.headers {
            headers.append(name, value.clone());
        }
        if let Some(host) = &self.host {
            headers.insert(HOST, host.clone());
        }
        let extensions = request.extensions_mut();
        if let Some(ip) = self.ip {
            extensions.insert(PeerAddr(SocketAddr::new(ip, 0)));
        }
        if let Some(identity) = &self.identity {
            extensions.insert(Identity::new(identity));
        }
        if let Some(route) = &self.route {
            let matched = matched_path(route, request.method(), request.uri())?;
            request.extensions_mut().insert(matched);
        }
        Ok(request)
    }
}

/// The `MatchedPath` axum records when `route` matches `uri`. Only axum can make one, so the
/// request goes through a router with that one route.
fn matched_path(route: &str, method: &Method, uri: &Uri) -> Result<MatchedPath, String> {
    if !is_plain_route(route) {
        return Err(format!(
            "--route {route}: use `/` and segments that are literal, `{{name}}`, or a final `{{*name}}`"
        ));
    }
    let mut router = Router::new().route(
        route,
        any(|matched: MatchedPath| async move { Extension(matched) }),
    );
    let mut request = Request::new(Body::empty());
    *request.method_mut() = method.clone();
    *request.uri_mut() = uri.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|error| format!("cannot start a runtime to route the request: {error}"))?;
    let response = runtime.block_on(async {
        std::future::poll_fn(|cx| Service::<Request<Body>>::poll_ready(&mut router, cx)).await?;
        router.call(request).await
    });
    let Ok(response) = response;
    response
        .extensions()
        .get::<MatchedPath>()
        .cloned()
        .ok_or_else(|| format!("--path {} does not match --route {route}", uri.path()))
}

/// Whether axum takes `route` as it is: axum panics on a template it cannot parse and has no
/// fallible way to add one, so only the plain forms it always accepts are let through.
fn is_plain_route(route: &str) -> bool {
    let Some(rest) = route.strip_prefix('/') else {
        return false;
    };
    let segments: Vec<&str> = rest.split('/').collect();
    let last = segments.len() - 1;
    segments.iter().enumerate().all(|(i, segment)| {
        let Some(capture) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) else {
            return !segment.contains(['{', '}']) && !segment.starts_with([':', '*']);
        };
        let name = match capture.strip_prefix('*') {
            Some(name) if i == last => name,
            _ => capture,
        };
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// `NAME=VALUE`.
fn pair(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .ok_or_else(|| format!("`{text}` is not NAME=VALUE"))
}

/// `NAME=VALUE` or `NAME: VALUE`: a header name contains neither `=` nor `:`.
fn header(text: &str) -> Result<(HeaderName, HeaderValue), String> {
    let (name, value) = text
        .split_once([':', '='])
        .ok_or_else(|| format!("`{text}` is not NAME=VALUE"))?;
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| format!("`{name}` is not a header name"))?;
    let value = HeaderValue::from_str(value.trim())
        .map_err(|_| format!("`{value}` is not a header value"))?;
    Ok((name, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_routes_are_accepted() {
        for route in [
            "/",
            "/users/{id}",
            "/users/{id}/friends",
            "/files/{*rest}",
            "/a//b",
        ] {
            assert!(is_plain_route(route), "{route}");
        }
    }

    #[test]
    fn routes_axum_could_refuse_are_not() {
        for route in [
            "",
            "users",
            "/users/:id",
            "/{*rest}/x",
            "/{}",
            "/{id",
            "/x{id}",
            "/{a-b}",
        ] {
            assert!(!is_plain_route(route), "{route}");
        }
    }

    #[test]
    fn headers_split_at_the_first_separator() {
        let (name, value) = header("cookie: a=b").expect("a header");
        assert_eq!(
            (name.as_str(), value.to_str().ok()),
            ("cookie", Some("a=b"))
        );
        let (name, value) = header("x-user-id=42").expect("a header");
        assert_eq!(
            (name.as_str(), value.to_str().ok()),
            ("x-user-id", Some("42"))
        );
        assert!(header("no separator").is_err());
    }

    #[test]
    fn the_route_becomes_the_matched_path() {
        let matched = matched_path("/users/{id}", &Method::GET, &Uri::from_static("/users/42"))
            .expect("matches");
        assert_eq!(matched.as_str(), "/users/{id}");
        assert!(matched_path("/users/{id}", &Method::GET, &Uri::from_static("/posts")).is_err());
    }
}
