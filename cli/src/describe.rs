//! A limit's settings as short text, for tables.

use std::fmt::Write;
use tollgate::algorithm::Algorithm;
use tollgate::rules::{Limit, Rate, Unit};

/// The algorithm's name as the rules file spells it; `concurrency` for a concurrency limit,
/// `-` for an unlimited entry.
pub(crate) fn algorithm(limit: &Limit) -> &'static str {
    match limit.rate() {
        Rate::Concurrency { .. } => "concurrency",
        _ => limit.algorithm().map_or("-", Algorithm::name),
    }
}

/// E.g. `10 per 1m, burst 20`, `5 per 1s, queue 10, max delay 3s`, `3 per 1m, block 15m`,
/// `10000 per calendar month in Europe/Paris`
/// (with `block_for`), `5 in flight, lease
/// 30s` (the server's `load_shedding`: `64 in flight`), or `unlimited`.
pub(crate) fn quota(limit: &Limit) -> String {
    let (quota, algorithm) = match limit.rate() {
        Rate::Limited { quota, algorithm } => (quota, algorithm),
        Rate::Concurrency { max_in_flight } => {
            return match limit.lease() {
                Some(lease) => format!(
                    "{max_in_flight} in flight, lease {}",
                    Unit::format_period(lease)
                ),
                // The server's load shedding, counted by each server alone.
                None => format!("{max_in_flight} in flight"),
            };
        }
        _ => return "unlimited".to_owned(),
    };
    let mut text = match quota.calendar() {
        Some(calendar) => format!(
            "{} per calendar {} in {}",
            quota.requests_per_period(),
            calendar.unit().name(),
            calendar.time_zone()
        ),
        None => {
            let period = Unit::format_period(quota.period());
            format!("{} per {period}", quota.requests_per_period())
        }
    };
    // Writing to a String cannot fail.
    match algorithm {
        Algorithm::TokenBucket | Algorithm::Gcra => {
            let _ = write!(text, ", burst {}", quota.burst());
        }
        Algorithm::LeakyBucket => {
            let _ = write!(text, ", queue {}", quota.queue());
            if let Some(max_delay) = quota.max_delay() {
                let _ = write!(text, ", max delay {}", Unit::format_period(max_delay));
            }
            if !quota.is_shaping() {
                text.push_str(", policing");
            }
        }
        _ => {}
    }
    if let Some(settlement) = limit.settlement() {
        let _ = write!(text, ", {settlement}");
    }
    if let Some(block) = limit.block_for() {
        let _ = write!(text, ", block {}", Unit::format_period(block));
    }
    text
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

/// The interval of a local-first limit, e.g. `100ms`; `-` for an exact one.
pub(crate) fn sync_every(limit: &Limit) -> String {
    limit
        .sync_every()
        .map_or_else(|| "-".to_owned(), Unit::format_period)
}

/// The keys at which [`approximate`] states an approximate limit's error bound: each sends
/// one request a window.
pub(crate) const BOUND_AT_KEYS: u64 = 1_000_000;
/// [`BOUND_AT_KEYS`] as the table's note writes it.
pub(crate) const BOUND_AT_KEYS_TEXT: &str = "1,000,000";

/// An approximate limit's sketch and its error bound at [`BOUND_AT_KEYS`], e.g.
/// `4MiB, +11.9` (estimates only ever exceed true counts); `-` for an exact one.
pub(crate) fn approximate(limit: &Limit) -> String {
    let (Some(approximate), Some(algorithm)) = (limit.approximate(), limit.algorithm()) else {
        return "-".to_owned();
    };
    let bound = approximate.error_bound(algorithm, BOUND_AT_KEYS);
    format!("{}, +{bound:.1}", size(approximate.memory()))
}

/// `bytes` in the largest binary unit that divides it: `4MiB`, `64KiB`, `1000B`.
fn size(bytes: usize) -> String {
    const UNITS: [(usize, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    UNITS
        .iter()
        .find(|(unit, _)| bytes.is_multiple_of(*unit))
        .map_or_else(
            || format!("{bytes}B"),
            |(unit, name)| format!("{}{name}", bytes / unit),
        )
}

/// `a, b`, or `-` for none.
pub(crate) fn list(names: &[String]) -> String {
    if names.is_empty() {
        "-".to_owned()
    } else {
        names.join(", ")
    }
}
