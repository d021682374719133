//! Division by a number fixed in advance, by multiplying.
//!
//! The algorithms divide by the same few numbers on every decision (a quota's period, its
//! limit, its emission interval), and a 64-bit `div` costs tens of cycles, as much as the
//! rest of a decision. A [`Divisor`] takes the reciprocal once and divides with two
//! multiplications (Lemire, Kaser and Kurz, "Faster remainder by direct computation", 2019:
//! with `c = ⌈2¹²⁸ / d⌉`, `⌊n / d⌋ = ⌊c·n / 2¹²⁸⌋` for every 64-bit `n`).

use std::fmt;

/// A 64-bit divisor with its reciprocal.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Divisor {
    divisor: u64,
    /// `⌈2¹²⁸ / divisor⌉` in two halves (a `u128` would align every `Quota` to 16 bytes);
    /// unused for 0 and 1, whose reciprocal does not fit.
    reciprocal_high: u64,
    reciprocal_low: u64,
}

impl Divisor {
    /// Dividing by `divisor` (0 is allowed here, and panics when divided by).
    pub(crate) const fn new(divisor: u64) -> Self {
        let reciprocal = if divisor > 1 {
            u128::MAX / divisor as u128 + 1
        } else {
            0
        };
        Divisor {
            divisor,
            reciprocal_high: (reciprocal >> 64) as u64,
            reciprocal_low: reciprocal as u64,
        }
    }

    /// The number divided by.
    pub(crate) const fn get(self) -> u64 {
        self.divisor
    }

    /// `n / divisor`, rounded down.
    ///
    /// # Panics
    ///
    /// When the divisor is 0.
    #[inline]
    pub(crate) fn div_u64(self, n: u64) -> u64 {
        match self.divisor {
            // A limit of 1 is common: no `div` for it either.
            1 => n,
            0 => n / self.divisor,
            _ => self.multiply_high(n),
        }
    }

    /// `n / divisor`, rounded down; in 64 bits when `n` fits.
    ///
    /// # Panics
    ///
    /// When the divisor is 0.
    #[inline]
    pub(crate) fn div(self, n: u128) -> u128 {
        match u64::try_from(n) {
            Ok(n) => u128::from(self.div_u64(n)),
            Err(_) => n / u128::from(self.divisor),
        }
    }

    /// `n / divisor`, rounded up, for a 64-bit `n`.
    ///
    /// # Panics
    ///
    /// When the divisor is 0.
    #[inline]
    pub(crate) fn div_ceil_u64(self, n: u64) -> u64 {
        // ⌈n / d⌉ = ⌊(n - 1) / d⌋ + 1 for n ≥ 1: one division, no multiplication back.
        match n.checked_sub(1) {
            Some(below) => self.div_u64(below) + 1,
            None => n / self.divisor,
        }
    }

    /// `n / divisor`, rounded up; in 64 bits when `n` fits.
    ///
    /// # Panics
    ///
    /// When the divisor is 0.
    #[inline]
    pub(crate) fn div_ceil(self, n: u128) -> u128 {
        match u64::try_from(n) {
            Ok(n) => u128::from(self.div_ceil_u64(n)),
            Err(_) => n.div_ceil(u128::from(self.divisor)),
        }
    }

    /// `n / divisor` for a divisor above 1: the top 64 bits of the 192-bit `reciprocal · n`.
    #[inline]
    fn multiply_high(self, n: u64) -> u64 {
        let n = u128::from(n);
        let low = u128::from(self.reciprocal_low) * n;
        let high = u128::from(self.reciprocal_high) * n;
        // Below 2¹²⁸: it is ⌊reciprocal · n / 2⁶⁴⌋ and reciprocal · n < 2¹⁹².
        ((high + (low >> 64)) >> 64) as u64
    }
}

// Shown as the number it divides by.
impl fmt::Debug for Divisor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.divisor, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(divisor: u64, n: u128) {
        let d = Divisor::new(divisor);
        let wide = u128::from(divisor);
        assert_eq!(d.div(n), n / wide, "{n} / {divisor}");
        if let Ok(narrow) = u64::try_from(n) {
            assert_eq!(
                d.div_u64(narrow),
                narrow / divisor,
                "{n} / {divisor} in 64 bits"
            );
            assert_eq!(
                d.div_ceil_u64(narrow),
                narrow.div_ceil(divisor),
                "{n} / {divisor} rounded up in 64 bits"
            );
        }
        assert_eq!(
            d.div_ceil(n),
            n.div_ceil(wide),
            "{n} / {divisor} rounded up"
        );
    }

    #[test]
    fn divides_exactly_at_the_edges() {
        let divisors = [
            1,
            2,
            3,
            7,
            10,
            1_000_000_000,
            333_333_334,
            u64::from(u32::MAX),
            u64::from(u32::MAX) + 1,
            1 << 63,
            u64::MAX - 1,
            u64::MAX,
        ];
        for divisor in divisors {
            for n in [
                0,
                1,
                divisor - 1,
                divisor,
                divisor.wrapping_add(1),
                u64::MAX - 1,
                u64::MAX,
            ] {
                check(divisor, u128::from(n));
                check(divisor, u128::from(n.wrapping_mul(divisor)));
            }
            // Above 64 bits: the plain 128-bit division.
            check(divisor, u128::from(u64::MAX) * 3 + 5);
        }
    }

    #[test]
    fn divides_exactly_over_a_spread_of_values() {
        // A fixed xorshift sequence: many magnitudes of divisor and dividend.
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let divisor = (next() >> (next() % 64)).max(1);
            let n = next() >> (next() % 64);
            check(divisor, u128::from(n));
        }
    }
}
