//! Multiply-shift kept by hand: SipHash for every key made decisions at 1M keys 1.15 × as long.
//!
//! A key's fingerprint: a 64-bit hash of the key and a tag under a secret random seed, from
//! a family in which two different keys collide with probability 2⁻⁶⁴.
//!
//! Keys of up to [`SHORT_KEY_BYTES`] (client addresses, user IDs: nearly every key) are
//! hashed by vector multiply-shift (Dietzfelbinger, 1996; Thorup, "High Speed Hashing for
//! Integers and Strings", 2015): the key is read as 64-bit words `x₁, x₂, …` after a word
//! `x₀` holding its length and tag, and its fingerprint is the high 64 bits of
//! `a + Σ aᵢ·xᵢ mod 2¹²⁸` for 128-bit multipliers `a, aᵢ`. That family is strongly universal:
//! for any two different keys and uniformly random multipliers, the pair of fingerprints is
//! uniform, so they collide with probability 2⁻⁶⁴, however the keys were chosen. Ours are
//! pseudo-random words drawn from a 128-bit secret, which no client can tell from uniform. It
//! costs two multiplications per 8 bytes of key, and a final mix (below).
//!
//! The guarantee holds for keys chosen without knowledge of the seed, which never leaves the
//! store (fingerprints are not shown to clients). Longer keys go through SipHash-1-3 (the
//! `siphasher` crate) under its own secret seed, a pseudo-random function that keeps its
//! strength even against a client that learns some fingerprints.

use siphasher::sip::SipHasher13;
use std::hash::{BuildHasher, Hasher, RandomState};

/// The longest key fingerprinted by multiply-shift; longer keys take SipHash. Its length
/// fits the low byte of the length-and-tag word.
const SHORT_KEY_BYTES: usize = 127;

/// The words of a short key: its full 8-byte words, then a last, partial one (zero-padded;
/// empty when the length is a multiple of 8, and then multiplied by a multiplier all the
/// same, so that taking it needs no branch).
const SHORT_KEY_WORDS: usize = SHORT_KEY_BYTES / 8 + 1;

/// Fingerprints keys under a secret seed drawn at random.
pub(super) struct Fingerprinter {
    /// The multiply-shift seed: the constant term.
    offset: u128,
    /// The multiplier of the word holding a key's length and tag.
    length_multiplier: u128,
    /// The multipliers of a short key's words, in order.
    word_multipliers: [u128; SHORT_KEY_WORDS],
    /// SipHash keyed with its seed, for longer keys.
    sip: SipHasher13,
}

impl Fingerprinter {
    /// A fingerprinter with a fresh random seed.
    pub(super) fn new() -> Self {
        // `RandomState`'s 128-bit keys are drawn at random once per thread and changed for
        // each new one; counters hashed under them are pseudo-random words from that secret.
        let random = RandomState::new();
        Self::from_words(|i| random.hash_one(i))
    }

    /// A fingerprinter whose seed is drawn from `seed`: the same in every run and process.
    pub(super) fn seeded(seed: u64) -> Self {
        let words = SipHasher13::new_with_keys(seed, !seed);
        Self::from_words(|i| {
            let mut word = words;
            word.write_u64(i);
            word.finish()
        })
    }

    /// A fingerprinter whose seed is the pseudo-random words `word(0)`, `word(1)`, ...
    fn from_words(word: impl Fn(u64) -> u64) -> Self {
        let wide = |i: u64| u128::from(word(2 * i)) << 64 | u128::from(word(2 * i + 1));
        Fingerprinter {
            sip: SipHasher13::new_with_keys(word(0), word(1)),
            offset: wide(1),
            length_multiplier: wide(2),
            word_multipliers: std::array::from_fn(|i| wide(3 + i as u64)),
        }
    }

    /// The fingerprint of `key` under `tag`; different keys or tags give fingerprints that
    /// collide with probability 2⁻⁶⁴.
    #[inline]
    pub(super) fn fingerprint(&self, key: &[u8], tag: u8) -> u64 {
        if key.len() > SHORT_KEY_BYTES {
            let mut sip = self.sip;
            sip.write(key);
            sip.write_u8(tag);
            return sip.finish();
        }
        // The length tells `a` from `a\0`, whose words are otherwise the same.
        let length_and_tag = key.len() as u64 | u64::from(tag) << 8;
        let mut sum = self
            .offset
            .wrapping_add(multiply(self.length_multiplier, length_and_tag));
        let mut words = key.chunks_exact(8);
        for (word, &multiplier) in words.by_ref().zip(&self.word_multipliers) {
            let word: &[u8; 8] = word.try_into().expect("chunks of 8 bytes");
            sum = sum.wrapping_add(multiply(multiplier, u64::from_le_bytes(*word)));
        }
        let last = little_endian(words.remainder());
        sum = sum.wrapping_add(multiply(self.word_multipliers[key.len() / 8], last));
        mix((sum >> 64) as u64)
    }
}

/// murmur3's 64-bit finalizer: a bijection, so it changes no collision. The sum above is
/// linear in the key: keys that step through one word by a fixed amount would get
/// fingerprints a fixed distance apart, and their low bits (where the store's tables put
/// them) could bunch into long runs. Mixed, they spread as random ones do.
fn mix(mut word: u64) -> u64 {
    word ^= word >> 33;
    word = word.wrapping_mul(0xff51_afd7_ed55_8ccd);
    word ^= word >> 33;
    word = word.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    word ^ word >> 33
}

/// `multiplier · word mod 2¹²⁸`: two multiplications, since the word has 64 bits.
fn multiply(multiplier: u128, word: u64) -> u128 {
    multiplier.wrapping_mul(u128::from(word))
}

/// The bytes of `bytes` (fewer than 8) as a little-endian number, read in at most three
/// loads: a copy into a buffer would be a call to `memcpy` and a stalled reload.
fn little_endian(bytes: &[u8]) -> u64 {
    debug_assert!(bytes.len() < 8);
    let mut word = 0;
    let mut read = 0;
    if let Some(four) = bytes.first_chunk::<4>() {
        word = u64::from(u32::from_le_bytes(*four));
        read = 4;
    }
    if let Some(two) = bytes[read..].first_chunk::<2>() {
        word |= u64::from(u16::from_le_bytes(*two)) << (8 * read);
        read += 2;
    }
    if let Some(&one) = bytes.get(read) {
        word |= u64::from(one) << (8 * read);
    }
    word
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

    /// Multiply-shift as its definition reads: the key zero-padded to every word the seed
    /// has a multiplier for, each word times its multiplier, summed mod 2¹²⁸.
    fn multiply_shift_by_definition(f: &Fingerprinter, key: &[u8], tag: u8) -> u64 {
        let mut padded = key.to_vec();
        padded.resize(8 * SHORT_KEY_WORDS, 0);
        let words = padded
            .chunks(8)
            .map(|word| u64::from_le_bytes(word.try_into().expect("8 bytes")));
        let length_and_tag = (key.len() + 256 * usize::from(tag)) as u64;
        let sum = std::iter::once((f.length_multiplier, length_and_tag))
            .chain(f.word_multipliers.into_iter().zip(words))
            .fold(f.offset, |sum, (a, x)| {
                sum.wrapping_add(a.wrapping_mul(u128::from(x)))
            });
        mix((sum >> 64) as u64)
    }

    #[test]
    fn short_keys_are_hashed_by_multiply_shift_at_every_length() {
        let fingerprinter = Fingerprinter::new();
        let bytes: Vec<u8> = (0..SHORT_KEY_BYTES as u8)
            .map(|b| b.wrapping_mul(37) | 1)
            .collect();
        for length in 0..=SHORT_KEY_BYTES {
            for tag in [0, 3, 255] {
                let key = &bytes[..length];
                assert_eq!(
                    fingerprinter.fingerprint(key, tag),
                    multiply_shift_by_definition(&fingerprinter, key, tag),
                    "{length} bytes, tag {tag}"
                );
            }
        }
    }

    #[test]
    fn longer_keys_are_hashed_by_siphash() {
        let fingerprinter = Fingerprinter::new();
        for length in [SHORT_KEY_BYTES + 1, 200, 4096] {
            let key = vec![7u8; length];
            let mut sip = fingerprinter.sip;
            sip.write(&key);
            sip.write(&[2]);
            assert_eq!(
                fingerprinter.fingerprint(&key, 2),
                sip.finish(),
                "{length} bytes"
            );
        }
    }

    #[test]
    fn every_byte_and_the_length_change_the_fingerprint() {
        let fingerprinter = Fingerprinter::new();
        let key = [0x5au8; SHORT_KEY_BYTES];
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

    #[test]
    fn a_seed_gives_the_same_fingerprints_every_time() {
        let key = b"remote_address=203.0.113.9";
        let seeded = |seed| Fingerprinter::seeded(seed).fingerprint(key, 1);
        assert_eq!(seeded(7), seeded(7));
        assert_ne!(seeded(7), seeded(8));
        let long = [7_u8; 300];
        assert_eq!(
            Fingerprinter::seeded(7).fingerprint(&long, 1),
            Fingerprinter::seeded(7).fingerprint(&long, 1)
        );
    }
}
