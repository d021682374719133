//! The denials that came up more than once lately on this thread, kept to be sent again: a
//! `429`, or a gRPC `RESOURCE_EXHAUSTED` (whose pushback, in milliseconds, is written into
//! each copy), each kind kept apart.
//!
//! A limit's `429` depends on the limit and the announced wait in whole seconds: while a
//! fixed window is full, every client it denies gets the same answer until the wait drops by
//! a second, and other algorithms repeat theirs for one client, or for all whose refill is
//! under a second. Making an answer (five header names hashed into a new `HeaderMap`, the
//! numbers and the problem document written) costs more than the decision itself; a copy of
//! a kept one costs about a third as much. An answer is kept the second time its key comes up,
//! so that a flood of answers that never repeat pays for remembering keys, not for copies.

use super::recent::Recent;
use bytes::Bytes;
use http::HeaderMap;
use std::sync::Arc;

/// How many keys each thread remembers: enough for a few limits denying at once.
const KEPT: usize = 4;

/// The headers and body of a denial, apart from the optional headers.
pub(super) type Answer = (HeaderMap, Bytes);

/// What a denial's headers and body are made from, apart from the optional headers (and a
/// gRPC denial's pushback).
pub(super) struct RejectionKey<'a> {
    /// The limit's label (the body, or a gRPC message, names it), shared with the limit.
    /// Remembered keys hold it, so while one is remembered no other label can have its
    /// address: the same address is the same label.
    pub(super) label: &'a Arc<str>,
    /// `X-Ratelimit-Limit`.
    pub(super) capacity: u64,
    /// `Retry-After` and `X-Ratelimit-Retry-After`, in whole seconds (the body, or a gRPC
    /// message, repeats it).
    pub(super) retry_after: u64,
}

/// A key that came up, and its answer once it came up again.
struct Remembered {
    label: Arc<str>,
    capacity: u64,
    retry_after: u64,
    answer: Option<Answer>,
}

impl Remembered {
    fn is_for(&self, key: &RejectionKey<'_>) -> bool {
        self.retry_after == key.retry_after
            && self.capacity == key.capacity
            && Arc::ptr_eq(&self.label, key.label)
    }
}

/// The last few keys that came up on this thread, replaced in turn, with the answers of
/// those that came up twice.
pub(super) struct RecentRejections(Recent<Remembered, KEPT>);

impl RecentRejections {
    pub(super) const fn new() -> Self {
        RecentRejections(Recent::new())
    }

    /// The answer for `key`: a copy of the kept one, or one made by `make` (and kept, when
    /// the key came up before).
    pub(super) fn answer(
        &mut self,
        key: &RejectionKey<'_>,
        make: impl FnOnce() -> Answer,
    ) -> Answer {
        let Some(remembered) = self.0.find_mut(|r| r.is_for(key)) else {
            self.0.push(Remembered {
                label: Arc::clone(key.label),
                capacity: key.capacity,
                retry_after: key.retry_after,
                answer: None,
            });
            return make();
        };
        match &remembered.answer {
            Some((headers, body)) => (headers.clone(), body.clone()),
            None => {
                let (headers, body) = make();
                remembered.answer = Some((headers.clone(), body.clone()));
                (headers, body)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    /// Asks `recent` for the answer to `key`, with a `make` whose body says which key it was
    /// made for and whose header counts the answers made so far.
    fn answer(recent: &mut RecentRejections, key: &RejectionKey<'_>, made: &mut usize) -> Answer {
        recent.answer(key, || {
            *made += 1;
            let text = format!("{} {} {}", key.label, key.capacity, key.retry_after);
            let mut headers = HeaderMap::new();
            headers.insert("x-made", HeaderValue::from(*made));
            (headers, Bytes::from(text))
        })
    }

    fn key(label: &Arc<str>, capacity: u64, retry_after: u64) -> RejectionKey<'_> {
        RejectionKey {
            label,
            capacity,
            retry_after,
        }
    }

    #[test]
    fn an_answer_is_kept_the_second_time_and_copied_from_then_on() {
        let mut recent = RecentRejections::new();
        let mut made = 0;
        let login: Arc<str> = r#""login""#.into();
        let wanted = key(&login, 5, 60);
        for (asked, made_by_then) in [(1, 1), (2, 2), (3, 2), (4, 2)] {
            let (headers, body) = answer(&mut recent, &wanted, &mut made);
            assert_eq!(body, r#""login" 5 60"#);
            assert_eq!(made, made_by_then, "after {asked} asks");
            let kept_from = made_by_then.to_string();
            assert_eq!(headers["x-made"], kept_from.as_str());
        }
    }

    #[test]
    fn every_part_of_the_key_tells_answers_apart() {
        let mut recent = RecentRejections::new();
        let mut made = 0;
        let login: Arc<str> = r#""login""#.into();
        // Equal text, another limit's label.
        let other_login: Arc<str> = r#""login""#.into();
        let keys = [
            key(&login, 5, 60),
            key(&other_login, 5, 60),
            key(&login, 6, 60),
            key(&login, 5, 59),
        ];
        for _ in 0..3 {
            for wanted in &keys {
                let (_, body) = answer(&mut recent, wanted, &mut made);
                let expected = format!(
                    "{} {} {}",
                    wanted.label, wanted.capacity, wanted.retry_after
                );
                assert_eq!(body, expected.as_str());
            }
        }
        // Each made when first seen and when kept, then copied.
        assert_eq!(made, 2 * keys.len());
    }

    #[test]
    fn keys_that_never_repeat_in_time_keep_no_answer() {
        let mut recent = RecentRejections::new();
        let mut made = 0;
        let api: Arc<str> = r#""api""#.into();
        let keys: Vec<_> = (0..=KEPT as u64).map(|s| key(&api, 10, s)).collect();
        // Round and round: each key comes up again only after the others pushed it out.
        for _ in 0..3 {
            for wanted in &keys {
                answer(&mut recent, wanted, &mut made);
            }
        }
        assert_eq!(made, 3 * keys.len());
        assert!(recent.0.find_mut(|r| r.answer.is_some()).is_none());
    }
}
