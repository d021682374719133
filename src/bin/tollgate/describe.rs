//! A limit's settings as short text, for tables.

use std::time::Duration;
use tollgate::algorithm::Algorithm;
use tollgate::rules::{Limit, OnStoreError};

/// The algorithm's name as the rules file spells it; `-` for an unlimited entry.
pub(crate) fn algorithm(limit: &Limit) -> &'static str {
    limit.algorithm().map_or("-", Algorithm::name)
}

/// E.g. `10 per 1m, burst 20`, `5 per 1s, queue 10, max delay 3s`, or `unlimited`.
pub(crate) fn quota(limit: &Limit) -> String {
    let (Some(algorithm), Some(quota)) = (limit.algorithm(), limit.quota()) else {
        return "unlimited".to_owned();
    };
    let mut text = format!("{} per {}", quota.limit(), period(quota.period()));
    match algorithm {
        Algorithm::TokenBucket | Algorithm::Gcra => {
            text.push_str(&format!(", burst {}", quota.burst()));
        }
        Algorithm::LeakyBucket => {
            text.push_str(&format!(", queue {}", quota.queue()));
            if let Some(max_delay) = quota.max_delay() {
                text.push_str(&format!(", max delay {}", period(max_delay)));
            }
            if !quota.is_shaping() {
                text.push_str(", policing");
            }
        }
        _ => {}
    }
    text
}

/// A duration in the largest unit that divides it: `1m`, `30s`, `500ms`, `7d`.
pub(crate) fn period(duration: Duration) -> String {
    const UNITS: [(&str, u128); 6] = [
        ("d", 86_400_000_000_000),
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ];
    let nanos = duration.as_nanos();
    let (unit, size) = UNITS
        .into_iter()
        .find(|(_, size)| nanos % size == 0)
        .unwrap_or(("ns", 1));
    format!("{}{unit}", nanos / size)
}

/// Whether the limit only counts and reports: `yes` when its own `shadow_mode` says so,
/// `yes (file)` when only the file's top-level `shadow_mode` (`file_wide`) does, else `no`.
pub(crate) fn shadow(limit: &Limit, file_wide: bool) -> &'static str {
    if limit.is_shadow() {
        "yes"
    } else if file_wide {
        "yes (file)"
    } else {
        "no"
    }
}

/// The policy as the rules file spells it.
pub(crate) fn on_store_error(policy: OnStoreError) -> String {
    match policy {
        OnStoreError::Allow => "allow".to_owned(),
        OnStoreError::Deny => "deny".to_owned(),
        OnStoreError::Local => "local".to_owned(),
        // A policy added after this command was written.
        other => format!("{other:?}").to_lowercase(),
    }
}

/// `a, b`, or `-` for none.
pub(crate) fn list(names: &[String]) -> String {
    if names.is_empty() {
        "-".to_owned()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::period;
    use std::time::Duration;

    #[test]
    fn periods_use_the_largest_exact_unit() {
        assert_eq!(period(Duration::from_secs(60)), "1m");
        assert_eq!(period(Duration::from_secs(30)), "30s");
        assert_eq!(period(Duration::from_secs(90)), "90s");
        assert_eq!(period(Duration::from_millis(500)), "500ms");
        assert_eq!(period(Duration::from_secs(7 * 86_400)), "7d");
        assert_eq!(period(Duration::from_nanos(3)), "3ns");
    }
}
