//! Calendar quotas: `calendar: true` counts a fixed window's requests in the days, weeks,
//! months or years of a time zone, on a manual clock, in every store that counts exactly.

mod common;
#[path = "common/rules.rs"]
mod rules_common;

use rules_common::rate_limit_errors;

use chrono::DateTime;
use std::time::Duration;
use tollgate::clock::{ManualClock, Nanos};
use tollgate::rules::Rules;
use tollgate::store::Store;
use tollgate::Limiter;

/// `limit` a calendar `unit` per `user` in `zone`.
fn per_user(limit: u64, unit: &str, zone: &str) -> Rules {
    Rules::from_yaml(&format!(
        "domain: plans\nsources: {{ user: {{ header: x-user }} }}\ndescriptors:\n  - key: user\n    rate_limit: {{ unit: {unit}, requests_per_unit: {limit}, calendar: true, time_zone: {zone} }}\n"
    ))
    .expect("valid rules")
}

/// The instant of `rfc3339`.
fn at(rfc3339: &str) -> Nanos {
    let instant = DateTime::parse_from_rfc3339(rfc3339).expect("an RFC 3339 time");
    Nanos::new(u64::try_from(instant.timestamp_nanos_opt().expect("in range")).expect("after 1970"))
}

/// How many of `attempts` requests of `user` are admitted, and the last one's retry_after.
async fn admitted<St: Store>(
    limiter: &Limiter<St>,
    user: &str,
    attempts: usize,
) -> (usize, Duration) {
    let mut admitted = 0;
    let mut retry_after = Duration::ZERO;
    for _ in 0..attempts {
        let verdict = limiter.check(&[("user", user)], 1).await;
        admitted += usize::from(verdict.is_allowed());
        retry_after = verdict.decision().map_or(Duration::ZERO, |d| d.retry_after);
    }
    (admitted, retry_after)
}

/// A month in Paris on the store `make` builds, from 30 minutes before its local end
/// (`month_end`, midnight in Paris): used up, refused until midnight in Paris exactly, then a
/// new month.
async fn a_month_ends_at_local_midnight<St: Store>(
    month_end: &str,
    make: impl AsyncFn(ManualClock) -> St,
) {
    let end = at(month_end);
    let clock = ManualClock::starting_at(Nanos::new(end.as_u64() - 30 * 60 * 1_000_000_000));
    let limiter = Limiter::with_store(
        per_user(10, "month", "Europe/Paris"),
        make(clock.clone()).await,
    );
    let (count, retry_after) = admitted(&limiter, "ann", 11).await;
    assert_eq!(count, 10);
    assert_eq!(
        retry_after,
        Duration::from_secs(30 * 60),
        "until midnight in Paris"
    );
    clock.advance(Duration::from_secs(30 * 60 - 1));
    assert_eq!(admitted(&limiter, "ann", 1).await.0, 0, "a second before");
    clock.advance(Duration::from_secs(1));
    assert_eq!(admitted(&limiter, "ann", 11).await.0, 10, "a new month");
}

#[tokio::test]
async fn memory_counts_calendar_months_and_days_across_dst() {
    let memory = async |clock| tollgate::store::MemoryStore::with_clock(clock);
    // January 2027 has 31 days; February 28; Paris is an hour ahead of UTC in winter.
    a_month_ends_at_local_midnight("2027-02-01T00:00:00+01:00", memory).await;
    a_month_ends_at_local_midnight("2027-03-01T00:00:00+01:00", memory).await;
    // Summer time: two hours ahead.
    a_month_ends_at_local_midnight("2027-07-01T00:00:00+02:00", memory).await;

    // The day the clocks go forward in Paris lasts 23 hours.
    let clock = ManualClock::starting_at(at("2026-03-29T00:30:00+01:00"));
    let limiter = Limiter::with_store(
        per_user(3, "day", "Europe/Paris"),
        memory(clock.clone()).await,
    );
    let (count, retry_after) = admitted(&limiter, "ann", 4).await;
    assert_eq!(count, 3);
    assert_eq!(
        retry_after,
        Duration::from_secs(22 * 3600 + 30 * 60),
        "23 hours, less 30 minutes"
    );
    clock.set(at("2026-03-30T00:00:00+02:00"));
    assert_eq!(admitted(&limiter, "ann", 4).await.0, 3, "the next day");
}

#[tokio::test]
async fn calendar_weeks_start_on_monday_in_their_zone() {
    // Sunday 23:00 in New York is Monday 04:00 UTC: still last week there.
    let clock = ManualClock::starting_at(at("2026-11-29T23:00:00-05:00"));
    let limiter = Limiter::with_store(
        per_user(2, "week", "America/New_York"),
        tollgate::store::MemoryStore::with_clock(clock.clone()),
    );
    assert_eq!(
        admitted(&limiter, "ann", 3).await,
        (2, Duration::from_secs(3600))
    );
    clock.advance(Duration::from_secs(3600));
    assert_eq!(admitted(&limiter, "ann", 3).await.0, 2);
}

#[test]
fn calendars_that_mean_nothing_are_refused() {
    let cases = [
        (
            "unit: month, requests_per_unit: 9, calendar: true, algorithm: token_bucket",
            "calendar windows are fixed windows: token_bucket does not count in windows",
        ),
        (
            "unit: minute, requests_per_unit: 9, calendar: true",
            "not minutes",
        ),
        (
            "period: 30d, requests_per_unit: 9, calendar: true",
            "not `period`",
        ),
        (
            "unit: day, unit_multiplier: 2, requests_per_unit: 9, calendar: true",
            "no unit_multiplier",
        ),
        (
            "unit: day, requests_per_unit: 9, time_zone: UTC",
            "add `calendar: true`",
        ),
        (
            "unit: day, requests_per_unit: 9, calendar: true, time_zone: Mars/Olympus",
            "`Mars/Olympus` is not a time zone",
        ),
        (
            "unit: day, requests_per_unit: 9, calendar: true, sync_every: 100ms",
            "calendar windows, which are decided exactly",
        ),
        ("unlimited: true, calendar: true", "takes no other setting"),
    ];
    for (rate_limit, expected) in cases {
        let errors = rate_limit_errors(rate_limit);
        assert!(errors.contains(expected), "{rate_limit}: {errors}");
    }
}

#[cfg(feature = "redis")]
mod redis {
    use super::*;
    use common::redis_server::{RedisCluster, RedisServer};

    // A test clock for Redis stays below 2^52 ns (52 days after the epoch): the month is
    // January 1970, when Paris was an hour ahead of UTC.

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_counts_calendar_months() {
        let server = RedisServer::start();
        let store = async |clock| server.store_with_clock(clock).await;
        a_month_ends_at_local_midnight("1970-02-01T00:00:00+01:00", store).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redis_cluster_counts_calendar_months() {
        let cluster = RedisCluster::start(3);
        let store = async |clock| cluster.store_with_clock(clock).await;
        a_month_ends_at_local_midnight("1970-02-01T00:00:00+01:00", store).await;
    }
}
