//! The names of limit state in Redis, and the Redis Cluster slot each lands in.
//!
//! A key is `{prefix}{<tag>}:<domain>:<state>:<unit>`:
//! - `<tag>`, the key's Redis Cluster hash tag, is 16 hex digits of the SHA-256 of the
//!   check's tag (who is limited): the keys of one client share a slot, and clients spread
//!   evenly over the slots;
//! - `<domain>` is the rules' domain, as written (after the tag, its braces mean nothing);
//! - `<state>` is 32 hex digits of the SHA-256 of the state key (limit identity and client
//!   values), so a key is about 60 bytes plus prefix and domain, whatever a client sends;
//! - `<unit>` is the tick the state is kept in (another tick is another state), or, for the
//!   fleet's totals of a local-first limit, `sync` and the period in nanoseconds.
//!
//! SHA-256 rather than a faster hash: clients choose the values hashed, and must not be able
//! to find two that share a state.

use super::ticks::Tick;
use crate::store::{CarriedFrom, LimitCheck};
use sha2::{Digest, Sha256};

/// The slots of a Redis Cluster.
const SLOTS: u16 = 16_384;

/// The Redis key of a check, and its slot.
pub(super) struct RedisKey {
    pub(super) name: Vec<u8>,
    pub(super) slot: u16,
}

impl RedisKey {
    /// The key of `check`'s state, kept in `tick`, under `prefix` (which has no braces).
    pub(super) fn of(prefix: &str, check: &LimitCheck<'_>, tick: Tick) -> RedisKey {
        RedisKey::named(prefix, check, tick.unit().as_bytes())
    }

    /// The key of the state `check`'s key is carried from, under a limit a reload
    /// replaced, kept in `tick`.
    pub(super) fn carried(
        prefix: &str,
        check: &LimitCheck<'_>,
        from: &CarriedFrom,
        tick: Tick,
    ) -> RedisKey {
        let key = from.key_of(check.key);
        // A tag that is the whole key changed with it (see `CarriedFrom`).
        let tag = if check.tag == check.key {
            &key[..]
        } else {
            check.tag
        };
        let old = LimitCheck {
            key: &key,
            tag,
            ..*check
        };
        RedisKey::of(prefix, &old, tick)
    }

    /// The key of the fleet's totals of `check`, a local-first limit, under `prefix`.
    pub(super) fn synced(prefix: &str, check: &LimitCheck<'_>) -> RedisKey {
        let suffix = format!("sync{}", check.quota.period_nanos());
        RedisKey::named(prefix, check, suffix.as_bytes())
    }

    /// The registry of the servers that sync local-first limits under `prefix`.
    pub(super) fn servers(prefix: &str) -> RedisKey {
        const TAG: &[u8] = b"servers";
        let mut name = prefix.as_bytes().to_vec();
        name.extend_from_slice(b"{servers}:servers");
        RedisKey {
            name,
            slot: slot_of_tag(TAG),
        }
    }

    fn named(prefix: &str, check: &LimitCheck<'_>, suffix: &[u8]) -> RedisKey {
        let tag = hex_digest(check.tag, 8);
        let state = hex_digest(check.key, 16);
        let mut name = Vec::with_capacity(
            prefix.len() + check.domain.len() + tag.len() + state.len() + suffix.len() + 5,
        );
        name.extend_from_slice(prefix.as_bytes());
        name.push(b'{');
        name.extend_from_slice(&tag);
        name.extend_from_slice(b"}:");
        name.extend_from_slice(check.domain.as_bytes());
        name.push(b':');
        name.extend_from_slice(&state);
        name.push(b':');
        name.extend_from_slice(suffix);
        RedisKey {
            name,
            slot: slot_of_tag(&tag),
        }
    }
}

/// The first `bytes` bytes of the SHA-256 of `data`, in lowercase hex.
fn hex_digest(data: &[u8], bytes: usize) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    Sha256::digest(data)[..bytes]
        .iter()
        .flat_map(|byte| [HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0x0f)]])
        .collect()
}

/// The Redis Cluster slot of keys whose hash tag is `tag`: CRC16 (XMODEM) modulo 16384.
fn slot_of_tag(tag: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(tag) % SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{Algorithm, Quota};
    use std::time::Duration;

    fn key(tag: &[u8], key: &[u8]) -> RedisKey {
        let quota = Quota::new(1, Duration::from_secs(1)).unwrap();
        let check = LimitCheck {
            domain: "demo",
            key,
            tag,
            algorithm: Algorithm::FixedWindow,
            quota: &quota,
            cost: 1,
            shadow: false,
            check_only: false,
            sync_every: None,
            limit: "test",
            approximate: None,
            carried_from: &[],
        };
        let tick = Tick::choose(Algorithm::FixedWindow, &quota, 1_000).unwrap();
        RedisKey::of("tollgate:", &check, tick)
    }

    #[test]
    fn slots_are_redis_clusters() {
        // From the Redis Cluster specification: CRC16 of "123456789" is 0x31C3.
        assert_eq!(slot_of_tag(b"123456789"), 0x31C3 % SLOTS);
        // `CLUSTER KEYSLOT foo` answers 12182.
        assert_eq!(slot_of_tag(b"foo"), 12_182);
    }

    #[test]
    fn keys_of_one_tag_share_a_slot_and_long_values_make_short_keys() {
        let long = vec![b'x'; 30_000];
        let per_user = key(b"42", b"\x01user 42");
        let per_user_login = key(b"42", b"\x02user 42 login");
        assert_eq!(per_user.slot, per_user_login.slot);
        assert_ne!(per_user.name, per_user_login.name);
        let huge = key(&long, &long);
        assert_eq!(huge.name.len(), per_user.name.len());
        assert!(huge.name.len() < 100, "{}", huge.name.len());
        let name = String::from_utf8(per_user.name).unwrap();
        assert!(name.starts_with("tollgate:{"), "{name}");
        assert!(name.contains("}:demo:"), "{name}");
    }
}
