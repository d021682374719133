//! The names of limit state in Redis, and the Redis Cluster slot each lands in.
//!
//! A key is `{prefix}{<tag>}:<domain>:<state>:<unit>`:
//! - `<tag>`, the key's Redis Cluster hash tag, is 16 hex digits of the SHA-256 of the
//!   check's tag (who is limited): the keys of one client share a slot, and clients spread
//!   evenly over the slots;
//! - `<domain>` is the rules' domain, as written (after the tag, its braces mean nothing);
//! - `<state>` is 32 hex digits of the SHA-256 of the state key (limit identity and client
//!   values), so a key is about 60 bytes plus prefix and domain, whatever a client sends;
//! - `<unit>` is the tick the state is kept in (another tick is another state), followed by
//!   `:n` for a fixed window kept as one integer (see `layout.rs`), or, for the fleet's
//!   totals of a local-first limit, `sync` and the period in nanoseconds; or `c` for the
//!   leases of a concurrency limit's slots.
//!
//! SHA-256 rather than a faster hash: clients choose the values hashed, and must not be able
//! to find two that share a state.

use super::layout::Layout;
use crate::store::sync::Limit;
use crate::store::{CarriedFrom, LimitCheck, SlotCheck};
use arrayvec::ArrayVec;
use sha2::{Digest, Sha256};

/// The slots of a Redis Cluster.
const SLOTS: u16 = 16_384;

/// The Redis key of a check, and its slot.
pub(super) struct RedisKey {
    pub(super) name: Vec<u8>,
    pub(super) slot: u16,
}

/// The part of a key's name that is the key's own: the first bytes of the SHA-256 of its tag
/// and of its state key, from which the name is made. Kept by each key of a local-first
/// limit (24 bytes), whose name is made again when it is sent.
#[derive(Debug, Clone, Copy)]
pub(super) struct Digests {
    tag: [u8; 8],
    state: [u8; 16],
}

impl Digests {
    pub(super) fn of(check: &LimitCheck<'_>) -> Digests {
        Digests::of_parts(check.tag, check.key)
    }

    /// The digests of a key `key` tagged `tag`.
    fn of_parts(tag: &[u8], key: &[u8]) -> Digests {
        let mut digests = Digests {
            tag: [0; 8],
            state: [0; 16],
        };
        digests.tag.copy_from_slice(&Sha256::digest(tag)[..8]);
        digests.state.copy_from_slice(&Sha256::digest(key)[..16]);
        digests
    }

    /// The Redis Cluster slot of the key's names.
    pub(super) fn slot(&self) -> u16 {
        slot_of_tag(&hex(&self.tag))
    }
}

impl RedisKey {
    /// The key of `check`'s state, kept as `layout` says, under `prefix` (which has no
    /// braces).
    pub(super) fn of(prefix: &str, check: &LimitCheck<'_>, layout: Layout) -> RedisKey {
        RedisKey::named(prefix, &Digests::of(check), check.domain, &layout.suffix())
    }

    /// The key of the state `check`'s key is carried from, under a limit a reload
    /// replaced, kept as `layout` says.
    pub(super) fn carried(
        prefix: &str,
        check: &LimitCheck<'_>,
        from: &CarriedFrom,
        layout: Layout,
    ) -> RedisKey {
        let key = from.key_of(check.key);
        RedisKey::of(prefix, &carried_check(check, from, &key), layout)
    }

    /// The key of the fleet's totals of a key of `limit`, a local-first limit, under `prefix`.
    pub(super) fn synced(prefix: &str, limit: &Limit, key: &Digests) -> RedisKey {
        RedisKey::synced_in(prefix, &limit.domain, limit.quota.period_nanos(), key)
    }

    /// The key of the fleet's totals of `check`, a local-first limit, under `prefix`.
    pub(super) fn synced_of(prefix: &str, check: &LimitCheck<'_>) -> RedisKey {
        let period = check.quota.period_nanos();
        RedisKey::synced_in(prefix, check.domain, period, &Digests::of(check))
    }

    fn synced_in(prefix: &str, domain: &str, period: u64, key: &Digests) -> RedisKey {
        let suffix = format!("sync{period}");
        RedisKey::named(prefix, key, domain, &[&suffix])
    }

    /// The key of the leases of `slot`'s key, the slots of a concurrency limit, under
    /// `prefix`: suffixed `c`, where a rate limit's state is suffixed by its unit.
    pub(super) fn lease(prefix: &str, slot: &SlotCheck<'_>) -> RedisKey {
        let digests = Digests::of_parts(slot.tag, slot.key);
        RedisKey::named(prefix, &digests, slot.domain, &["c"])
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

    /// The key `prefix{tag}:domain:state:suffix`, the suffix given in parts.
    fn named(prefix: &str, digests: &Digests, domain: &str, suffix: &[&str]) -> RedisKey {
        let tag = hex(&digests.tag);
        let state = hex(&digests.state);
        let suffix_len: usize = suffix.iter().map(|part| part.len()).sum();
        let mut name = Vec::with_capacity(
            prefix.len() + domain.len() + tag.len() + state.len() + suffix_len + 5,
        );
        name.extend_from_slice(prefix.as_bytes());
        name.push(b'{');
        name.extend_from_slice(&tag);
        name.extend_from_slice(b"}:");
        name.extend_from_slice(domain.as_bytes());
        name.push(b':');
        name.extend_from_slice(&state);
        name.push(b':');
        for part in suffix {
            name.extend_from_slice(part.as_bytes());
        }
        RedisKey {
            name,
            slot: slot_of_tag(&tag),
        }
    }
}

/// `check` as it was under the limit it is carried `from`, its key there `key`
/// ([`CarriedFrom::key_of`]): its hash tag is the check's, unless that is its whole key,
/// which changed with the limit (see [`CarriedFrom`]).
pub(super) fn carried_check<'a>(
    check: &LimitCheck<'a>,
    from: &'a CarriedFrom,
    key: &'a [u8],
) -> LimitCheck<'a> {
    LimitCheck {
        key,
        tag: if check.tag == check.key {
            key
        } else {
            check.tag
        },
        algorithm: from.algorithm(),
        quota: from.quota(),
        ..*check
    }
}

/// `bytes` (at most 16) in lowercase hex.
fn hex<const N: usize>(bytes: &[u8; N]) -> ArrayVec<u8, 32> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    bytes
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
    use super::super::ticks::Tick;
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
        let layout = Layout::of(Algorithm::FixedWindow, &quota, tick, true);
        RedisKey::of("tollgate:", &check, layout)
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

    #[test]
    fn a_synced_keys_name_is_made_again_from_its_digests() {
        let quota = Quota::new(1, Duration::from_secs(1)).unwrap();
        let limit = Limit {
            domain: "demo".into(),
            label: "test".into(),
            algorithm: Algorithm::FixedWindow,
            quota,
            every: 100_000_000,
        };
        let per_user = key(b"42", b"\x01user 42");
        let check = LimitCheck {
            domain: "demo",
            key: b"\x01user 42",
            tag: b"42",
            algorithm: Algorithm::FixedWindow,
            quota: &quota,
            cost: 1,
            shadow: false,
            check_only: false,
            sync_every: Some(Duration::from_millis(100)),
            limit: "test",
            approximate: None,
            carried_from: &[],
        };
        let synced = RedisKey::synced("tollgate:", &limit, &Digests::of(&check));
        assert_eq!(synced.slot, per_user.slot);
        assert_eq!(synced.slot, Digests::of(&check).slot());
        let name = String::from_utf8(synced.name).unwrap();
        let unit = String::from_utf8(per_user.name).unwrap();
        // The same tag and state as the key of the exact limit; another suffix.
        let stem = unit.rsplit_once(':').unwrap().0;
        assert_eq!(name, format!("{stem}:sync1000000000"));
    }
}
