//! Tests against a store whose windows follow the wall clock (Redis's `TIME`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Waits, if needed, until the current hour has more than `margin` left: fixed and sliding
/// windows are aligned to the clock, and a test that crosses an edge sees a new window.
pub async fn away_from_hour_edge(margin: Duration) {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    let into_hour = Duration::from_millis(
        u64::try_from(since_epoch.as_millis() % 3_600_000).expect("less than an hour"),
    );
    let left = Duration::from_secs(3_600) - into_hour;
    if left < margin {
        tokio::time::sleep(left + Duration::from_millis(100)).await;
    }
}

/// Waits, if needed, until the current window of `period` (aligned to the epoch, as Redis's
/// windows are) has more than `margin` left.
pub async fn away_from_edge(period: Duration, margin: Duration) {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    let into = since_epoch.as_nanos() % period.as_nanos();
    let left = period - Duration::from_nanos(u64::try_from(into).expect("within a period"));
    if left < margin {
        tokio::time::sleep(left + Duration::from_millis(100)).await;
    }
}
