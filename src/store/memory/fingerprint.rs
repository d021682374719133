//! A key's fingerprint: SipHash-1-3 of the key and a tag under a secret random seed.
//!
//! The store keeps the fingerprint instead of the key, so two keys with one fingerprint share
//! one state. SipHash is a pseudo-random function: without the seed, which never leaves the
//! store (fingerprints are not shown to clients), nobody can choose keys that collide, and any
//! two keys collide with probability about 2⁻⁶⁴.

use siphasher::sip::SipHasher13;
use std::hash::{BuildHasher, Hasher, RandomState};

/// Fingerprints keys under a secret seed drawn at random.
pub(super) struct Fingerprinter {
    /// SipHash keyed with the seed, before any byte is written.
    seeded: SipHasher13,
}

impl Fingerprinter {
    /// A fingerprinter with a fresh random seed.
    pub(super) fn new() -> Self {
        // `RandomState`'s keys are drawn at random once per thread and changed for each new
        // one; counters hashed under them are pseudo-random words from that secret.
        let random = RandomState::new();
        Fingerprinter {
            seeded: SipHasher13::new_with_keys(random.hash_one(0u64), random.hash_one(1u64)),
        }
    }

    /// The fingerprint of `key` under `tag`.
    pub(super) fn fingerprint(&self, key: &[u8], tag: u8) -> u64 {
        let mut hasher = self.seeded;
        hasher.write(key);
        hasher.write_u8(tag);
        hasher.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tag_and_the_seed_change_the_fingerprint() {
        let fingerprinter = Fingerprinter::new();
        let key = b"10.1.2.3";
        assert_ne!(
            fingerprinter.fingerprint(key, 0),
            fingerprinter.fingerprint(key, 1)
        );
        assert_ne!(
            fingerprinter.fingerprint(key, 0),
            Fingerprinter::new().fingerprint(key, 0)
        );
    }

    #[test]
    fn every_byte_and_the_length_change_the_fingerprint() {
        let fingerprinter = Fingerprinter::new();
        let key = [0x5au8; 127];
        let whole = fingerprinter.fingerprint(&key, 0);
        for at in 0..key.len() {
            let mut changed = key;
            changed[at] ^= 0x80;
            assert_ne!(fingerprinter.fingerprint(&changed, 0), whole, "byte {at}");
        }
        // Zero bytes at the end are part of the key, not padding.
        assert_ne!(
            fingerprinter.fingerprint(b"a", 0),
            fingerprinter.fingerprint(b"a\0", 0)
        );
        assert_ne!(
            fingerprinter.fingerprint(b"", 0),
            fingerprinter.fingerprint(b"\0", 0)
        );
    }
    #[test]
    fn fingerprints_of_similar_keys_spread_evenly_and_do_not_collide() {
        // The store's tables take a key's place from the low bits, and its shard from bits 32
        // and up: both must be even over keys that differ little, as addresses and user IDs
        // counted up do.
        const KEYS: usize = 80_000;
        let fingerprinter = Fingerprinter::new();
        let addresses =
            (0..KEYS).map(|i| format!("10.{}.{}.{}", i >> 16, (i >> 8) & 0xff, i & 0xff));
        let user_ids = (0..KEYS).map(|i| format!("user-{i:06}"));
        for (kind, keys) in [
            ("addresses", addresses.collect::<Vec<_>>()),
            ("user IDs", user_ids.collect()),
        ] {
            let fingerprints: Vec<u64> = keys
                .iter()
                .map(|key| fingerprinter.fingerprint(key.as_bytes(), 0))
                .collect();
            let distinct: std::collections::HashSet<u64> = fingerprints.iter().copied().collect();
            assert_eq!(distinct.len(), KEYS, "{kind}: no two share a fingerprint");
            for (bits, shift) in [("low bits", 0), ("shard bits", 32)] {
                // Pearson's χ² over 4,096 bins of about 19.5 keys each: 4,095 expected, with a
                // standard deviation of about 90.5; a run of keys in arithmetic progression
                // would be far off either way.
                let mut counts = vec![0f64; 4096];
                for f in &fingerprints {
                    counts[(f >> shift) as usize & 4095] += 1.0;
                }
                let expected = KEYS as f64 / 4096.0;
                let chi_squared: f64 = counts
                    .iter()
                    .map(|c| (c - expected).powi(2) / expected)
                    .sum();
                assert!(
                    (3_550.0..4_650.0).contains(&chi_squared),
                    "{kind}, {bits}: χ² {chi_squared:.0}"
                );
            }
        }
    }
}
