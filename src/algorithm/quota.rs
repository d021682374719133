use super::divisor::Divisor;
use super::Calendar;
use crate::clock::Nanos;
use std::fmt;
use std::time::Duration;

/// How much a limit allows: `requests` per `period`, with bursts of up to `burst`.
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::Quota;
///
/// let quota = Quota::new(20, Duration::from_secs(1))?.with_burst(40);
/// assert_eq!(quota.requests_per_period(), 20);
/// assert_eq!(quota.burst(), 40);
/// # Ok::<(), tollgate::algorithm::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    // The numbers the algorithms divide by, each with its reciprocal taken once here: a
    // division costs as much as the rest of a decision.
    requests: Divisor,
    /// In nanoseconds.
    period: Divisor,
    /// `period / requests` rounded up, in nanoseconds (0 for 0 requests per period).
    interval: Divisor,
    /// See [`Quota::token_bucket_fits_a_timestamp`].
    token_bucket_fits_a_timestamp: bool,
    burst: u64,
    queue: u64,
    max_delay: Option<Duration>,
    shaping: bool,
    /// Windows of the calendar instead of multiples of the period (a fixed window's).
    calendar: Option<Calendar>,
}

/// The longest an empty token bucket may take to refill, in nanoseconds, for it to be kept as
/// GCRA's one timestamp: 2⁶² ns, about 146 years. The timestamp is when the bucket is full
/// again, in nanoseconds since the Unix epoch; with a refill this short it fits in 64 bits
/// from any time before the year 2400, so GCRA never refuses a booking for running past the
/// last representable nanosecond where the token bucket would admit it.
const MAX_TIMESTAMP_REFILL: u64 = 1 << 62;

/// Whether a token bucket of `burst` refilled at `requests` per `period_nanos` fits a timestamp
/// (see [`Quota::token_bucket_fits_a_timestamp`]).
fn token_bucket_fits_a_timestamp(requests: u64, period_nanos: u64, burst: u64) -> bool {
    // Beyond `i64::MAX` the token bucket's own count saturates, and GCRA's does not.
    let counts_fit = requests <= i64::MAX as u64 && burst <= i64::MAX as u64;
    requests > 0
        && counts_fit
        && period_nanos.is_multiple_of(requests)
        && (period_nanos / requests)
            .checked_mul(burst)
            .is_some_and(|refill| refill <= MAX_TIMESTAMP_REFILL)
}

impl Quota {
    /// `requests` per `period`; the burst defaults to `requests`.
    ///
    /// 0 requests per period deny every request.
    ///
    /// # Errors
    ///
    /// [`QuotaError`] when `period` is zero or longer than `u64::MAX` nanoseconds (about 584
    /// years). The rules refuse such periods with an error of their own before getting here.
    pub fn new(requests: u64, period: Duration) -> Result<Self, QuotaError> {
        let period_nanos =
            u64::try_from(period.as_nanos()).map_err(|_| QuotaError::PeriodTooLong)?;
        if period_nanos == 0 {
            return Err(QuotaError::ZeroPeriod);
        }
        let interval = if requests == 0 {
            0
        } else {
            period_nanos.div_ceil(requests)
        };
        Ok(Quota {
            requests: Divisor::new(requests),
            period: Divisor::new(period_nanos),
            interval: Divisor::new(interval),
            token_bucket_fits_a_timestamp: token_bucket_fits_a_timestamp(
                requests,
                period_nanos,
                requests,
            ),
            burst: requests,
            queue: 0,
            max_delay: None,
            shaping: true,
            calendar: None,
        })
    }

    /// The same quota with room for bursts of `burst` requests (token bucket).
    #[must_use]
    pub fn with_burst(mut self, burst: u64) -> Self {
        self.burst = burst;
        self.token_bucket_fits_a_timestamp =
            token_bucket_fits_a_timestamp(self.requests.get(), self.period.get(), burst);
        self
    }

    /// The same quota with `queue` waiting places (leaky bucket).
    #[must_use]
    pub fn with_queue(mut self, queue: u64) -> Self {
        self.queue = queue;
        self
    }

    /// The same quota, denying requests that would wait longer than `max_delay` (leaky bucket).
    #[must_use]
    pub fn with_max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = Some(max_delay);
        self
    }

    /// The same quota counted in windows of `calendar` (a fixed window's): each day, week,
    /// month or year of a time zone rather than each multiple of the period since the Unix
    /// epoch. The period stays the nominal length of a window (a month's is 30 days), which
    /// only the other algorithms read.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Calendar, CalendarUnit, Quota};
    ///
    /// let month = Calendar::new(CalendarUnit::Month, "Europe/Paris")?;
    /// let quota = Quota::new(10_000, Duration::from_secs(30 * 86_400))?.with_calendar(month);
    /// assert_eq!(quota.calendar(), Some(month));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_calendar(mut self, calendar: Calendar) -> Self {
        self.calendar = Some(calendar);
        self
    }

    /// The calendar whose windows a fixed window counts in, if any.
    pub fn calendar(&self) -> Option<Calendar> {
        self.calendar
    }

    /// The number of the fixed window that `now` falls in.
    pub(crate) fn window_at(&self, now: Nanos) -> u64 {
        match &self.calendar {
            None => self.period.div_u64(now.as_u64()),
            Some(calendar) => calendar.window(now),
        }
    }

    /// When the fixed window numbered `window` ends.
    pub(crate) fn window_end(&self, window: u64) -> Nanos {
        match &self.calendar {
            None => Nanos::new(window.saturating_add(1).saturating_mul(self.period.get())),
            Some(calendar) => calendar.end(window),
        }
    }

    /// The same quota, admitting queued requests at once instead of delaying them (leaky
    /// bucket policing).
    #[must_use]
    pub fn with_policing(mut self) -> Self {
        self.shaping = false;
        self
    }

    /// Requests allowed per period.
    pub fn requests_per_period(&self) -> u64 {
        self.requests.get()
    }

    /// The period.
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period.get())
    }

    /// The period in nanoseconds.
    pub fn period_nanos(&self) -> u64 {
        self.period.get()
    }

    /// The requests per period, to divide by.
    pub(crate) fn requests_divisor(&self) -> Divisor {
        self.requests
    }

    /// The period in nanoseconds, to divide by.
    pub(crate) fn period_divisor(&self) -> Divisor {
        self.period
    }

    /// The emission interval, `period / requests` rounded up to a whole nanosecond (so the rate
    /// is never exceeded); `None` for 0 requests per period.
    pub(crate) fn emission_interval(&self) -> Option<Divisor> {
        (self.requests.get() > 0).then_some(self.interval)
    }

    /// Whether a token bucket under this quota gives the same answers kept as GCRA's one
    /// timestamp (see `Algorithm::packed`): the emission interval is exactly `period /
    /// requests`, with no rounding (100 per second, 60 per minute, but not 7 per minute); an
    /// empty bucket refills within [`MAX_TIMESTAMP_REFILL`]; and the requests and the burst are
    /// token counts the bucket keeps without saturating (at most `i64::MAX`, as the rules
    /// compiler requires). Never for 0 requests per period.
    pub(crate) fn token_bucket_fits_a_timestamp(&self) -> bool {
        self.token_bucket_fits_a_timestamp
    }

    /// The most requests that may arrive at once (token bucket capacity, GCRA burst).
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// Waiting places in a leaky bucket's queue.
    pub fn queue(&self) -> u64 {
        self.queue
    }

    /// The longest a request may wait in a leaky bucket's queue, if bounded.
    pub fn max_delay(&self) -> Option<Duration> {
        self.max_delay
    }

    /// Whether a leaky bucket delays queued requests (shaping) rather than admitting them at
    /// once (policing).
    pub fn is_shaping(&self) -> bool {
        self.shaping
    }
}

/// Why [`Quota::new`] refused a period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuotaError {
    /// The period is zero: no rate has a zero period.
    ZeroPeriod,
    /// The period is longer than `u64::MAX` nanoseconds (about 584 years).
    PeriodTooLong,
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuotaError::ZeroPeriod => "a quota's period must not be zero",
            QuotaError::PeriodTooLong => {
                "a quota's period must be at most u64::MAX nanoseconds (about 584 years)"
            }
        })
    }
}

impl std::error::Error for QuotaError {}

#[cfg(test)]
mod tests {
    use super::{Quota, QuotaError};
    use std::error::Error;
    use std::time::Duration;

    #[test]
    fn a_quota_error_is_an_error_that_says_why() {
        let error: &dyn Error = &QuotaError::ZeroPeriod;
        assert_eq!(error.to_string(), "a quota's period must not be zero");
        assert!(QuotaError::PeriodTooLong.to_string().contains("584 years"));
    }

    #[test]
    fn periods_that_no_quota_can_have_are_errors() {
        assert_eq!(Quota::new(1, Duration::ZERO), Err(QuotaError::ZeroPeriod));
        assert_eq!(
            Quota::new(1, Duration::from_secs(u64::MAX)),
            Err(QuotaError::PeriodTooLong)
        );
        let longest = Duration::from_nanos(u64::MAX);
        assert_eq!(Quota::new(1, longest).map(|q| q.period()), Ok(longest));
    }
}
