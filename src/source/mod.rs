//! Where descriptor values come from.
//!
//! Each descriptor key in the rules names a source: a built-in one (`remote_address`,
//! `method`, `path`, `route`, `host`) or one declared under `sources` (a header, a query
//! parameter, the [`Identity`] an authentication layer stored in the request, a type of the
//! application's that an earlier layer stored there, or a classifier of method and path). A
//! request that has no value for a key does not match rules on that key.
//!
//! What a server provides lives here: the socket peer ([`PeerAddr`], or the connect info of
//! axum and tonic), the [`Identity`], and how the client address is found behind proxies
//! ([`ClientIpResolver`], configured by the rules' `client_ip`).

mod classifier;
mod client_addr;
mod client_ip;
mod extension;
mod forwarded;
mod peer;
mod value;

pub(crate) use classifier::{Classifier, PathPattern};
pub use client_addr::ClientAddr;
pub use client_ip::ClientIpResolver;
pub(crate) use extension::ExtensionSource;
pub use forwarded::ForwardedHeader;
pub use peer::PeerAddr;
pub(crate) use value::Value;

use http::{Extensions, HeaderMap, HeaderName, Method, Uri};
use std::fmt;

/// The identity of the caller, put into the request extensions by an authentication layer
/// that runs before tollgate; the value of sources declared as `identity`.
///
/// ```
/// use tollgate::source::Identity;
///
/// let mut request = http::Request::new(());
/// request.extensions_mut().insert(Identity::new("user-42"));
/// assert_eq!(request.extensions().get::<Identity>().map(Identity::as_str), Some("user-42"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity(String);

impl Identity {
    /// An identity with the given value (a user ID, a tenant, an API client).
    pub fn new(value: impl Into<String>) -> Self {
        Identity(value.into())
    }

    /// The identity's value.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Identity {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Where the value of one descriptor key comes from.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// The client's address (see [`ClientIpResolver`]).
    RemoteAddress,
    /// The request method, e.g. `POST`.
    Method,
    /// The request path, without the query.
    Path,
    /// The route template that matched, e.g. `/users/{id}` (axum's `MatchedPath`). Requests
    /// that no route matched (the fallback) have none.
    Route,
    /// The `Host` header, or the URI's authority (HTTP/2).
    Host,
    /// A request header.
    Header(HeaderName),
    /// A query-string parameter (its first occurrence, percent-decoded).
    Query(String),
    /// A type in the request extensions, such as the [`Identity`].
    Extension(ExtensionSource),
    /// The value of the first matching classifier entry.
    Classifier(Classifier),
    /// A key whose values come with each call, never from an HTTP request: any key of rules
    /// compiled with [`KeySources::Given`](crate::rules::KeySources::Given).
    Given,
}

impl Source {
    /// The source behind a built-in key name, if `name` is one.
    pub(crate) fn builtin(name: &str) -> Option<Source> {
        Some(match name {
            "remote_address" => Source::RemoteAddress,
            "method" => Source::Method,
            "path" => Source::Path,
            "route" => Source::Route,
            "host" => Source::Host,
            _ => return None,
        })
    }

    /// The names of the built-in keys.
    pub(crate) const BUILTIN_NAMES: [&'static str; 5] =
        ["remote_address", "method", "path", "route", "host"];
}

/// The parts of a request that sources read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestView<'a> {
    pub(crate) method: &'a Method,
    pub(crate) uri: &'a Uri,
    pub(crate) headers: &'a HeaderMap,
    /// Connect info, axum's matched route, the types extension sources read.
    pub(crate) extensions: &'a Extensions,
}

impl<'a> RequestView<'a> {
    /// A view of `request`.
    pub(crate) fn of<B>(request: &'a http::Request<B>) -> Self {
        RequestView {
            method: request.method(),
            uri: request.uri(),
            headers: request.headers(),
            extensions: request.extensions(),
        }
    }

    /// The value `source` gives for this request; `None` when the request has none.
    ///
    /// # Errors
    ///
    /// [`MissingPeerAddr`] when `source` is the client address and the server did not record
    /// the socket peer: a deployment mistake that must not silently limit nobody.
    pub(crate) fn value<'s>(
        &self,
        source: &'s Source,
        client_ip: &ClientIpResolver,
    ) -> Result<Option<Value<'s>>, MissingPeerAddr>
    where
        'a: 's,
    {
        Ok(match source {
            Source::RemoteAddress => {
                let peer = PeerAddr::from_extensions(self.extensions).ok_or(MissingPeerAddr)?;
                Some(client_ip.resolve(peer.ip(), self.headers).to_value())
            }
            Source::Method => Some(Value::Borrowed(self.method.as_str())),
            Source::Path => Some(Value::Borrowed(self.uri.path())),
            Source::Route => matched_route(self.extensions).map(Value::Borrowed),
            Source::Host => self.host().map(Value::Borrowed),
            Source::Header(name) => self
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(Value::Borrowed),
            Source::Query(name) => self.uri.query().and_then(|query| {
                form_urlencoded::parse(query.as_bytes())
                    .find(|(key, _)| key == name)
                    .map(|(_, value)| Value::Owned(value.into_owned()))
            }),
            Source::Extension(extension) => extension.value(self.extensions).map(Value::Borrowed),
            Source::Classifier(classifier) => classifier.classify(self).map(Value::Borrowed),
            Source::Given => None,
        })
    }

    /// The host without its port, whether it came in `Host` (HTTP/1) or the URI (HTTP/2).
    fn host(&self) -> Option<&'a str> {
        self.headers
            .get(http::header::HOST)
            .and_then(|v| v.to_str().ok())
            .map(without_port)
            .or_else(|| self.uri.host())
    }
}

/// `example.com:8080` → `example.com`, `[::1]:443` → `[::1]`; anything else unchanged.
fn without_port(host: &str) -> &str {
    match host.rsplit_once(':') {
        Some((name, port))
            if port.bytes().all(|b| b.is_ascii_digit())
                && (!name.contains(':') || name.ends_with(']')) =>
        {
            name
        }
        _ => host,
    }
}

#[cfg(feature = "axum")]
fn matched_route(extensions: &Extensions) -> Option<&str> {
    extensions
        .get::<axum::extract::MatchedPath>()
        .map(|m| m.as_str())
}

#[cfg(not(feature = "axum"))]
fn matched_route(_extensions: &Extensions) -> Option<&str> {
    None
}

/// The request carried no socket peer address, so the client address is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissingPeerAddr;

impl MissingPeerAddr {
    /// How to fix the server so that the peer address is recorded.
    pub(crate) const FIX: &'static str = "tollgate: the rules limit by remote_address, but this request carries no \
        peer address. Serve axum with `axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>())`; \
        tonic's server records it by itself; with plain hyper, insert `tollgate::source::PeerAddr` into the request extensions.";
}

impl fmt::Display for MissingPeerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::FIX)
    }
}

impl std::error::Error for MissingPeerAddr {}

#[cfg(test)]
mod tests {
    use super::{without_port, MissingPeerAddr};

    #[test]
    fn a_missing_peer_address_is_an_error_that_says_how_to_fix_it() {
        let error: &dyn std::error::Error = &MissingPeerAddr;
        assert!(error
            .to_string()
            .contains("into_make_service_with_connect_info"));
    }

    #[test]
    fn host_ports_are_dropped() {
        assert_eq!(without_port("example.com:8080"), "example.com");
        assert_eq!(without_port("example.com"), "example.com");
        assert_eq!(without_port("[::1]:443"), "[::1]");
        assert_eq!(without_port("[::1]"), "[::1]");
        assert_eq!(without_port("::1"), "::1");
        assert_eq!(without_port("host:port"), "host:port");
    }
}
