//! Header values for numbers. A count goes out on every response, and a `HeaderValue` made
//! from a number allocates: values below 1024 (most limits, counts and waits) come from a
//! table made once per process, larger ones are cut from a block shared with the values made
//! before them, and the last few large counts of each kind are kept to be sent again.

use super::recent::Recent;
use bytes::BytesMut;
use http::HeaderValue;
use std::cell::RefCell;
use std::sync::OnceLock;
use std::thread::LocalKey;

/// The numbers below this one have their header values made once per process.
const SMALL_NUMBERS: u64 = 1024;

/// A header value for `n`.
pub(super) fn number(n: u64) -> HeaderValue {
    if n < SMALL_NUMBERS {
        small_number(n)
    } else {
        large_number(n)
    }
}

/// The header value for `n`, below [`SMALL_NUMBERS`], from the table made once per process.
fn small_number(n: u64) -> HeaderValue {
    static SMALL: OnceLock<Box<[HeaderValue]>> = OnceLock::new();
    let small = SMALL.get_or_init(|| {
        // Leaked once per process (a few kilobytes), so that every clone is free.
        (0..SMALL_NUMBERS)
            .map(|n| HeaderValue::from_static(Box::leak(n.to_string().into_boxed_str())))
            .collect()
    });
    small[usize::try_from(n).unwrap_or_default()].clone()
}

/// The size of the blocks [`large_number`] cuts header values from: a few hundred numbers
/// written on one thread share one allocation, freed once every value cut from it is
/// dropped with the response that carried it.
const NUMBER_BLOCK_BYTES: usize = 4096;

/// A header value for `n`, its digits written into this thread's current number block.
fn large_number(n: u64) -> HeaderValue {
    thread_local! {
        static BLOCK: RefCell<BytesMut> = RefCell::new(BytesMut::new());
    }
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(n).as_bytes();
    let bytes = BLOCK.with_borrow_mut(|block| {
        if block.capacity() < digits.len() {
            *block = BytesMut::with_capacity(NUMBER_BLOCK_BYTES);
        }
        block.extend_from_slice(digits);
        // The digits leave the block; the rest of its capacity stays for the next number.
        block.split().freeze()
    });
    HeaderValue::from_maybe_shared(bytes).expect("digits are a valid header value")
}

/// The last few header values made on one thread for one kind of count, kept so that a
/// large count that repeats is not formatted again.
type KeptNumbers = RefCell<Recent<(u64, HeaderValue), 4>>;

/// [`number`] for a limit's size, which repeats on every response of that limit.
pub(super) fn limit_number(n: u64) -> HeaderValue {
    thread_local! {
        static KEPT: KeptNumbers = const { RefCell::new(Recent::new()) };
    }
    kept_number(&KEPT, n)
}

/// [`number`] for the requests an admitted client may still send, which repeats while a
/// client stays far below its limit.
pub(super) fn remaining_number(n: u64) -> HeaderValue {
    thread_local! {
        static KEPT: KeptNumbers = const { RefCell::new(Recent::new()) };
    }
    kept_number(&KEPT, n)
}

/// [`number`] for `n`, taken from `kept` when it was made there before, and kept there when
/// it is large (small numbers come from the table, which is cheaper to look up).
fn kept_number(kept: &'static LocalKey<KeptNumbers>, n: u64) -> HeaderValue {
    if n < SMALL_NUMBERS {
        return small_number(n);
    }
    kept.with_borrow_mut(|recent| {
        if let Some((_, value)) = recent.find_mut(|(made, _)| *made == n) {
            return value.clone();
        }
        let value = large_number(n);
        recent.push((n, value.clone()));
        value
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_whatever_their_size_and_however_often() {
        for n in [0, 7, 1023, 1024, 3600, 1_000_000_000, u64::MAX] {
            assert_eq!(number(n), n.to_string().as_str());
        }
        // More distinct counts than are kept, small and large, twice over, in turn.
        let counts = [
            5_000,
            60_000,
            1_000_000,
            7,
            86_400,
            2_000_000_000,
            1024,
            1023,
        ];
        for _ in 0..2 {
            for n in counts {
                assert_eq!(limit_number(n), n.to_string().as_str());
                assert_eq!(remaining_number(n), n.to_string().as_str());
            }
        }
    }

    #[test]
    fn a_large_count_that_repeats_is_not_written_again() {
        for count in [limit_number, remaining_number] {
            let first = count(999_999_999);
            let again = count(999_999_999);
            assert_eq!(again, "999999999");
            assert_eq!(first.as_bytes().as_ptr(), again.as_bytes().as_ptr());
        }
    }

    #[test]
    fn numbers_cut_from_shared_blocks_keep_their_own_digits() {
        // Enough numbers to fill several blocks, all alive at once.
        let numbers: Vec<u64> = (0..3_000u64).map(|i| 1_000_000_007 * (i + 1)).collect();
        let values: Vec<HeaderValue> = numbers.iter().map(|&n| number(n)).collect();
        for (n, value) in numbers.iter().zip(&values) {
            assert_eq!(value, n.to_string().as_str());
        }
    }
}
