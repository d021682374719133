use std::time::Duration;

/// How much a limit allows: `limit` requests per `period`, with bursts of up to `burst`.
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::Quota;
///
/// let quota = Quota::new(20, Duration::from_secs(1)).with_burst(40);
/// assert_eq!(quota.limit(), 20);
/// assert_eq!(quota.burst(), 40);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    limit: u64,
    period_nanos: u64,
    burst: u64,
}

impl Quota {
    /// `limit` requests per `period`; the burst defaults to `limit`.
    ///
    /// A `limit` of 0 denies every request.
    ///
    /// # Panics
    ///
    /// When `period` is zero or longer than `u64::MAX` nanoseconds (about 584 years).
    /// The rules compiler rejects such periods with an error before getting here.
    pub fn new(limit: u64, period: Duration) -> Self {
        let period_nanos = u64::try_from(period.as_nanos()).expect("period fits in u64 nanos");
        assert!(period_nanos > 0, "a quota's period must not be zero");
        Quota {
            limit,
            period_nanos,
            burst: limit,
        }
    }

    /// The same quota with room for bursts of `burst` requests (token bucket).
    #[must_use]
    pub fn with_burst(mut self, burst: u64) -> Self {
        self.burst = burst;
        self
    }

    /// Requests allowed per period.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The period.
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period_nanos)
    }

    /// The period in nanoseconds.
    pub fn period_nanos(&self) -> u64 {
        self.period_nanos
    }

    /// The most requests that may arrive at once (token bucket capacity).
    pub fn burst(&self) -> u64 {
        self.burst
    }
}
