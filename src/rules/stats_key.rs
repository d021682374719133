//! The keys envoyproxy/ratelimit's statistics count a limit's hits under
//! (`ratelimit.service.rate_limit.<key>.total_hits`, ...), so that its dashboards keep
//! working: the domain, then each descriptor entry on the way to the limit as the file
//! names it, or as the call does where the file asks (`detailed_metric`,
//! `value_to_metric`).

use super::wildcard::Wildcard;
use std::fmt::Write;

/// A descriptor entry on the way to a limit, as its statistics key names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StatsEntry {
    pub(crate) key: String,
    /// The entry's `value` as written, if it has one.
    pub(crate) value: Option<String>,
    /// `value_to_metric`: a key-only or wildcard entry is named by the call's value.
    pub(crate) value_to_metric: bool,
    /// `share_threshold`: a wildcard is named by itself, whatever the call's value.
    pub(crate) share_threshold: bool,
    /// `detailed_metric`: on the entry of the limit, every entry is named by the call.
    pub(crate) detailed_metric: bool,
}

/// The statistics key of the limit at the end of `path` for a descriptor of `entries` in
/// `domain`, sanitized as envoyproxy/ratelimit sanitizes its names.
pub(crate) fn stats_key(domain: &str, path: &[StatsEntry], entries: &[(&str, &str)]) -> String {
    let detailed = path.last().is_some_and(|leaf| leaf.detailed_metric);
    let mut key = domain.to_owned();
    for (position, (request_key, request_value)) in entries.iter().enumerate() {
        let written = path.get(position);
        let wildcard = written.and_then(|entry| entry.value.as_deref().and_then(Wildcard::parse));
        key.push('.');
        let shared = wildcard
            .as_ref()
            .filter(|_| written.is_some_and(|e| e.share_threshold));
        let named = match (written, shared) {
            (Some(entry), Some(wildcard)) => format!("{}_{}", entry.key, wildcard.written()),
            (_, None) if detailed => format!("{request_key}_{request_value}"),
            (Some(entry), None) => match (&entry.value, &wildcard) {
                (Some(value), None) => format!("{}_{value}", entry.key),
                (Some(value), Some(_)) if !entry.value_to_metric => {
                    format!("{}_{value}", entry.key)
                }
                _ if entry.value_to_metric && !request_value.is_empty() => {
                    format!("{}_{request_value}", entry.key)
                }
                _ => entry.key.clone(),
            },
            (None, _) => (*request_key).to_owned(),
        };
        let _ = write!(key, "{named}");
    }
    sanitized(&key)
}

/// `name` as a statistics name: `:` and `|` are `_`, and so are the dots of an IPv4
/// address in it.
fn sanitized(name: &str) -> String {
    let name = name.replace([':', '|'], "_");
    let bytes: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len());
    let mut i = 0;
    while i < bytes.len() {
        if let Some(len) = ipv4_at(&bytes[i..]) {
            out.extend(
                bytes[i..i + len]
                    .iter()
                    .map(|&c| if c == '.' { '_' } else { c }),
            );
            i += len;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// The length of a dotted-quad IPv4 address at the start of `text`, if one is there.
fn ipv4_at(text: &[char]) -> Option<usize> {
    let mut at = 0;
    for part in 0..4 {
        let digits = text[at..].iter().take_while(|c| c.is_ascii_digit()).count();
        if !(1..=3).contains(&digits) {
            return None;
        }
        at += digits;
        if part < 3 {
            if text.get(at) != Some(&'.') {
                return None;
            }
            at += 1;
        }
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, value: Option<&str>) -> StatsEntry {
        StatsEntry {
            key: key.to_owned(),
            value: value.map(str::to_owned),
            value_to_metric: false,
            share_threshold: false,
            detailed_metric: false,
        }
    }

    /// envoyproxy/ratelimit's TestBasicConfig, TestWildcardConfig, TestDetailedMetric and
    /// TestShareThreshold keys.
    #[test]
    fn keys_are_upstream_s() {
        let path = [entry("key1", Some("value1")), entry("subkey1", None)];
        let call = [("key1", "value1"), ("subkey1", "something")];
        assert_eq!(
            stats_key("test-domain", &path, &call),
            "test-domain.key1_value1.subkey1"
        );
        let wild = [entry("wild", Some("foo*"))];
        assert_eq!(
            stats_key("test-domain", &wild, &[("wild", "foo1")]),
            "test-domain.wild_foo*"
        );
        let mut detailed = entry("key7", None);
        detailed.detailed_metric = true;
        let call = [("key7", "unspecified_value")];
        assert_eq!(
            stats_key("test-domain", &[detailed], &call),
            "test-domain.key7_unspecified_value"
        );
        let mut vtm = entry("route", None);
        vtm.value_to_metric = true;
        let path = [vtm, entry("subject_id", None)];
        let call = [("route", "draw"), ("subject_id", "123")];
        assert_eq!(
            stats_key("domain", &path, &call),
            "domain.route_draw.subject_id"
        );
        let mut shared = entry("files", Some("files/*"));
        shared.share_threshold = true;
        let call = [("files", "files/b.csv")];
        assert_eq!(
            stats_key("test-domain", &[shared], &call),
            "test-domain.files_files/*"
        );
        let ip = [entry("remote_address", None)];
        let mut detailed_ip = ip[0].clone();
        detailed_ip.detailed_metric = true;
        let call = [("remote_address", "10.0.0.1")];
        assert_eq!(
            stats_key("d", &[detailed_ip], &call),
            "d.remote_address_10_0_0_1"
        );
        assert_eq!(sanitized("a:b|c"), "a_b_c");
    }
}
