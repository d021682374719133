//! Client address resolution.
//!
//! The client is the socket peer unless that peer is a configured trusted
//! proxy. Only then are forwarding headers consulted (`Forwarded`, else
//! `X-Forwarded-For`, else `X-Real-IP`), walking the hop list from the right
//! and stopping at the first hop that is not a trusted proxy. Anything that
//! cannot be parsed stops the walk at the nearest trusted address, so a client
//! can never choose its own key by sending junk. IPv6 clients are grouped by
//! a configurable prefix because a single host usually owns a whole /64.

use super::forwarded::{forwarded_for, hops, parse_node, real_ip, FORWARDED, X_FORWARDED_FOR};
use super::{ClientAddr, ForwardedHeader};
use http::HeaderMap;
use ipnet::{IpNet, Ipv4Net};
use std::net::IpAddr;

/// Upper bound on hops examined, so hostile headers cost constant work.
const MAX_HOPS: usize = 64;

/// Finds the client's address for a request: the socket peer, unless the peer
/// is a trusted proxy, in which case the forwarding headers are walked.
///
/// Configured by the rules' `client_ip` (or [`RulesBuilder::trusted_proxy`] and its
/// neighbours); [`Rules::client_ip`] gives it.
///
/// [`RulesBuilder::trusted_proxy`]: crate::rules::RulesBuilder::trusted_proxy
/// [`Rules::client_ip`]: crate::rules::Rules::client_ip
///
/// ```
/// use http::HeaderMap;
/// use tollgate::rules::Rules;
///
/// let rules = Rules::builder("api").trusted_proxy("10.0.0.0/8").build()?;
/// let resolver = rules.client_ip();
/// let mut headers = HeaderMap::new();
/// headers.insert("x-forwarded-for", "203.0.113.9, 10.0.0.2".parse()?);
///
/// let client = resolver.resolve("10.0.0.1".parse()?, &headers);
/// assert_eq!(client.to_string(), "203.0.113.9");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct ClientIpResolver {
    trusted_proxies: Vec<IpNet>,
    ipv6_prefix: u8,
    header: ForwardedHeader,
}

impl ClientIpResolver {
    /// Creates a resolver trusting `trusted_proxies` and grouping IPv6 clients
    /// by `ipv6_prefix` bits (0..=128; larger values are clamped to 128).
    ///
    /// Reads `X-Forwarded-For` from trusted proxies; see [`ClientIpResolver::with_header`].
    pub(crate) fn new(trusted_proxies: Vec<IpNet>, ipv6_prefix: u8) -> Self {
        Self {
            trusted_proxies: trusted_proxies.into_iter().map(canonical_net).collect(),
            ipv6_prefix: ipv6_prefix.min(128),
            header: ForwardedHeader::default(),
        }
    }

    /// The same resolver, reading `header` from trusted proxies.
    #[must_use]
    pub(crate) fn with_header(mut self, header: ForwardedHeader) -> Self {
        self.header = header;
        self
    }

    /// The client address for a request whose socket peer is `peer`.
    pub fn resolve(&self, peer: IpAddr, headers: &HeaderMap) -> ClientAddr {
        let peer = peer.to_canonical();
        let ip = if !self.is_trusted(peer) {
            peer
        } else {
            match self.header {
                ForwardedHeader::XForwardedFor => self.walk(peer, hops(headers, X_FORWARDED_FOR)),
                ForwardedHeader::Forwarded => self.walk(
                    peer,
                    hops(headers, FORWARDED).map(|h| h.and_then(forwarded_for)),
                ),
                ForwardedHeader::XRealIp => real_ip(headers).unwrap_or(peer),
            }
        };
        ClientAddr::grouped(ip, self.ipv6_prefix)
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted_proxies.iter().any(|net| net.contains(&ip))
    }

    /// Walks hops right to left; `None` marks a hop that failed to parse.
    fn walk<'a>(&self, peer: IpAddr, hops: impl Iterator<Item = Option<&'a str>>) -> IpAddr {
        let mut nearest_trusted = peer;
        for (seen, hop) in hops.enumerate() {
            let Some(ip) = hop.filter(|_| seen < MAX_HOPS).and_then(parse_node) else {
                return nearest_trusted;
            };
            let ip = ip.to_canonical();
            if !self.is_trusted(ip) {
                return ip;
            }
            nearest_trusted = ip;
        }
        // Every hop was a trusted proxy: the leftmost one originated the request.
        nearest_trusted
    }
}

/// Trusted nets written as IPv4-mapped IPv6 must match canonicalized peers.
fn canonical_net(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.addr().to_ipv4_mapped() {
            Some(v4) => Ipv4Net::new(v4, v6.prefix_len() - 96).map_or(net, IpNet::V4),
            None => net,
        },
        _ => net,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn resolver(header: ForwardedHeader) -> ClientIpResolver {
        let nets = ["10.0.0.0/8", "2001:db8:ffff::/48"];
        ClientIpResolver::new(nets.iter().map(|n| n.parse().unwrap()).collect(), 64)
            .with_header(header)
    }

    /// A resolver configured for the header the test sends (the first one named).
    fn configured_for(pairs: &[(&'static str, &str)]) -> ClientIpResolver {
        let header = match pairs.first().map(|(name, _)| *name) {
            Some("forwarded") => ForwardedHeader::Forwarded,
            Some("x-real-ip") => ForwardedHeader::XRealIp,
            _ => ForwardedHeader::XForwardedFor,
        };
        resolver(header)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn resolve(peer: &str, pairs: &[(&'static str, &str)]) -> IpAddr {
        configured_for(pairs)
            .resolve(ip(peer), &headers(pairs))
            .ip()
    }

    #[test]
    fn spoofed_forwarded_for_from_untrusted_peer_is_ignored() {
        let spoof = [
            ("x-forwarded-for", "1.1.1.1"),
            ("forwarded", "for=1.1.1.1"),
            ("x-real-ip", "1.1.1.1"),
        ];
        assert_eq!(resolve("198.51.100.7", &spoof), ip("198.51.100.7"));
    }

    #[test]
    fn trusted_peer_walks_forwarded_for_from_the_right() {
        let h = [(
            "x-forwarded-for",
            "6.6.6.6, 203.0.113.9, 10.0.0.3, 10.0.0.2",
        )];
        assert_eq!(resolve("10.0.0.1", &h), ip("203.0.113.9"));
    }

    #[test]
    fn multiple_header_instances_form_one_list() {
        let h = [
            ("x-forwarded-for", "6.6.6.6, 203.0.113.9"),
            ("x-forwarded-for", "10.0.0.2"),
        ];
        assert_eq!(resolve("10.0.0.1", &h), ip("203.0.113.9"));
    }

    #[test]
    fn only_the_configured_header_is_read() {
        // A proxy that appends to X-Forwarded-For passes the client's own Forwarded through.
        let h = headers(&[
            ("x-forwarded-for", "203.0.113.9"),
            ("forwarded", "for=6.6.6.6"),
            ("x-real-ip", "7.7.7.7"),
        ]);
        let peer = ip("10.0.0.1");
        let client = |header| resolver(header).resolve(peer, &h).ip();
        assert_eq!(client(ForwardedHeader::XForwardedFor), ip("203.0.113.9"));
        assert_eq!(client(ForwardedHeader::Forwarded), ip("6.6.6.6"));
        assert_eq!(client(ForwardedHeader::XRealIp), ip("7.7.7.7"));
        let only_forwarded = headers(&[("forwarded", "for=6.6.6.6")]);
        assert_eq!(
            resolver(ForwardedHeader::XForwardedFor)
                .resolve(peer, &only_forwarded)
                .ip(),
            peer
        );
    }

    #[test]
    fn all_trusted_hops_yield_leftmost() {
        assert_eq!(
            resolve("10.0.0.1", &[("x-forwarded-for", "10.0.0.9, 10.0.0.8")]),
            ip("10.0.0.9")
        );
    }

    #[test]
    fn garbage_hop_stops_at_nearest_trusted() {
        for junk in [
            "unknown",
            "_hidden",
            "",
            "not-an-ip",
            "[::1",
            "1.2.3.4:99999",
        ] {
            let xff = format!("203.0.113.9, {junk}, 10.0.0.2");
            assert_eq!(
                resolve("10.0.0.1", &[("x-forwarded-for", &xff)]),
                ip("10.0.0.2"),
                "{junk:?}"
            );
            let fwd = format!("for=203.0.113.9, for=\"{junk}\"");
            assert_eq!(
                resolve("10.0.0.1", &[("forwarded", &fwd)]),
                ip("10.0.0.1"),
                "{junk:?}"
            );
        }
        // An element without `for` is unparseable too.
        assert_eq!(
            resolve("10.0.0.1", &[("forwarded", "for=1.1.1.1, proto=http")]),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn forwarded_header_quoted_ipv6_with_port() {
        let h = [(
            "forwarded",
            "FOR=\"[2001:db8:cafe::17]:4711\";proto=https, for=10.0.0.2",
        )];
        assert_eq!(resolve("10.0.0.1", &h), ip("2001:db8:cafe::"));
        assert_eq!(
            resolve(
                "10.0.0.1",
                &[("forwarded", "by=x; For = \"[2001:db8::1]:_p\"")]
            ),
            ip("2001:db8::")
        );
    }

    #[test]
    fn hop_formats_are_accepted() {
        for (hop, want) in [
            ("203.0.113.9", "203.0.113.9"),
            (" 203.0.113.9:8080 ", "203.0.113.9"),
            ("2001:db8::1", "2001:db8::"),
            ("[2001:db8::1]", "2001:db8::"),
            ("[2001:db8::1]:443", "2001:db8::"),
            ("::ffff:203.0.113.9", "203.0.113.9"),
        ] {
            assert_eq!(
                resolve("10.0.0.1", &[("x-forwarded-for", hop)]),
                ip(want),
                "{hop:?}"
            );
        }
    }

    #[test]
    fn ipv4_mapped_peer_is_normalized() {
        let addr = resolver(ForwardedHeader::XForwardedFor)
            .resolve(ip("::ffff:198.51.100.7"), &HeaderMap::new());
        assert_eq!((addr.ip(), addr.prefix_len()), (ip("198.51.100.7"), 32));
        // A mapped trusted peer is recognised as the IPv4 proxy it is.
        assert_eq!(
            resolve("::ffff:10.0.0.1", &[("x-forwarded-for", "203.0.113.9")]),
            ip("203.0.113.9")
        );
        let mapped = ClientIpResolver::new(vec!["::ffff:10.0.0.0/104".parse().unwrap()], 64)
            .with_header(ForwardedHeader::XRealIp);
        let addr = mapped.resolve(ip("10.0.0.1"), &headers(&[("x-real-ip", "203.0.113.9")]));
        assert_eq!(addr.ip(), ip("203.0.113.9"));
    }

    #[test]
    fn ipv6_clients_in_one_slash_64_share_an_address() {
        let a = resolver(ForwardedHeader::XForwardedFor)
            .resolve(ip("2001:db8:1:2::1"), &HeaderMap::new());
        let b = resolver(ForwardedHeader::XForwardedFor)
            .resolve(ip("2001:db8:1:2:ffff::9"), &HeaderMap::new());
        let c = resolver(ForwardedHeader::XForwardedFor)
            .resolve(ip("2001:db8:1:3::1"), &HeaderMap::new());
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.prefix_len(), 64);
    }

    #[test]
    fn out_of_range_prefix_is_clamped() {
        let r = ClientIpResolver::new(Vec::new(), 200);
        assert_eq!(
            r.resolve(ip("2001:db8::1"), &HeaderMap::new()).to_string(),
            "2001:db8::1"
        );
    }

    #[test]
    fn absurdly_long_header_does_not_panic() {
        let long = "1,".repeat(512 * 1024);
        assert_eq!(
            resolve("10.0.0.1", &[("x-forwarded-for", &long)]),
            ip("10.0.0.1")
        );
        let trusted = "10.0.0.5,".repeat(100_000) + "10.0.0.4";
        assert_eq!(
            resolve("10.0.0.1", &[("x-forwarded-for", &trusted)]),
            ip("10.0.0.5")
        );
        let one_element = ";for".repeat(300_000);
        assert_eq!(
            resolve("10.0.0.1", &[("forwarded", &one_element)]),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn hop_limit_stops_at_nearest_trusted() {
        let trusted = "10.0.0.5,".repeat(MAX_HOPS - 1) + "10.0.0.4";
        assert_eq!(
            resolve(
                "10.0.0.1",
                &[("x-forwarded-for", &format!("203.0.113.9,{trusted}"))]
            ),
            ip("10.0.0.5")
        );
        assert_eq!(
            resolve(
                "10.0.0.1",
                &[("x-forwarded-for", &format!("10.0.0.6,{trusted}"))]
            ),
            ip("10.0.0.5")
        );
    }

    #[test]
    fn non_utf8_header_falls_back_to_trusted_hop() {
        let mut h = HeaderMap::new();
        let value = HeaderValue::from_bytes(b"\xff\xfe, 10.0.0.2").unwrap();
        h.insert("x-forwarded-for", value);
        assert_eq!(
            resolver(ForwardedHeader::XForwardedFor)
                .resolve(ip("10.0.0.1"), &h)
                .ip(),
            ip("10.0.0.2")
        );
    }

    #[test]
    fn x_real_ip_used_only_from_trusted_peer() {
        assert_eq!(
            resolve("10.0.0.1", &[("x-real-ip", "203.0.113.9")]),
            ip("203.0.113.9")
        );
        assert_eq!(
            resolve("10.0.0.1", &[("x-real-ip", "10.0.0.7")]),
            ip("10.0.0.7")
        );
        assert_eq!(
            resolve("198.51.100.7", &[("x-real-ip", "203.0.113.9")]),
            ip("198.51.100.7")
        );
        assert_eq!(
            resolve("10.0.0.1", &[("x-real-ip", "1.1.1.1, 2.2.2.2")]),
            ip("10.0.0.1")
        );
        assert_eq!(
            resolve(
                "10.0.0.1",
                &[("x-real-ip", "1.1.1.1"), ("x-real-ip", "2.2.2.2")]
            ),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn display_formats() {
        let r = resolver(ForwardedHeader::XForwardedFor);
        let none = HeaderMap::new();
        assert_eq!(
            r.resolve(ip("203.0.113.9"), &none).to_string(),
            "203.0.113.9"
        );
        assert_eq!(
            r.resolve(ip("2001:db8:1:2::7"), &none).to_string(),
            "2001:db8:1:2::/64"
        );
        let exact = ClientIpResolver::new(Vec::new(), 128);
        assert_eq!(
            exact.resolve(ip("2001:db8:1:2::7"), &none).to_string(),
            "2001:db8:1:2::7"
        );
    }
}
