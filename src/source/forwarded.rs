//! The forwarding headers that proxies write, read hop by hop.

use http::HeaderMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub(super) const FORWARDED: &str = "forwarded";
pub(super) const X_FORWARDED_FOR: &str = "x-forwarded-for";
const X_REAL_IP: &str = "x-real-ip";

/// The one forwarding header that the trusted proxies write.
///
/// Only that header is read: a proxy passes other headers through from the client
/// unchanged, so reading them would let a client choose its own address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ForwardedHeader {
    /// `X-Forwarded-For` (nginx, HAProxy, most load balancers): the default.
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded`, its `for=` parameters.
    Forwarded,
    /// `X-Real-IP`: a single address set by the proxy.
    XRealIp,
}

/// Comma-separated entries of every instance of `name`, rightmost first.
/// Lazy, so a huge header costs only the hops actually examined; splitting
/// bytes (not strings) lets a non-UTF-8 hop fail alone.
pub(super) fn hops<'a>(
    headers: &'a HeaderMap,
    name: &str,
) -> impl Iterator<Item = Option<&'a str>> {
    headers
        .get_all(name)
        .iter()
        .rev()
        .flat_map(|value| value.as_bytes().rsplit(|&b| b == b','))
        .map(|raw| std::str::from_utf8(raw).ok())
}

/// The `for` value of a `Forwarded` element. Commas inside quoted strings are
/// not honoured: trusted proxies never write them, and anything to their left
/// is untrusted anyway.
pub(super) fn forwarded_for(element: &str) -> Option<&str> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        name.trim().eq_ignore_ascii_case("for").then(|| {
            let value = value.trim();
            value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(value)
        })
    })
}

/// `X-Real-IP` carries exactly one address; anything else is ignored.
pub(super) fn real_ip(headers: &HeaderMap) -> Option<IpAddr> {
    let mut values = headers.get_all(X_REAL_IP).iter();
    match (values.next(), values.next()) {
        (Some(value), None) => {
            let ip = value.to_str().ok().and_then(parse_node)?;
            Some(ip.to_canonical())
        }
        _ => None,
    }
}

/// Parses `ip`, `ipv4:port`, `[ipv6]` or `[ipv6]:port`, ignoring surrounding whitespace.
pub(super) fn parse_node(node: &str) -> Option<IpAddr> {
    let node = node.trim();
    if let Some(rest) = node.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port_ok = after.is_empty() || after.strip_prefix(':').is_some_and(valid_port);
        return port_ok
            .then(|| host.parse::<Ipv6Addr>().ok().map(IpAddr::V6))
            .flatten();
    }
    if let Ok(ip) = node.parse() {
        return Some(ip);
    }
    let (host, port) = node.split_once(':')?;
    valid_port(port)
        .then(|| host.parse::<Ipv4Addr>().ok().map(IpAddr::V4))
        .flatten()
}

/// A numeric port, or an RFC 7239 obfuscated port (`_abc`), which is harmless to drop.
fn valid_port(port: &str) -> bool {
    let obfuscated = port.strip_prefix('_').is_some_and(|p| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    });
    obfuscated || (port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok())
}
