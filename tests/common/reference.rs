//! The reference suite: traces every store must decide exactly as written here.
//!
//! Each [`Case`] is one key under one algorithm and quota, and a list of [`Step`]s: move the
//! clock by `advance_by`, ask for `cost`, and compare the decision with [`Expect`]. The
//! expected values come from the definitions of the algorithms (the comment on each case says
//! why), not from running the code. The clock starts at [`ManualClock::START`], a whole day
//! after the epoch, so every period used here (a divisor of a day) has a window starting
//! exactly at the first step.
//!
//! [`run_reference_suite`] runs the table against any [`Store`] (a fresh one per case);
//! [`cases`] gives the table itself, so the pure algorithms can run it too; [`run_cases`] is
//! the driver both use. Every case is run even when an earlier one fails; the panic lists
//! each failing case with the index of its first mismatching step.

use std::time::Duration;
use tollgate::algorithm::{Algorithm, Decision, Quota};
use tollgate::clock::ManualClock;
use tollgate::store::{Acquisition, LimitCheck, Store};

/// What one step must decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expect {
    /// Admitted or not.
    pub allowed: bool,
    /// `remaining`, when the case states it.
    pub remaining: Option<u64>,
    /// Exact `retry_after` (zero when admitted).
    pub retry_after: Duration,
    /// Exact `delay` (zero except for an admitted request of a shaping leaky bucket).
    pub delay: Duration,
}

/// Admitted, without delay; `remaining` unchecked unless [`Expect::left`] says it.
pub fn allow() -> Expect {
    Expect {
        allowed: true,
        remaining: None,
        retry_after: Duration::ZERO,
        delay: Duration::ZERO,
    }
}

/// Denied, with exactly this `retry_after`.
pub fn deny(retry_after: Duration) -> Expect {
    Expect {
        allowed: false,
        remaining: None,
        retry_after,
        delay: Duration::ZERO,
    }
}

impl Expect {
    /// And `remaining` is exactly `remaining`.
    pub fn left(self, remaining: u64) -> Expect {
        Expect {
            remaining: Some(remaining),
            ..self
        }
    }

    /// And the request waits exactly `delay` (shaping leaky bucket).
    pub fn delayed(self, delay: Duration) -> Expect {
        Expect { delay, ..self }
    }

    /// `Ok` when `decision` is what this step expects, or what differs.
    pub fn check(&self, decision: &Decision) -> Result<(), String> {
        let mut wrong = Vec::new();
        if decision.allowed != self.allowed {
            wrong.push(format!(
                "allowed {} (expected {})",
                decision.allowed, self.allowed
            ));
        }
        if let Some(remaining) = self.remaining {
            if decision.remaining != remaining {
                wrong.push(format!(
                    "remaining {} (expected {remaining})",
                    decision.remaining
                ));
            }
        }
        if decision.retry_after != self.retry_after {
            wrong.push(format!(
                "retry_after {:?} (expected {:?})",
                decision.retry_after, self.retry_after
            ));
        }
        if decision.delay != self.delay {
            wrong.push(format!(
                "delay {:?} (expected {:?})",
                decision.delay, self.delay
            ));
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(wrong.join(", "))
        }
    }
}

/// Move the clock by `advance_by`, then ask for `cost`.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub advance_by: Duration,
    pub cost: u64,
    pub expect: Expect,
}

/// One key, one algorithm, one quota, and the steps it goes through.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: &'static str,
    pub algorithm: Algorithm,
    pub quota: Quota,
    pub steps: Vec<Step>,
}

/// `(advance_by, cost, expect)` as a [`Step`].
pub fn step(advance_by: Duration, cost: u64, expect: Expect) -> Step {
    Step {
        advance_by,
        cost,
        expect,
    }
}

/// `n` identical steps at the same instant.
fn repeat(n: usize, cost: u64, expect: impl Fn(usize) -> Expect) -> Vec<Step> {
    (0..n).map(|i| step(NOW, cost, expect(i))).collect()
}

/// No time passes before the step.
pub const NOW: Duration = Duration::ZERO;

pub const fn ns(n: u64) -> Duration {
    Duration::from_nanos(n)
}

pub const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Runs every case against a fresh store made by `make` (one key per case), advancing the
/// clock given to `make` between steps. A store that answers later is awaited on a small
/// current-thread runtime.
///
/// # Panics
///
/// When any step of any case differs from its expectation (all cases are run first; the
/// message names each failing case and step), or when the store fails.
pub fn run_reference_suite<S: Store>(make: impl Fn(ManualClock) -> S) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    let runtime = &runtime;
    run_cases("store", |case, clock| {
        let store = make(clock);
        let key = format!("tollgate-reference/{}", case.name).into_bytes();
        let algorithm = case.algorithm;
        let quota = case.quota;
        move |cost| {
            let check = LimitCheck {
                domain: "test",
                key: &key,
                tag: &key,
                algorithm,
                quota: &quota,
                cost,
                shadow: false,
                check_only: false,
                sync_every: None,
                limit: "test",
                approximate: None,
                carried_from: &[],
            };
            let answer = match store.acquire(&[check]) {
                Acquisition::Ready(answer) => answer,
                Acquisition::Pending(pending) => runtime.block_on(pending),
            };
            let decisions = answer.map_err(|e| format!("store error: {e}"))?;
            match decisions.as_slice() {
                [decision] => Ok(*decision),
                other => Err(format!("{} decisions for one check", other.len())),
            }
        }
    });
}

/// Runs every case of [`cases`]: for each, `setup` gets the case and a fresh clock standing
/// at [`ManualClock::START`] and returns the function deciding one request of `cost` at the
/// clock's time; the driver advances the clock before each step and checks each decision.
///
/// # Panics
///
/// After all cases ran, if any failed: each case stops at its first mismatch (later steps
/// depend on it), and the message lists every failing case by name and step index.
pub fn run_cases<D>(suite: &str, mut setup: impl FnMut(&Case, ManualClock) -> D)
where
    D: FnMut(u64) -> Result<Decision, String>,
{
    let mut failures = Vec::new();
    for case in cases() {
        let clock = ManualClock::new();
        let mut decide = setup(&case, clock.clone());
        let mut elapsed = Duration::ZERO;
        for (index, step) in case.steps.iter().enumerate() {
            clock.advance(step.advance_by);
            elapsed += step.advance_by;
            let outcome = decide(step.cost).and_then(|decision| {
                step.expect
                    .check(&decision)
                    .map_err(|wrong| format!("{wrong}; decision {decision:?}"))
            });
            if let Err(wrong) = outcome {
                failures.push(format!(
                    "{}: step {index} (cost {} at start + {elapsed:?}): {wrong}",
                    case.name, step.cost
                ));
                break;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "reference suite ({suite}): {} case(s) failed:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

/// The table. Times in comments are relative to the clock's start, `t = 0`.
pub fn cases() -> Vec<Case> {
    use Algorithm::*;
    let mut cases = Vec::new();

    // ---------------------------------------------------------------- token bucket

    // 3 tokens, refilled at 3 per second: token k comes back when elapsed × 3 >= k × 1 s,
    // i.e. at ceil(k × 1e9 / 3) ns. The first refill is at 333,333,334 ns (333,333,333 × 3
    // falls 1 ns short of a second), the second at ceil(2e9 / 3) = 666,666,667 ns.
    cases.push(Case {
        name: "token_bucket/admits_the_burst_then_retry_after_is_exact",
        algorithm: TokenBucket,
        quota: Quota::new(3, secs(1)).unwrap(),
        steps: [
            repeat(3, 1, |i| allow().left(2 - i as u64)),
            vec![
                // Empty: the next token comes at 333,333,334 ns.
                step(NOW, 1, deny(ns(333_333_334)).left(0)),
                // t = 333,333,333: still no whole token; 1 ns to go.
                step(ns(333_333_333), 1, deny(ns(1)).left(0)),
                // t = 333,333,334: the token is there, and taken.
                step(ns(1), 1, allow().left(0)),
                // The next token comes at 666,666,667 ns: 333,333,333 ns from now.
                step(NOW, 1, deny(ns(333_333_333)).left(0)),
            ],
        ]
        .concat(),
    });

    // Refill, and the cap: a bucket never holds more than its burst however long it sat.
    cases.push(Case {
        name: "token_bucket/refills_at_the_rate_and_never_beyond_the_burst",
        algorithm: TokenBucket,
        quota: Quota::new(2, secs(1)).unwrap(),
        steps: vec![
            step(NOW, 2, allow().left(0)),
            // t = 0.5 s: one token refilled (2 per second), taken.
            step(ms(500), 1, allow().left(0)),
            // t = 10.5 s: 20 tokens' worth of time, but the bucket holds 2.
            step(secs(10), 1, allow().left(1)),
            step(NOW, 1, allow().left(0)),
            // Empty again: the next token is one interval (500 ms) away.
            step(NOW, 1, deny(ms(500)).left(0)),
        ],
    });

    // Weighted cost: 5 tokens, one every 200 ms. A cost above the burst can never be taken
    // and reports one period.
    cases.push(Case {
        name: "token_bucket/weighted_cost",
        algorithm: TokenBucket,
        quota: Quota::new(5, secs(1)).unwrap(),
        steps: vec![
            step(NOW, 3, allow().left(2)),
            // 2 tokens, 3 needed: one more token, at 200 ms.
            step(NOW, 3, deny(ms(200)).left(2)),
            // t = 200 ms - 1 ns: 999,999,995 / 1e9 of a token; 1 ns to go.
            step(ns(199_999_999), 3, deny(ns(1)).left(2)),
            step(ns(1), 3, allow().left(0)),
            // 6 > 5: never admitted, so one period.
            step(NOW, 6, deny(secs(1)).left(0)),
            // t = 10.2 s: a full bucket of 5, still not 6.
            step(secs(10), 6, deny(secs(1)).left(5)),
        ],
    });

    // A limit of 0 denies everything; what can never be admitted reports one period.
    cases.push(Case {
        name: "token_bucket/limit_0_denies_everything",
        algorithm: TokenBucket,
        quota: Quota::new(0, secs(1)).unwrap(),
        steps: vec![
            step(NOW, 1, deny(secs(1)).left(0)),
            step(ms(300), 1, deny(secs(1)).left(0)),
        ],
    });

    // `Quota::new` documents "A `limit` of 0 denies every request", whatever the burst (GCRA
    // does deny here). The rules compiler refuses a burst on a zero rate, but the API takes it.
    cases.push(Case {
        name: "token_bucket/limit_0_denies_everything_even_with_a_burst",
        algorithm: TokenBucket,
        quota: Quota::new(0, secs(1)).unwrap().with_burst(3),
        steps: vec![
            step(NOW, 1, deny(secs(1)).left(0)),
            step(NOW, 1, deny(secs(1)).left(0)),
            step(NOW, 1, deny(secs(1)).left(0)),
            step(NOW, 1, deny(secs(1)).left(0)),
            step(secs(5), 1, deny(secs(1)).left(0)),
        ],
    });

    // Burst above the rate: 5 at once, then 2 per second (one token per 500 ms).
    cases.push(Case {
        name: "token_bucket/burst_above_the_rate",
        algorithm: TokenBucket,
        quota: Quota::new(2, secs(1)).unwrap().with_burst(5),
        steps: [
            repeat(5, 1, |i| allow().left(4 - i as u64)),
            vec![
                step(NOW, 1, deny(ms(500)).left(0)),
                // t = 0.5 s: one token.
                step(ms(500), 1, allow().left(0)),
                // t = 1.5 s: two more tokens (at 1 s and 1.5 s).
                step(secs(1), 2, allow().left(0)),
                // t = 11.5 s: full again, at the burst of 5 (not 2, not 23).
                step(secs(10), 5, allow().left(0)),
                step(NOW, 1, deny(ms(500)).left(0)),
            ],
        ]
        .concat(),
    });

    // ---------------------------------------------------------------- leaky bucket

    // 10 per second: one leaves every 100 ms; 3 waiting places plus the one being served.
    // Shaping: the k-th request at one instant waits k × 100 ms.
    cases.push(Case {
        name: "leaky_bucket/shaping_queues_and_rejects_a_full_queue",
        algorithm: LeakyBucket,
        quota: Quota::new(10, secs(1)).unwrap().with_queue(3),
        steps: [
            repeat(4, 1, |i| {
                allow()
                    .left(3 - i as u64)
                    .delayed(ms(100) * u32::try_from(i).unwrap())
            }),
            vec![
                // Full: the first place frees when the first request has left, at 100 ms.
                step(NOW, 1, deny(ms(100)).left(0)),
                step(ns(99_999_999), 1, deny(ns(1)).left(0)),
                // t = 100 ms: a place is free; the queue ahead drains at 400 ms.
                step(ns(1), 1, allow().left(0).delayed(ms(300))),
                // t = 1.1 s: drained since 500 ms: no wait, 3 more fit at once.
                step(secs(1), 1, allow().left(3)),
            ],
        ]
        .concat(),
    });

    // max_delay 150 ms: waits of 0 and 100 ms fit; the third would wait 200 ms, and fits once
    // its wait has shrunk to 150 ms, at t = 50 ms.
    cases.push(Case {
        name: "leaky_bucket/max_delay_bounds_the_wait",
        algorithm: LeakyBucket,
        quota: Quota::new(10, secs(1))
            .unwrap()
            .with_queue(10)
            .with_max_delay(ms(150)),
        steps: vec![
            step(NOW, 1, allow()),
            step(NOW, 1, allow().delayed(ms(100))),
            step(NOW, 1, deny(ms(50))),
            step(ns(49_999_999), 1, deny(ns(1))),
            step(ns(1), 1, allow().delayed(ms(150))),
            // The next would wait 250 ms: 100 ms until it waits 150.
            step(NOW, 1, deny(ms(100))),
        ],
    });

    // `remaining` is "never overstated": with max_delay 150 ms, after one request only one
    // more (waiting 100 ms) fits at once, after two none does (the next would wait 200 ms),
    // however many queue places are free.
    cases.push(Case {
        name: "leaky_bucket/remaining_counts_max_delay",
        algorithm: LeakyBucket,
        quota: Quota::new(10, secs(1))
            .unwrap()
            .with_queue(10)
            .with_max_delay(ms(150)),
        steps: vec![
            step(NOW, 1, allow().left(1)),
            step(NOW, 1, allow().left(0).delayed(ms(100))),
            step(NOW, 1, deny(ms(50)).left(0)),
        ],
    });

    // Policing: the same admission (3 places: 2 waiting + 1), but no delay.
    cases.push(Case {
        name: "leaky_bucket/policing_admits_at_once",
        algorithm: LeakyBucket,
        quota: Quota::new(10, secs(1))
            .unwrap()
            .with_queue(2)
            .with_policing(),
        steps: [
            repeat(3, 1, |i| allow().left(2 - i as u64)),
            vec![
                step(NOW, 1, deny(ms(100)).left(0)),
                step(ns(99_999_999), 1, deny(ns(1)).left(0)),
                step(ns(1), 1, allow().left(0)),
            ],
        ]
        .concat(),
    });

    // Weighted: a request of cost c takes c places and c intervals. 4 places, 100 ms each.
    cases.push(Case {
        name: "leaky_bucket/weighted_cost",
        algorithm: LeakyBucket,
        quota: Quota::new(10, secs(1)).unwrap().with_queue(3),
        steps: vec![
            // Takes 3 places, drained at 300 ms; 1 place left.
            step(NOW, 3, allow().left(1)),
            // 2 places needed: the first frees at 100 ms.
            step(NOW, 2, deny(ms(100)).left(1)),
            // t = 100 ms: waits for the 300 ms of work ahead, minus the 100 gone: 200 ms.
            step(ms(100), 2, allow().left(0).delayed(ms(200))),
            // 5 > 4 places: never admitted, one period.
            step(NOW, 5, deny(secs(1)).left(0)),
        ],
    });

    cases.push(Case {
        name: "leaky_bucket/limit_0_denies_everything",
        algorithm: LeakyBucket,
        quota: Quota::new(0, secs(1)).unwrap().with_queue(3),
        steps: vec![
            step(NOW, 1, deny(secs(1)).left(0)),
            step(ms(300), 1, deny(secs(1)).left(0)),
        ],
    });

    // ---------------------------------------------------------------- fixed window

    // Windows of 1 s starting at t = 0 (the start is a whole day).
    cases.push(Case {
        name: "fixed_window/admits_the_limit_then_retry_after_is_the_window_end",
        algorithm: FixedWindow,
        quota: Quota::new(3, secs(1)).unwrap(),
        steps: [
            repeat(3, 1, |i| allow().left(2 - i as u64)),
            vec![
                step(NOW, 1, deny(secs(1)).left(0)),
                step(ns(999_999_999), 1, deny(ns(1)).left(0)),
                // t = 1 s: a new window, a new count.
                step(ns(1), 1, allow().left(2)),
            ],
        ]
        .concat(),
    });

    // Windows are aligned to multiples of the period since the epoch, not to the first
    // request: a 60 s window first hit at :59 ends at :60, one second later, and the next
    // window admits the whole limit again (the 2× edge effect of fixed windows).
    cases.push(Case {
        name: "fixed_window/windows_align_to_the_period",
        algorithm: FixedWindow,
        quota: Quota::new(2, secs(60)).unwrap(),
        steps: vec![
            step(secs(59), 1, allow().left(1)),
            step(NOW, 1, allow().left(0)),
            step(ms(500), 1, deny(ms(500)).left(0)),
            step(ns(499_999_999), 1, deny(ns(1)).left(0)),
            step(ns(1), 2, allow().left(0)),
        ],
    });

    cases.push(Case {
        name: "fixed_window/weighted_cost",
        algorithm: FixedWindow,
        quota: Quota::new(5, secs(1)).unwrap(),
        steps: vec![
            step(NOW, 3, allow().left(2)),
            // 3 + 3 > 5: wait for the next window.
            step(NOW, 3, deny(secs(1)).left(2)),
            step(NOW, 2, allow().left(0)),
            // 6 > 5 never fits: one period, not the 700 ms to the window's end.
            step(ms(300), 6, deny(secs(1)).left(0)),
            // Full: the window ends in 700 ms.
            step(NOW, 1, deny(ms(700)).left(0)),
            // t = 1 s: new window.
            step(ms(700), 5, allow().left(0)),
        ],
    });

    cases.push(Case {
        name: "fixed_window/limit_0_denies_everything",
        algorithm: FixedWindow,
        quota: Quota::new(0, secs(1)).unwrap(),
        steps: vec![
            step(NOW, 1, deny(secs(1)).left(0)),
            // Not 700 ms: the next window would deny too.
            step(ms(300), 1, deny(secs(1)).left(0)),
        ],
    });

    // ---------------------------------------------------------------- sliding window log

    // Exact in every rolling window: a request admitted at `a` counts while `a > t - period`,
    // i.e. until `a + period` (exclusive).
    cases.push(Case {
        name: "sliding_window_log/exact_in_a_rolling_window",
        algorithm: SlidingWindowLog,
        quota: Quota::new(3, secs(1)).unwrap(),
        steps: vec![
            step(NOW, 1, allow().left(2)),             // t = 0
            step(ms(500), 1, allow().left(1)),         // t = 0.5 s
            step(ns(499_999_999), 1, allow().left(0)), // t = 1 s - 1 ns
            // (0, 1 s - 1 ns]: 3 in the window; the one at 0 leaves at 1 s.
            step(NOW, 1, deny(ns(1)).left(0)),
            // t = 1 s: the request at 0 has left.
            step(ns(1), 1, allow().left(0)),
            // Next to leave: the one at 0.5 s, at 1.5 s.
            step(NOW, 1, deny(ms(500)).left(0)),
            step(ns(499_999_999), 1, deny(ns(1)).left(0)),
            step(ns(1), 1, allow().left(0)),
        ],
    });

    // Weighted: retry_after waits for as many of the oldest entries as must leave.
    cases.push(Case {
        name: "sliding_window_log/weighted_cost",
        algorithm: SlidingWindowLog,
        quota: Quota::new(5, secs(1)).unwrap(),
        steps: vec![
            step(NOW, 2, allow().left(3)),     // t = 0
            step(ms(300), 2, allow().left(1)), // t = 0.3 s
            step(ms(300), 1, allow().left(0)), // t = 0.6 s
            // 3 needs the window down to 2: both the 2 at 0 and the 2 at 0.3 s must leave,
            // the later at 1.3 s, 700 ms from now.
            step(NOW, 3, deny(ms(700)).left(0)),
            // t = 1 s: the 2 at 0 left (3 used, 2 remaining); still 300 ms to wait.
            step(ms(400), 3, deny(ms(300)).left(2)),
            step(ns(299_999_999), 3, deny(ns(1)).left(2)),
            // t = 1.3 s: 1 (at 0.6 s) + 3.
            step(ns(1), 3, allow().left(1)),
            // 6 > 5 never fits: one period.
            step(NOW, 6, deny(secs(1)).left(1)),
        ],
    });

    cases.push(Case {
        name: "sliding_window_log/limit_0_denies_everything",
        algorithm: SlidingWindowLog,
        quota: Quota::new(0, secs(1)).unwrap(),
        steps: vec![
            step(NOW, 1, deny(secs(1)).left(0)),
            step(ms(300), 1, deny(secs(1)).left(0)),
        ],
    });

    // ---------------------------------------------------------------- sliding window counter

    // Estimate at e into the current window: previous × (period - e) / period + current.
    // Admitted when estimate + cost <= limit (compared exactly, scaled by the period).
    cases.push(Case {
        name: "sliding_window_counter/previous_window_weighted_by_overlap",
        algorithm: SlidingWindowCounter,
        quota: Quota::new(10, secs(1)).unwrap(),
        steps: vec![
            step(NOW, 10, allow().left(0)),
            // This window is full; in the next, 10 × (1 - e) + 1 <= 10 from e = 0.1 s: 1.1 s.
            step(NOW, 1, deny(ms(1100)).left(0)),
            // t = 1.1 s - 1 ns: 10 × 0.900000001 + 1 is 10 ns-units too many.
            step(ns(1_099_999_999), 1, deny(ns(1)).left(0)),
            step(ns(1), 1, allow().left(0)),
            // t = 1.25 s: 7.5 + 1 + 1 = 9.5 <= 10; half a request left, rounded down.
            step(ms(150), 1, allow().left(0)),
            // 7.5 + 2 + 1 = 10.5; 10 × (1 - e) + 3 <= 10 from e = 0.3 s: 50 ms from now.
            step(NOW, 1, deny(ms(50)).left(0)),
            step(ns(49_999_999), 1, deny(ns(1)).left(0)),
            step(ns(1), 1, allow().left(0)),
            // t = 3.3 s: window 2 was empty, so window 1 no longer weighs on window 3.
            step(secs(2), 5, allow().left(5)),
        ],
    });

    // Windows of 100 ms. Weighted cost and the never-admitted cost.
    cases.push(Case {
        name: "sliding_window_counter/weighted_cost",
        algorithm: SlidingWindowCounter,
        quota: Quota::new(4, ms(100)).unwrap(),
        steps: vec![
            step(NOW, 4, allow().left(0)),
            // t = 100 ms: 4 × 1 + 2 > 4; 4 × (1 - e) + 2 <= 4 from e = 0.5: 50 ms.
            step(ms(100), 2, deny(ms(50)).left(0)),
            // t = 150 ms - 1 ns: 4 × 0.50000001 = 2.00000004 used: 2 does not fit, 1 would.
            step(ns(49_999_999), 2, deny(ns(1)).left(1)),
            // t = 150 ms: 2 + 2 = 4.
            step(ns(1), 2, allow().left(0)),
            // 5 > 4 never fits: one period.
            step(NOW, 5, deny(ms(100)).left(0)),
            // t = 175 ms: 4 × 0.25 + 2 + 1 = 4.
            step(ms(25), 1, allow().left(0)),
        ],
    });

    cases.push(Case {
        name: "sliding_window_counter/limit_0_denies_everything",
        algorithm: SlidingWindowCounter,
        quota: Quota::new(0, secs(1)).unwrap(),
        steps: vec![
            step(NOW, 1, deny(secs(1)).left(0)),
            step(ms(300), 1, deny(secs(1)).left(0)),
        ],
    });

    // ---------------------------------------------------------------- GCRA

    // Interval 250 ms; burst 4 (the limit): 4 at once, then one per 250 ms.
    cases.push(Case {
        name: "gcra/admits_the_burst_then_one_per_interval",
        algorithm: Gcra,
        quota: Quota::new(4, secs(1)).unwrap(),
        steps: [
            repeat(4, 1, |i| allow().left(3 - i as u64)),
            vec![
                // Theoretical arrival time 1 s; the next fits when it is within 4
                // intervals of now: at 250 ms.
                step(NOW, 1, deny(ms(250)).left(0)),
                step(ns(249_999_999), 1, deny(ns(1)).left(0)),
                step(ns(1), 1, allow().left(0)),
            ],
        ]
        .concat(),
    });

    // A burst below the limit: 2 at once.
    cases.push(Case {
        name: "gcra/burst_below_the_limit",
        algorithm: Gcra,
        quota: Quota::new(4, secs(1)).unwrap().with_burst(2),
        steps: vec![
            step(NOW, 1, allow().left(1)),
            step(NOW, 1, allow().left(0)),
            step(NOW, 1, deny(ms(250)).left(0)),
            step(ns(249_999_999), 1, deny(ns(1)).left(0)),
            step(ns(1), 1, allow().left(0)),
        ],
    });

    // A burst above the limit: 1 per second, 3 at once; costs up to the burst fit.
    cases.push(Case {
        name: "gcra/burst_above_the_limit",
        algorithm: Gcra,
        quota: Quota::new(1, secs(1)).unwrap().with_burst(3),
        steps: [
            repeat(3, 1, |i| allow().left(2 - i as u64)),
            vec![
                // TAT 3 s: 4 s - 3 s of burst = 1 s.
                step(NOW, 1, deny(secs(1)).left(0)),
                step(secs(1), 1, allow().left(0)), // t = 1 s, TAT 4 s
                step(secs(2), 2, allow().left(0)), // t = 3 s, TAT 6 s
                // t = 13 s: back to the full burst.
                step(secs(10), 3, allow().left(0)),
                // 4 > burst 3: never admitted, one period.
                step(NOW, 4, deny(secs(1)).left(0)),
            ],
        ]
        .concat(),
    });

    // The interval is rounded up: 1 s / 3 = 333,333,334 ns, never faster than 3 per second.
    cases.push(Case {
        name: "gcra/interval_rounds_up",
        algorithm: Gcra,
        quota: Quota::new(3, secs(1)).unwrap().with_burst(1),
        steps: vec![
            step(NOW, 1, allow().left(0)),
            step(NOW, 1, deny(ns(333_333_334)).left(0)),
            step(ns(333_333_333), 1, deny(ns(1)).left(0)),
            step(ns(1), 1, allow().left(0)),
            step(NOW, 1, deny(ns(333_333_334)).left(0)),
        ],
    });

    cases.push(Case {
        name: "gcra/weighted_cost",
        algorithm: Gcra,
        quota: Quota::new(4, secs(1)).unwrap(),
        steps: vec![
            // TAT 750 ms: one interval of the 4 left.
            step(NOW, 3, allow().left(1)),
            // 2 more would put TAT at 1.25 s, 250 ms beyond the burst.
            step(NOW, 2, deny(ms(250)).left(1)),
            step(ms(250), 2, allow().left(0)),
            step(NOW, 5, deny(secs(1)).left(0)),
        ],
    });

    cases.push(Case {
        name: "gcra/limit_0_denies_everything",
        algorithm: Gcra,
        quota: Quota::new(0, secs(1)).unwrap(),
        steps: vec![
            step(NOW, 1, deny(secs(1)).left(0)),
            step(ms(300), 1, deny(secs(1)).left(0)),
        ],
    });

    cases.push(Case {
        name: "gcra/limit_0_denies_everything_even_with_a_burst",
        algorithm: Gcra,
        quota: Quota::new(0, secs(1)).unwrap().with_burst(3),
        steps: vec![
            step(NOW, 1, deny(secs(1)).left(0)),
            step(NOW, 1, deny(secs(1)).left(0)),
        ],
    });

    cases
}
