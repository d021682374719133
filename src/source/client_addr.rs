//! A client address as tollgate limits it, and how it is written as a descriptor value.

use super::Value;
use arrayvec::ArrayString;
use ipnet::Ipv6Net;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

/// A client address as used for limiting: IPv4 as is, IPv6 masked to the
/// configured prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientAddr {
    ip: IpAddr,
    prefix: u8,
}

impl ClientAddr {
    /// `ip` as limited: IPv4 as is, IPv6 masked to its first `ipv6_prefix` bits.
    pub(super) fn grouped(ip: IpAddr, ipv6_prefix: u8) -> Self {
        match ip {
            IpAddr::V4(_) => ClientAddr { ip, prefix: 32 },
            IpAddr::V6(v6) => {
                let masked = Ipv6Net::new(v6, ipv6_prefix).map_or(v6, |n| n.network());
                ClientAddr {
                    ip: IpAddr::V6(masked),
                    prefix: ipv6_prefix,
                }
            }
        }
    }

    /// The (masked) address.
    pub fn ip(&self) -> IpAddr {
        self.ip
    }

    /// Significant bits of [`ip`](Self::ip): 32 for IPv4, the configured prefix for IPv6.
    pub fn prefix_len(&self) -> u8 {
        self.prefix
    }
}

impl ClientAddr {
    /// The address as a descriptor value, as [`Display`](fmt::Display) writes it. An IPv4
    /// address (the common case, on every request limited by client address) is copied in
    /// directly: the formatting machinery costs several times as much for four numbers.
    pub(crate) fn to_value(self) -> Value<'static> {
        match self.ip {
            IpAddr::V4(ip) => Value::text(&ipv4_text(ip)),
            IpAddr::V6(_) => Value::display(self),
        }
    }
}

impl fmt::Display for ClientAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ip {
            // The same text `to_value` gives the descriptor walk.
            IpAddr::V4(ip) => f.write_str(&ipv4_text(ip)),
            IpAddr::V6(ip) if self.prefix < 128 => write!(f, "{ip}/{}", self.prefix),
            ip => write!(f, "{ip}"),
        }
    }
}

/// An IPv4 address in dotted decimal, written without the formatting machinery.
fn ipv4_text(ip: Ipv4Addr) -> ArrayString<15> {
    let mut text = ArrayString::new();
    for (i, octet) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            text.push('.');
        }
        if octet >= 100 {
            text.push(char::from(b'0' + octet / 100));
        }
        if octet >= 10 {
            text.push(char::from(b'0' + octet / 10 % 10));
        }
        text.push(char::from(b'0' + octet % 10));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_text_matches_the_standard_formatting_for_every_octet_in_every_place() {
        for place in 0..4 {
            for octet in 0..=255u8 {
                let mut octets = [10, 0, 0, 1];
                octets[place] = octet;
                let ip = Ipv4Addr::from(octets);
                assert_eq!(ipv4_text(ip).as_str(), ip.to_string());
            }
        }
    }
}
