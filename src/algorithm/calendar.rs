//! Calendar windows: a fixed window that is a day, a week, a month or a year of the calendar
//! in a time zone, rather than a multiple of a period since the Unix epoch.

use crate::clock::Nanos;
use chrono::{DateTime, Datelike, Duration as Span, NaiveDate, TimeZone};
use chrono_tz::Tz;
use std::fmt;

/// A unit of the calendar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CalendarUnit {
    /// From midnight to midnight (23 or 25 hours on the days the clocks change).
    Day,
    /// From Monday's midnight to the next (ISO 8601 weeks).
    Week,
    /// From the 1st's midnight to the next month's (28 to 31 days).
    Month,
    /// From the 1st of January's midnight to the next year's.
    Year,
}

impl CalendarUnit {
    /// The unit as the rules file spells it: `day`, `week`, `month` or `year`.
    pub fn name(self) -> &'static str {
        match self {
            CalendarUnit::Day => "day",
            CalendarUnit::Week => "week",
            CalendarUnit::Month => "month",
            CalendarUnit::Year => "year",
        }
    }
}

/// Windows on calendar boundaries: each [`CalendarUnit`] of the calendar in a time zone, its
/// bounds at local midnight, across daylight-saving changes and months of 28 to 31 days.
///
/// ```
/// use tollgate::algorithm::{Calendar, CalendarUnit};
///
/// let paris = Calendar::new(CalendarUnit::Month, "Europe/Paris")?;
/// assert_eq!(paris.time_zone(), "Europe/Paris");
/// assert!(Calendar::new(CalendarUnit::Day, "Mars/Olympus").is_err());
/// # Ok::<(), tollgate::algorithm::UnknownTimeZone>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Calendar {
    unit: CalendarUnit,
    zone: Tz,
}

/// A time zone name that the IANA time zone database does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownTimeZone(String);

impl fmt::Display for UnknownTimeZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a time zone of the IANA database (e.g. UTC, Europe/Paris, America/New_York)",
            self.0
        )
    }
}

impl std::error::Error for UnknownTimeZone {}

/// 1970-01-01, day 0 of the windows' count.
const EPOCH: NaiveDate = NaiveDate::from_ymd_opt(1970, 1, 1).expect("a date");

impl Calendar {
    /// Windows of `unit` in the time zone named `zone` (`UTC`, `Europe/Paris`).
    ///
    /// # Errors
    ///
    /// When `zone` is not a time zone of the IANA database.
    pub fn new(unit: CalendarUnit, zone: &str) -> Result<Self, UnknownTimeZone> {
        let zone = zone
            .parse::<Tz>()
            .map_err(|_| UnknownTimeZone(zone.to_owned()))?;
        Ok(Calendar { unit, zone })
    }

    /// The unit of the windows.
    pub fn unit(&self) -> CalendarUnit {
        self.unit
    }

    /// The name of the time zone.
    pub fn time_zone(&self) -> &'static str {
        self.zone.name()
    }

    /// The number of the window `now` falls in: the units of the calendar since the one of
    /// 1970-01-01 in the time zone.
    pub(crate) fn window(&self, now: Nanos) -> u64 {
        let local = self
            .zone
            .timestamp_nanos(i64::try_from(now.as_u64()).unwrap_or(i64::MAX));
        let date = local.date_naive();
        let days = (date - EPOCH).num_days();
        let window = match self.unit {
            CalendarUnit::Day => days,
            // 1970-01-01 was a Thursday: the week of the Monday before is week 0.
            CalendarUnit::Week => (days + 3).div_euclid(7),
            CalendarUnit::Month => i64::from(date.year() - 1970) * 12 + i64::from(date.month0()),
            CalendarUnit::Year => i64::from(date.year() - 1970),
        };
        u64::try_from(window).unwrap_or(0)
    }

    /// When the window numbered `window` starts: its first day's midnight in the time zone
    /// (or the first instant of that day, where the clocks skip midnight).
    pub(crate) fn start(&self, window: u64) -> Nanos {
        let window = i64::try_from(window).unwrap_or(i64::MAX);
        let first_day = match self.unit {
            CalendarUnit::Day => EPOCH.checked_add_signed(Span::days(window)),
            CalendarUnit::Week => EPOCH.checked_add_signed(Span::days(window * 7 - 3)),
            CalendarUnit::Month => {
                let year = i32::try_from(1970 + window / 12).ok();
                let month = u32::try_from(window % 12 + 1).ok();
                year.zip(month)
                    .and_then(|(year, month)| NaiveDate::from_ymd_opt(year, month, 1))
            }
            CalendarUnit::Year => i32::try_from(1970 + window)
                .ok()
                .and_then(|year| NaiveDate::from_ymd_opt(year, 1, 1)),
        };
        let Some(first_day) = first_day.and_then(|day| day.and_hms_opt(0, 0, 0)) else {
            return Nanos::new(u64::MAX);
        };
        // Midnight, or, where the clocks skip it, the first quarter hour after that exists.
        let start: Option<DateTime<Tz>> = (0..=16).find_map(|quarter| {
            let local = first_day + Span::minutes(15 * quarter);
            self.zone.from_local_datetime(&local).earliest()
        });
        start
            .and_then(|start| start.timestamp_nanos_opt())
            .and_then(|nanos| u64::try_from(nanos).ok())
            .map_or(Nanos::new(u64::MAX), Nanos::new)
    }

    /// When the window numbered `window` ends: the next one's start.
    pub(crate) fn end(&self, window: u64) -> Nanos {
        self.start(window.saturating_add(1))
    }
}

impl fmt::Debug for Calendar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Calendar")
            .field("unit", &self.unit)
            .field("time_zone", &self.time_zone())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The instant of `rfc3339`.
    fn at(rfc3339: &str) -> Nanos {
        let instant = DateTime::parse_from_rfc3339(rfc3339).expect("an RFC 3339 time");
        Nanos::new(u64::try_from(instant.timestamp_nanos_opt().expect("in range")).unwrap())
    }

    #[test]
    fn an_unknown_time_zone_is_an_error_that_names_it() {
        let error = Calendar::new(CalendarUnit::Day, "Mars/Olympus").expect_err("no such zone");
        let error: &dyn std::error::Error = &error;
        assert!(
            error
                .to_string()
                .starts_with("`Mars/Olympus` is not a time zone"),
            "{error}"
        );
    }

    #[test]
    fn a_month_in_paris_ends_at_its_local_midnight_whatever_its_length() {
        let month = Calendar::new(CalendarUnit::Month, "Europe/Paris").unwrap();
        let january = month.window(at("2027-01-31T22:59:59+00:00"));
        let february = month.window(at("2027-01-31T23:00:00+00:00"));
        assert_eq!(
            february,
            january + 1,
            "midnight in Paris is 23:00 UTC in winter"
        );
        assert_eq!(month.end(january), at("2027-02-01T00:00:00+01:00"));
        // February 2027 has 28 days; March's midnight is still in winter time.
        assert_eq!(month.end(february), at("2027-03-01T00:00:00+01:00"));
        // April starts in summer time.
        assert_eq!(month.end(february + 1), at("2027-04-01T00:00:00+02:00"));
    }

    #[test]
    fn days_across_daylight_saving_changes_last_23_and_25_hours() {
        let day = Calendar::new(CalendarUnit::Day, "Europe/Paris").unwrap();
        let spring = day.window(at("2026-03-29T12:00:00+02:00"));
        let length = |window| day.end(window).as_u64() - day.start(window).as_u64();
        assert_eq!(length(spring), 23 * 3_600_000_000_000);
        let autumn = day.window(at("2026-10-25T12:00:00+01:00"));
        assert_eq!(length(autumn), 25 * 3_600_000_000_000);
        assert_eq!(length(autumn + 1), 24 * 3_600_000_000_000);
    }

    #[test]
    fn weeks_start_on_monday_and_years_on_the_first_of_january() {
        let week = Calendar::new(CalendarUnit::Week, "UTC").unwrap();
        // 2026-11-29 is a Sunday; the 30th a Monday.
        let sunday = week.window(at("2026-11-29T23:59:59Z"));
        assert_eq!(week.window(at("2026-11-30T00:00:00Z")), sunday + 1);
        assert_eq!(week.start(sunday + 1), at("2026-11-30T00:00:00Z"));
        let year = Calendar::new(CalendarUnit::Year, "America/New_York").unwrap();
        let this = year.window(at("2026-12-31T23:59:59-05:00"));
        assert_eq!(year.end(this), at("2027-01-01T00:00:00-05:00"));
    }

    #[test]
    fn a_day_whose_midnight_the_clocks_skip_starts_when_it_exists() {
        // Chile moved its clocks from 00:00 to 01:00 on 2026-09-06.
        let day = Calendar::new(CalendarUnit::Day, "America/Santiago").unwrap();
        let window = day.window(at("2026-09-06T12:00:00-03:00"));
        assert_eq!(day.start(window), at("2026-09-06T01:00:00-03:00"));
    }
}
