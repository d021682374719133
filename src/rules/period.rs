//! Periods as the rules write them: `30s`, `500ms`, `5m`, `2h`, `1d`.

use super::Unit;
use std::time::Duration;

/// The units of a `period` or `max_delay`, largest first, in milliseconds: what
/// [`parse_period`] reads and [`Unit::format_period`] writes.
const PERIOD_UNITS: [(&str, u128); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// `30s`, `500ms`, `5m`, `2h`, `1d`.
pub(super) fn parse_period(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let (_, size) = PERIOD_UNITS.iter().find(|(name, _)| *name == unit.trim())?;
    let millis = u128::from(number) * size;
    let seconds = u64::try_from(millis / 1_000).ok()?;
    let nanos = u32::try_from(millis % 1_000).ok()? * 1_000_000;
    let duration = Duration::new(seconds, nanos);
    (!duration.is_zero()).then_some(duration)
}

impl Unit {
    /// `duration` as a rules file writes a `period` or `max_delay`: in whole milliseconds,
    /// the rules' smallest unit (a fraction of one is dropped), with the largest unit that
    /// divides it: `d`, `h`, `m`, `s` or `ms`.
    ///
    /// The rules read the text back as the same whole milliseconds, for any duration from
    /// 1 ms to `u64::MAX` ms. Below 1 ms it is `0ms`, which they refuse like any zero period.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::rules::{Rules, Unit};
    ///
    /// assert_eq!(Unit::format_period(Duration::from_secs(3_600)), "1h");
    /// assert_eq!(Unit::format_period(Duration::from_secs(90)), "90s");
    /// assert_eq!(Unit::format_period(Duration::from_micros(1_500)), "1ms");
    ///
    /// let period = Duration::from_millis(2_500);
    /// let rules = Rules::from_yaml(&format!(
    ///     r#"
    /// domain: d
    /// descriptors:
    ///   - key: method
    ///     rate_limit: {{ period: {}, requests_per_unit: 5 }}
    /// "#,
    ///     Unit::format_period(period),
    /// ))?;
    /// assert_eq!(rules.limits()[0].quota().map(|quota| quota.period()), Some(period));
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    pub fn format_period(duration: Duration) -> String {
        let millis = duration.as_millis();
        let (unit, size) = PERIOD_UNITS
            .into_iter()
            .find(|(_, size)| millis >= *size && millis.is_multiple_of(*size))
            .unwrap_or(("ms", 1));
        format!("{}{unit}", millis / size)
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_period, Unit};
    use std::time::Duration;

    #[test]
    fn periods_parse_with_units_and_reject_zero() {
        assert_eq!(parse_period("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_period("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_period("2h"), Some(Duration::from_secs(7_200)));
        assert_eq!(parse_period("0s"), None);
        assert_eq!(parse_period("s"), None);
        assert_eq!(parse_period("10 fortnights"), None);
        assert_eq!(parse_period("99999999999999999999d"), None);
    }

    #[test]
    fn periods_are_written_in_the_largest_exact_unit() {
        assert_eq!(Unit::format_period(Duration::from_secs(60)), "1m");
        assert_eq!(Unit::format_period(Duration::from_secs(30)), "30s");
        assert_eq!(Unit::format_period(Duration::from_secs(90)), "90s");
        assert_eq!(Unit::format_period(Duration::from_millis(500)), "500ms");
        assert_eq!(Unit::format_period(Duration::from_secs(7 * 86_400)), "7d");
    }

    #[test]
    fn written_periods_read_back_as_the_same_whole_milliseconds() {
        let periods = [
            Duration::from_millis(1),
            Duration::from_millis(1_001),
            Duration::from_secs(1),
            Duration::from_secs(59),
            Duration::from_secs(3_600),
            Duration::from_secs(5_400),
            Duration::from_secs(86_400),
            Duration::from_secs(100 * 365 * 86_400),
            Duration::from_millis(u64::MAX),
            Duration::from_secs(u64::MAX / 86_400 * 86_400),
        ];
        for period in periods {
            let text = Unit::format_period(period);
            assert_eq!(parse_period(&text), Some(period), "{text}");
        }
        let fraction = Duration::from_micros(2_500);
        let text = Unit::format_period(fraction);
        assert_eq!(
            parse_period(&text),
            Some(Duration::from_millis(2)),
            "{text}"
        );
    }

    #[test]
    fn periods_below_a_millisecond_are_written_as_zero_which_is_refused() {
        for period in [
            Duration::ZERO,
            Duration::from_nanos(3),
            Duration::from_micros(999),
        ] {
            assert_eq!(Unit::format_period(period), "0ms");
        }
        assert_eq!(parse_period("0ms"), None);
    }
}
