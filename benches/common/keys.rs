//! The keys the benches decide on (shared by them): client addresses and user IDs, shaped
//! as the limiter shapes the state key of one descriptor value.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};

/// A state id, as the rules compiler would make one (any 8 bytes do).
const STATE_ID: u64 = 0x9e37_79b9_7f4a_7c15;

/// What the values are.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// `10.x.y.z`, the client address for a `remote_address` descriptor.
    Ipv4,
    /// `user-000000` to `user-999999`.
    UserId,
}

impl KeyKind {
    /// Writes the state key of the `i`th distinct value into `buf`, as the descriptor walk
    /// builds it: state id, value length (u32 little-endian), value.
    pub fn write_key(self, buf: &mut Vec<u8>, i: usize) {
        let mut value = String::new();
        match self {
            KeyKind::Ipv4 => write!(value, "{}", ip(i)),
            KeyKind::UserId => write!(value, "user-{i:06}"),
        }
        .expect("writing to a String does not fail");
        let len = u32::try_from(value.len()).expect("short value");
        buf.clear();
        buf.extend_from_slice(&STATE_ID.to_le_bytes());
        buf.extend_from_slice(&len.to_le_bytes());
        buf.extend_from_slice(value.as_bytes());
    }
}

/// The `i`th distinct IPv4 address, `10.x.y.z` from the low 24 bits of `i`: governor's
/// natural key for a client address.
pub fn ip(i: usize) -> IpAddr {
    let low = u32::try_from(i & 0xff_ffff).expect("24 bits fit a u32");
    IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | low))
}

/// Writes the `i`th distinct user ID (`user-000000`) into `buf`: governor's natural key for
/// a user.
pub fn write_user_id(buf: &mut String, i: usize) {
    buf.clear();
    write!(buf, "user-{i:06}").expect("writing to a String does not fail");
}
