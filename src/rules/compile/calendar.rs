//! `calendar: true` and `time_zone`: a fixed window's windows on calendar boundaries.

use super::Compiler;
use crate::algorithm::{Algorithm, Calendar, CalendarUnit};
use crate::rules::file::RawRateLimit;
use crate::rules::Unit;

impl Compiler {
    /// The calendar the rate limit `raw` at `path`, decided by `algorithm`, counts in:
    /// `Some(None)` when it counts in periods, `None` when its settings are wrong (recorded).
    pub(super) fn calendar(
        &mut self,
        raw: &RawRateLimit,
        algorithm: Algorithm,
        path: &str,
    ) -> Option<Option<Calendar>> {
        let on = raw.calendar.as_ref().filter(|calendar| calendar.value);
        let Some(on) = on else {
            if let Some(zone) = &raw.time_zone {
                let message = "a time zone places calendar windows: add `calendar: true`";
                self.error(zone.referenced, format!("{path}.time_zone"), message);
                return None;
            }
            return Some(None);
        };
        let field = format!("{path}.calendar");
        let unit = match raw.unit.as_ref().map(|unit| unit.value) {
            Some(Unit::Day) => CalendarUnit::Day,
            Some(Unit::Week) => CalendarUnit::Week,
            Some(Unit::Month) => CalendarUnit::Month,
            Some(Unit::Year) => CalendarUnit::Year,
            Some(unit) => {
                let message = format!(
                    "calendar windows are days, weeks, months or years, not {}s",
                    unit.name()
                );
                self.error(on.referenced, field, message);
                return None;
            }
            None => {
                let message =
                    "calendar windows follow `unit` (day, week, month or year), not `period`";
                self.error(on.referenced, field, message);
                return None;
            }
        };
        if raw.unit_multiplier.as_ref().is_some_and(|m| m.value != 1) {
            let message = "a calendar window is one day, week, month or year: no unit_multiplier";
            self.error(on.referenced, field, message);
            return None;
        }
        if !algorithm.follows_calendar() {
            let message = format!(
                "calendar windows are fixed windows: {algorithm} does not count in windows (set `algorithm: fixed_window`)"
            );
            self.error(on.referenced, field, message);
            return None;
        }
        let zone = raw.time_zone.as_ref();
        match Calendar::new(unit, zone.map_or("UTC", |zone| zone.value.as_str())) {
            Ok(calendar) => Some(Some(calendar)),
            Err(error) => {
                let location = zone.map_or(on.referenced, |zone| zone.referenced);
                self.error(location, format!("{path}.time_zone"), error.to_string());
                None
            }
        }
    }
}
