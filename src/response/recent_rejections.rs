//! The `429` answers made last on this thread, kept to be sent again.
//!
//! While a limit is full, every request it denies gets the same answer: the same problem
//! document and the same `X-Ratelimit-*` headers, until the wait it announces drops by a
//! second. Making that answer (five header names hashed into a new `HeaderMap`, three numbers
//! written, the document written) costs more than the decision itself; a copy of a kept one
//! costs a fraction of that.

use bytes::Bytes;
use http::HeaderMap;

/// How many answers each thread keeps: enough for a few limits denying at once.
const KEPT: usize = 4;

/// What a `429`'s headers and body are made from, apart from the optional headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RejectionKey<'a> {
    /// The limit's label as JSON (the body names it).
    pub(super) label_json: &'a str,
    /// `X-Ratelimit-Limit`.
    pub(super) limit: u64,
    /// `Retry-After` and `X-Ratelimit-Retry-After`, in whole seconds (the body repeats it).
    pub(super) retry_after: u64,
}

/// One answer kept: its key, and the headers and body made for it.
struct Kept {
    label_json: Box<str>,
    limit: u64,
    retry_after: u64,
    headers: HeaderMap,
    body: Bytes,
}

impl Kept {
    fn is_for(&self, key: &RejectionKey<'_>) -> bool {
        self.retry_after == key.retry_after
            && self.limit == key.limit
            && *self.label_json == *key.label_json
    }
}

/// The last few answers made on this thread, replaced in turn.
pub(super) struct RecentRejections {
    kept: [Option<Kept>; KEPT],
    next: usize,
}

impl RecentRejections {
    pub(super) const fn new() -> Self {
        RecentRejections {
            kept: [const { None }; KEPT],
            next: 0,
        }
    }

    /// The headers and body of the answer for `key`: copies of a kept one, or made by `make`
    /// and kept.
    pub(super) fn get_or_make(
        &mut self,
        key: &RejectionKey<'_>,
        make: impl FnOnce() -> (HeaderMap, Bytes),
    ) -> (HeaderMap, Bytes) {
        if let Some(kept) = self.kept.iter().flatten().find(|kept| kept.is_for(key)) {
            return (kept.headers.clone(), kept.body.clone());
        }
        let (headers, body) = make();
        self.kept[self.next] = Some(Kept {
            label_json: key.label_json.into(),
            limit: key.limit,
            retry_after: key.retry_after,
            headers: headers.clone(),
            body: body.clone(),
        });
        self.next = (self.next + 1) % KEPT;
        (headers, body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    /// An answer whose body says which key it was made for, counting the answers made.
    fn make_for<'a>(
        key: &'a RejectionKey<'a>,
        made: &'a mut usize,
    ) -> impl FnOnce() -> (HeaderMap, Bytes) + 'a {
        move || {
            *made += 1;
            let text = format!("{} {} {}", key.label_json, key.limit, key.retry_after);
            let mut headers = HeaderMap::new();
            headers.insert("x-made", HeaderValue::from(*made));
            (headers, Bytes::from(text))
        }
    }

    fn key(label_json: &str, limit: u64, retry_after: u64) -> RejectionKey<'_> {
        RejectionKey {
            label_json,
            limit,
            retry_after,
        }
    }

    #[test]
    fn an_answer_is_made_once_and_copied_while_its_key_repeats() {
        let mut recent = RecentRejections::new();
        let mut made = 0;
        let wanted = key(r#""login""#, 5, 60);
        for _ in 0..3 {
            let (headers, body) = recent.get_or_make(&wanted, make_for(&wanted, &mut made));
            assert_eq!(body, r#""login" 5 60"#);
            assert_eq!(headers["x-made"], "1");
        }
        assert_eq!(made, 1);
    }

    #[test]
    fn every_part_of_the_key_tells_answers_apart() {
        let mut recent = RecentRejections::new();
        let mut made = 0;
        let keys = [
            key(r#""login""#, 5, 60),
            key(r#""signup""#, 5, 60),
            key(r#""login""#, 6, 60),
            key(r#""login""#, 5, 59),
        ];
        for wanted in &keys {
            let (_, body) = recent.get_or_make(wanted, make_for(wanted, &mut made));
            let expected = format!(
                "{} {} {}",
                wanted.label_json, wanted.limit, wanted.retry_after
            );
            assert_eq!(body, expected.as_str());
        }
        assert_eq!(made, keys.len());
    }

    #[test]
    fn the_oldest_answer_makes_room_for_a_new_one() {
        let mut recent = RecentRejections::new();
        let mut made = 0;
        let keys: Vec<_> = (0..=KEPT as u64).map(|s| key(r#""api""#, 10, s)).collect();
        for wanted in &keys {
            recent.get_or_make(wanted, make_for(wanted, &mut made));
        }
        // The first was replaced by the last; the others are still kept.
        recent.get_or_make(&keys[1], make_for(&keys[1], &mut made));
        assert_eq!(made, KEPT + 1);
        let (_, body) = recent.get_or_make(&keys[0], make_for(&keys[0], &mut made));
        assert_eq!(body, r#""api" 10 0"#);
        assert_eq!(made, KEPT + 2);
    }
}
