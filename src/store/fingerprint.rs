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
//! store (fingerprints are not shown to clients). Longer keys go through SipHash-1-3 under its
//! own secret seed, a pseudo-random function that keeps its strength even against a client
//! that learns some fingerprints.

use std::hash::{BuildHasher, RandomState};

/// The longest key fingerprinted by multiply-shift; longer keys take SipHash. Its length
/// fits the low byte of the length-and-tag word.
const SHORT_KEY_BYTES: usize = 127;

/// The words of a short key: its full 8-byte words, then a last, partial one (zero-padded;
/// empty when the length is a multiple of 8, and then multiplied by a multiplier all the
/// same, so that taking it needs no branch).
const SHORT_KEY_WORDS: usize = SHORT_KEY_BYTES / 8 + 1;

/// Fingerprints keys under a secret seed drawn at random.
pub(crate) struct Fingerprinter {
    /// The multiply-shift seed: the constant term.
    offset: u128,
    /// The multiplier of the word holding a key's length and tag.
    length_multiplier: u128,
    /// The multipliers of a short key's words, in order.
    word_multipliers: [u128; SHORT_KEY_WORDS],
    /// SipHash's seed, for longer keys.
    sip_keys: [u64; 2],
}

impl Fingerprinter {
    /// A fingerprinter with a fresh random seed.
    pub(crate) fn new() -> Self {
        // `RandomState`'s 128-bit keys are drawn at random once per thread and changed for
        // each new one; counters hashed under them are pseudo-random words from that secret.
        let random = RandomState::new();
        let word = |i: u64| random.hash_one(i);
        let wide = |i: u64| u128::from(word(2 * i)) << 64 | u128::from(word(2 * i + 1));
        Fingerprinter {
            sip_keys: [word(0), word(1)],
            offset: wide(1),
            length_multiplier: wide(2),
            word_multipliers: std::array::from_fn(|i| wide(3 + i as u64)),
        }
    }

    /// The fingerprint of `key` under `tag`; different keys or tags give fingerprints that
    /// collide with probability 2⁻⁶⁴.
    #[inline]
    pub(crate) fn fingerprint(&self, key: &[u8], tag: u8) -> u64 {
        if key.len() > SHORT_KEY_BYTES {
            let [k0, k1] = self.sip_keys;
            return sip::<1, 3>(k0, k1, key, tag);
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
#[inline(always)]
fn mix(mut word: u64) -> u64 {
    word ^= word >> 33;
    word = word.wrapping_mul(0xff51_afd7_ed55_8ccd);
    word ^= word >> 33;
    word = word.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    word ^ word >> 33
}

/// `multiplier · word mod 2¹²⁸`: two multiplications, since the word has 64 bits.
#[inline(always)]
fn multiply(multiplier: u128, word: u64) -> u128 {
    multiplier.wrapping_mul(u128::from(word))
}

/// SipHash-c-d of the bytes of `key` followed by `tag`.
#[inline]
fn sip<const C: usize, const D: usize>(k0: u64, k1: u64, key: &[u8], tag: u8) -> u64 {
    let mut state = State {
        v0: k0 ^ 0x736f_6d65_7073_6575,
        v1: k1 ^ 0x646f_7261_6e64_6f6d,
        v2: k0 ^ 0x6c79_6765_6e65_7261,
        v3: k1 ^ 0x7465_6462_7974_6573,
    };
    let mut blocks = key.chunks_exact(8);
    for block in blocks.by_ref() {
        let block: &[u8; 8] = block.try_into().expect("chunks of 8 bytes");
        state.compress::<C>(u64::from_le_bytes(*block));
    }
    // The last bytes of the key, then the tag, then the message length in the top byte
    // (taken mod 256, as SipHash does).
    let rest = blocks.remainder();
    let tail = little_endian(rest) | u64::from(tag) << (8 * rest.len());
    let length = (key.len() as u64).wrapping_add(1) << 56;
    let last = if rest.len() == 7 {
        // The tag fills the block: it is a block of its own, and the length one more.
        state.compress::<C>(tail);
        length
    } else {
        tail | length
    };
    state.compress::<C>(last);
    state.v2 ^= 0xff;
    state.rounds::<D>();
    state.v0 ^ state.v1 ^ state.v2 ^ state.v3
}

/// The bytes of `bytes` (fewer than 8) as a little-endian number, read in at most three
/// loads: a copy into a buffer would be a call to `memcpy` and a stalled reload.
#[inline(always)]
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

/// SipHash's four words of internal state.
struct State {
    v0: u64,
    v1: u64,
    v2: u64,
    v3: u64,
}

impl State {
    #[inline(always)]
    fn compress<const C: usize>(&mut self, word: u64) {
        self.v3 ^= word;
        self.rounds::<C>();
        self.v0 ^= word;
    }

    #[inline(always)]
    fn rounds<const N: usize>(&mut self) {
        for _ in 0..N {
            self.v0 = self.v0.wrapping_add(self.v1);
            self.v1 = self.v1.rotate_left(13) ^ self.v0;
            self.v0 = self.v0.rotate_left(32);
            self.v2 = self.v2.wrapping_add(self.v3);
            self.v3 = self.v3.rotate_left(16) ^ self.v2;
            self.v0 = self.v0.wrapping_add(self.v3);
            self.v3 = self.v3.rotate_left(21) ^ self.v0;
            self.v2 = self.v2.wrapping_add(self.v1);
            self.v1 = self.v1.rotate_left(17) ^ self.v2;
            self.v2 = self.v2.rotate_left(32);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hasher;

    /// The standard library's SipHash-2-4 (deprecated, but the one whose keys can be set)
    /// of `key` then `tag`, written as a stream.
    #[allow(deprecated)]
    fn std_sip_2_4(k0: u64, k1: u64, key: &[u8], tag: u8) -> u64 {
        let mut hasher = std::hash::SipHasher::new_with_keys(k0, k1);
        hasher.write(key);
        hasher.write(&[tag]);
        hasher.finish()
    }

    #[test]
    fn matches_the_standard_librarys_siphash_for_every_key_length() {
        let bytes: Vec<u8> = (0..=255u8).map(|b| b.wrapping_mul(37)).collect();
        let (k0, k1) = (0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);
        // Every remainder of the 8-byte blocks, and a length that wraps mod 256.
        for length in (0..=40).chain([255, 256]) {
            let key = &bytes.repeat(2)[..length];
            for tag in [0, 3, 255] {
                assert_eq!(
                    sip::<2, 4>(k0, k1, key, tag),
                    std_sip_2_4(k0, k1, key, tag),
                    "{length} bytes, tag {tag}"
                );
            }
        }
    }

    #[test]
    fn the_reference_test_vector() {
        // The SipHash paper's vector for SipHash-2-4: key 00..0f, message 00..0e.
        let message: Vec<u8> = (0..15).collect();
        let (key, tag) = message.split_at(14);
        assert_eq!(
            sip::<2, 4>(0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908, key, tag[0]),
            0xa129_ca61_49be_45e5
        );
    }

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
        let [k0, k1] = fingerprinter.sip_keys;
        for length in [SHORT_KEY_BYTES + 1, 200, 4096] {
            let key = vec![7u8; length];
            assert_eq!(
                fingerprinter.fingerprint(&key, 2),
                sip::<1, 3>(k0, k1, &key, 2),
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
}
