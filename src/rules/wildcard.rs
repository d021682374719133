//! Descriptor values with wildcards: `foo*`, `foo*bar`, `*`, as envoyproxy/ratelimit
//! matches them.

/// A value with at least one `*`, each matching any run of characters, the empty one too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wildcard {
    /// The value as written, e.g. `files/*`: what a shared count is keyed by.
    written: String,
    /// The text between the `*`s: the first must start a value, the last end it, and the
    /// others come between, in order, without overlapping.
    segments: Vec<String>,
}

impl Wildcard {
    /// The wildcard `written` is, if it has a `*`.
    pub(crate) fn parse(written: &str) -> Option<Wildcard> {
        written.contains('*').then(|| Wildcard {
            written: written.to_owned(),
            segments: written.split('*').map(str::to_owned).collect(),
        })
    }

    /// The value as written.
    pub(crate) fn written(&self) -> &str {
        &self.written
    }

    /// How many characters a value it matches has at least: how specific it is.
    pub(crate) fn literal_len(&self) -> usize {
        self.segments.iter().map(String::len).sum()
    }

    /// Whether `value` matches.
    pub(crate) fn matches(&self, value: &str) -> bool {
        let (Some(first), Some(last)) = (self.segments.first(), self.segments.last()) else {
            return false;
        };
        if self.literal_len() > value.len()
            || !value.starts_with(first.as_str())
            || !value.ends_with(last.as_str())
        {
            return false;
        }
        // The middle segments, leftmost first, between the first and the last.
        let mut rest = &value[first.len()..value.len() - last.len()];
        for segment in &self.segments[1..self.segments.len() - 1] {
            match rest.find(segment.as_str()) {
                Some(at) => rest = &rest[at + segment.len()..],
                None => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, value: &str) -> bool {
        Wildcard::parse(pattern).expect("a wildcard").matches(value)
    }

    /// envoyproxy/ratelimit's `TestWildcardConfig` and `TestShareThreshold` values.
    #[test]
    fn a_star_matches_any_run_of_characters_as_upstream() {
        assert!(matches("foo*", "foo1") && matches("foo*", "foo"));
        assert!(!matches("foo*", "bar"));
        assert!(matches("bar*b", "barab") && matches("bar*b", "bar123b"));
        assert!(matches("bar*b", "barb"), "the empty run");
        assert!(!matches("bar*b", "bara") && !matches("bar*b", "xbarb"));
        assert!(matches("foo*bar*baz", "foo123bar456baz") && matches("foo*bar*baz", "foobarbaz"));
        assert!(!matches("foo*bar*baz", "foo123baz") && !matches("foo*bar*baz", "bar456baz"));
        assert!(matches("/api*v1", "/api-beta-v1") && !matches("/api*v1", "/api/v2"));
        assert!(matches("svc*ep*rpc", "svceprpc") && !matches("svc*ep*rpc", "svcABCrpc"));
        assert!(
            !matches("ab*ba", "aba"),
            "the first and last do not overlap"
        );
        assert!(matches("*", "") && matches("*", "anything"));
        assert_eq!(Wildcard::parse("plain"), None);
    }
}
