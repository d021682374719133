//! What tollgate logs: a debug span per decision, and denials (warn) and shadow denials
//! (info) at most once a second per limit, with the count of those left out.
//!
//! Events are captured by a `tracing-subscriber` fmt layer writing to memory, set as the
//! default subscriber of the test's thread (the tests run on a current-thread runtime).

mod common;

use common::stores::DownStore;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tollgate::clock::ManualClock;
use tollgate::rules::Rules;
use tollgate::store::MemoryStore;
use tollgate::{Denial, Limiter};
use tracing::level_filters::LevelFilter;

/// The formatted log, shared with the subscriber.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl Log {
    fn lines(&self) -> Vec<String> {
        let bytes = self.0.lock().expect("not poisoned");
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The lines of events at `level` whose message contains `message`.
    fn events(&self, level: &str, message: &str) -> Vec<String> {
        self.lines()
            .into_iter()
            .filter(|line| line.contains(level) && line.contains(message))
            .collect()
    }
}

impl io::Write for Log {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .expect("not poisoned")
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Captures the events at `level` and above until the guard is dropped.
fn capture(level: LevelFilter) -> (Log, tracing::subscriber::DefaultGuard) {
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(move || writer.clone())
        .without_time()
        .finish();
    (log, tracing::subscriber::set_default(subscriber))
}

/// A limiter on a manual clock: its decisions and its log throttle move only when told.
fn limiter(yaml: &str) -> (Limiter<MemoryStore<ManualClock>>, ManualClock) {
    let rules = Rules::from_yaml(yaml).expect("valid rules");
    let clock = ManualClock::new();
    (
        Limiter::with_store(rules, MemoryStore::with_clock(clock.clone())),
        clock,
    )
}

const ONE_A_MINUTE: &str = r#"
domain: logs
sources: { tenant: { header: x-tenant } }
descriptors:
  - key: tenant
    rate_limit: { unit: minute, requests_per_unit: 1, name: per_tenant }
"#;

#[tokio::test]
async fn a_flood_of_denials_logs_one_warning_a_second_with_the_count_left_out() {
    let (log, _guard) = capture(LevelFilter::INFO);
    // A limit of one a minute, so that it stays full while the clock moves a second.
    let (limiter, clock) = limiter(ONE_A_MINUTE);
    let tenant = [("tenant", "acme")];
    assert!(limiter.check(&tenant, 1).await.is_allowed());
    for _ in 0..1000 {
        assert!(!limiter.check(&tenant, 1).await.is_allowed());
    }
    let warnings = log.events("WARN", "rate limited");
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(warnings[0].contains("domain=\"logs\""), "{}", warnings[0]);
    assert!(
        warnings[0].contains("limit=\"per_tenant\""),
        "{}",
        warnings[0]
    );
    assert!(warnings[0].contains("suppressed=0"), "{}", warnings[0]);
    // The wait as the client is told it: the minute's window ends in 60 seconds.
    assert!(
        warnings[0].contains("retry_after_ms=60000"),
        "{}",
        warnings[0]
    );

    // The first denial was logged, the 999 after it were left out.
    clock.advance(Duration::from_secs(1));
    assert!(!limiter.check(&tenant, 1).await.is_allowed());
    let warnings = log.events("WARN", "rate limited");
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert!(warnings[1].contains("suppressed=999"), "{}", warnings[1]);
}

#[tokio::test]
async fn shadow_denials_are_throttled_the_same_way() {
    let (log, _guard) = capture(LevelFilter::INFO);
    let (limiter, clock) = limiter(&ONE_A_MINUTE.replace(
        "  - key: tenant\n",
        "  - key: tenant\n    shadow_mode: true\n",
    ));
    let tenant = [("tenant", "acme")];
    for _ in 0..1000 {
        assert!(limiter.check(&tenant, 1).await.is_allowed());
    }
    let message = "shadow mode: this limit would deny the request";
    let events = log.events("INFO", message);
    assert_eq!(events.len(), 1, "{events:#?}");
    assert!(events[0].contains("suppressed=0"), "{}", events[0]);

    clock.advance(Duration::from_secs(1));
    assert!(limiter.check(&tenant, 1).await.is_allowed());
    let events = log.events("INFO", message);
    assert_eq!(events.len(), 2, "{events:#?}");
    assert!(events[1].contains("suppressed=998"), "{}", events[1]);
    assert!(
        log.events("WARN", "").is_empty(),
        "shadow denials are not denials"
    );
}

#[tokio::test]
async fn events_carry_the_decision_span_with_the_limits_that_applied() {
    let (log, _guard) = capture(LevelFilter::DEBUG);
    let (limiter, _) = limiter(
        r#"
domain: spans
sources: { tenant: { header: x-tenant }, user: { header: x-user } }
descriptors:
  - key: tenant
    rate_limit: { unit: minute, requests_per_unit: 1, name: per_tenant }
    descriptors:
      - key: user
        rate_limit: { unit: minute, requests_per_unit: 5 }
"#,
    );
    let request = [("tenant", "acme"), ("user", "alice")];
    assert!(limiter.check(&request, 1).await.is_allowed());
    assert!(!limiter.check(&request, 1).await.is_allowed());
    let warning = log.events("WARN", "rate limited").pop().expect("a warning");
    assert!(
        warning.contains("rate_limit{domain=\"spans\" limits=per_tenant, tenant/user}"),
        "{warning}"
    );
}

#[tokio::test]
async fn nothing_is_logged_for_admitted_requests_above_debug() {
    let (log, _guard) = capture(LevelFilter::INFO);
    let (limiter, _) = limiter(ONE_A_MINUTE);
    for tenant in ["a", "b", "c"] {
        assert!(limiter.check(&[("tenant", tenant)], 1).await.is_allowed());
    }
    assert!(log.lines().is_empty(), "{:#?}", log.lines());
}

const CLOSED_ON_STORE_ERROR: &str = r#"
domain: closed
defaults: { on_store_error: deny }
sources: { tenant: { header: x-tenant } }
descriptors:
  - key: tenant
    rate_limit: { unit: minute, requests_per_unit: 100, name: per_tenant }
"#;

#[tokio::test]
async fn a_denial_because_the_store_failed_is_not_logged_as_over_the_limit() {
    let (log, _guard) = capture(LevelFilter::INFO);
    let rules = Rules::from_yaml(CLOSED_ON_STORE_ERROR).expect("valid rules");
    let limiter = Limiter::with_store(rules, DownStore);
    let verdict = limiter.check(&[("tenant", "acme")], 1).await;
    assert_eq!(verdict.denial(), Some(Denial::StoreError));
    let warnings = log.events("WARN", "the rate-limit store failed");
    assert_eq!(warnings.len(), 1, "{:#?}", log.lines());
    assert!(
        warnings[0].contains("limit=\"per_tenant\""),
        "{}",
        warnings[0]
    );
    assert!(
        log.events("", "rate limited").is_empty(),
        "{:#?}",
        log.lines()
    );
}

#[tokio::test]
async fn a_shadow_limit_that_the_failed_store_would_close_logs_a_shadow_denial() {
    let (log, _guard) = capture(LevelFilter::INFO);
    let rules = Rules::from_yaml(CLOSED_ON_STORE_ERROR).expect("valid rules");
    let limiter = Limiter::with_store(rules, DownStore);
    limiter.set_shadow_mode(true);
    let verdict = limiter.check(&[("tenant", "acme")], 1).await;
    assert!(verdict.is_allowed() && verdict.is_shadow_denied());
    let events = log.events("INFO", "shadow mode: this limit would deny the request");
    assert_eq!(events.len(), 1, "{:#?}", log.lines());
    assert!(log.events("WARN", "").is_empty(), "{:#?}", log.lines());
}

/// A sketch too small for its load says so once, when a window ends with an error bound of
/// a quarter of the limit or more.
#[test]
fn a_sketch_too_small_for_its_load_warns_once() {
    use tollgate::algorithm::{Algorithm, Quota};
    use tollgate::clock::Nanos;
    use tollgate::store::{Approximate, LimitCheck, Store};

    let (log, _guard) = capture(LevelFilter::WARN);
    let clock = ManualClock::starting_at(Nanos::new(3_600_000_000_000));
    let store = MemoryStore::with_clock(clock.clone());
    let quota = Quota::new(100, Duration::from_secs(1)).unwrap();
    let warning = "an approximate limit's sketch is small for its load";
    // 64 KiB: 14,336 cells. 100,000 clients a window: e × 100,000 × 4 ÷ 14,336 = 76 > 25.
    for window in 0..3 {
        for client in 0..100_000u32 {
            let key = client.to_be_bytes();
            let check = LimitCheck {
                domain: "flood",
                key: &key,
                tag: &key,
                algorithm: Algorithm::FixedWindow,
                quota: &quota,
                cost: 1,
                shadow: false,
                check_only: false,
                sync_every: None,
                limit: "per-client",
                approximate: Some(Approximate::new(64 << 10)),
                carried_from: &[],
            };
            let _ = store.acquire(&[check]);
        }
        assert_eq!(
            log.events("WARN", warning).len(),
            usize::from(window > 0),
            "window {window}: {:?}",
            log.lines()
        );
        clock.advance(Duration::from_secs(1));
    }
    let event = &log.events("WARN", warning)[0];
    assert!(event.contains("limit=per-client"), "{event}");
}
