//! A key's fingerprint: SipHash-1-3 of the key and a tag, under a secret seed, in one pass.
//!
//! [`std::hash::RandomState`] computes the same function, but through the streaming
//! [`Hasher`](std::hash::Hasher) interface, which buffers every write; a key is hashed on
//! every decision, so here it is read in place, 8 bytes at a time.

use std::hash::{BuildHasher, RandomState};

/// SipHash-1-3 under a seed drawn at random: clients cannot choose keys whose fingerprints
/// collide without knowing it.
pub(super) struct Fingerprinter {
    k0: u64,
    k1: u64,
}

impl Fingerprinter {
    /// A fingerprinter with a fresh random seed.
    pub(super) fn new() -> Self {
        // The standard library's seed is random per `RandomState`; two values hashed under
        // it are the seed's 128 bits, mixed.
        let random = RandomState::new();
        Fingerprinter {
            k0: random.hash_one(0u8),
            k1: random.hash_one(1u8),
        }
    }

    /// SipHash-1-3 of `key` followed by the byte `tag`.
    #[inline]
    pub(super) fn fingerprint(&self, key: &[u8], tag: u8) -> u64 {
        sip::<1, 3>(self.k0, self.k1, key, tag)
    }
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
}
