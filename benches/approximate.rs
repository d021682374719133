//! Approximate limits (`approximate: { memory }`): a fixed-memory count-min sketch in front
//! of the memory store's exact state, against the exact memory store and governor.
//!
//! 1. **Memory under a flood.** 10,000,000 distinct keys, one request each, through one
//!    approximate fixed window (4 MiB, 100 a minute): the store's keys of its own and the
//!    process's resident memory (`VmRSS`, `/proc/self/status`) every 1,000,000 keys, and
//!    the ns per decision over the whole run.
//! 2. **ns per decision at 1,000,000 keys**, each checked once before measuring, then picked
//!    pseudo-randomly (a fixed xorshift sequence), one thread: the approximate limit, the
//!    exact memory store (the same fixed window, no `approximate`), and governor's keyed
//!    limiter (`RateLimiter::keyed`, `Quota::per_minute(100)`, `u64` keys).
//! 3. **False denials at the documented load**: 1,000,000 keys sending one request each in a
//!    window, and 1,000 clients at half their limit (50 of 100): the share of those clients'
//!    requests denied (goal ≤ 0.1 %), next to the rules guide's bound.
//! 4. **A heavy hitter at twice its limit**: 200 requests in the window amid the same load:
//!    the share of its excess (the 100 past the limit) denied (goal ≥ 99 %).
//!
//! All on a manual clock (the window never ends mid-run). Run with:
//!
//! ```text
//! cargo bench --bench approximate      # about a minute
//! ```

#[path = "common/machine.rs"]
mod machine;

use governor::{Quota as GovernorQuota, RateLimiter};
use machine::{cpu_model, memory_total, utc_now};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};
use tollgate::algorithm::{Algorithm, Quota};
use tollgate::clock::{ManualClock, Nanos};
use tollgate::store::{Acquisition, Approximate, LimitCheck, MemoryStore, Store};

const MEMORY: usize = 4 << 20;
const LIMIT: u64 = 100;
const FLOOD: u64 = 10_000_000;
const KEYS: u64 = 1_000_000;

fn check<'a>(quota: &'a Quota, key: &'a [u8], approximate: bool) -> LimitCheck<'a> {
    LimitCheck {
        domain: "bench",
        key,
        tag: key,
        algorithm: Algorithm::FixedWindow,
        quota,
        cost: 1,
        shadow: false,
        check_only: false,
        sync_every: None,
        limit: "per-client",
        approximate: approximate.then_some(Approximate::new(MEMORY)),
        carried_from: &[],
    }
}

fn allowed(store: &MemoryStore<ManualClock>, check: &LimitCheck<'_>) -> bool {
    match store.acquire(&[*check]) {
        Acquisition::Ready(Ok(decisions)) => decisions[0].allowed,
        _ => unreachable!("the memory store decides at once"),
    }
}

fn resident_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

fn store() -> MemoryStore<ManualClock> {
    MemoryStore::with_clock(ManualClock::starting_at(Nanos::new(60_000_000_000)))
}

/// A fixed pseudo-random sequence of key numbers below `keys`.
fn picks(keys: u64, count: usize) -> Vec<u64> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..count)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % keys
        })
        .collect()
}

fn main() {
    println!(
        "machine: {} CPUs, {}, {}; {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        cpu_model().unwrap_or_default(),
        memory_total().unwrap_or_default(),
        utc_now()
    );
    let quota = Quota::new(LIMIT, Duration::from_secs(60)).unwrap();

    println!("\n### 1. 10,000,000 distinct keys, one request each, 4 MiB sketch\n");
    println!("| keys so far | keys with state of their own | resident MiB |");
    println!("|---:|---:|---:|");
    let flood = store();
    println!("| 0 | 0 | {:.1} |", resident_mib());
    let started = Instant::now();
    for key in 0..FLOOD {
        black_box(allowed(&flood, &check(&quota, &key.to_le_bytes(), true)));
        if (key + 1) % 1_000_000 == 0 {
            println!("| {} | {} | {:.1} |", key + 1, flood.len(), resident_mib());
        }
    }
    let flood_ns = started.elapsed().as_nanos() as f64 / FLOOD as f64;
    println!("\n{flood_ns:.0} ns per decision over the flood.");

    println!("\n### 2. ns per decision at 1,000,000 keys, one thread\n");
    let order = picks(KEYS, 5_000_000);
    let approximate = store();
    let exact = store();
    for key in 0..KEYS {
        allowed(&approximate, &check(&quota, &key.to_le_bytes(), true));
        allowed(&exact, &check(&quota, &key.to_le_bytes(), false));
    }
    let governor = RateLimiter::keyed(GovernorQuota::per_minute(NonZeroU32::new(100).unwrap()));
    for key in 0..KEYS {
        let _ = governor.check_key(&key);
    }
    let time = |decide: &dyn Fn(u64) -> bool| {
        let started = Instant::now();
        for &key in &order {
            black_box(decide(key));
        }
        started.elapsed().as_nanos() as f64 / order.len() as f64
    };
    println!("| limiter | ns per decision |");
    println!("|---|---:|");
    for round in 0..3 {
        let a = time(&|key| allowed(&approximate, &check(&quota, &key.to_le_bytes(), true)));
        let e = time(&|key| allowed(&exact, &check(&quota, &key.to_le_bytes(), false)));
        let g = time(&|key| governor.check_key(&key).is_ok());
        println!("| round {round}: approximate | {a:.0} |");
        println!("| round {round}: exact memory store | {e:.0} |");
        println!("| round {round}: governor keyed | {g:.0} |");
    }

    println!(
        "\n### 3. and 4. Clients at half their limit, and a heavy hitter, amid 1,000,000 keys\n"
    );
    let loaded = store();
    for key in 0..KEYS {
        allowed(&loaded, &check(&quota, &key.to_le_bytes(), true));
    }
    let mut denied = 0u64;
    let clients = 1_000u64;
    for client in 0..clients {
        let key = format!("half-{client}");
        for _ in 0..LIMIT / 2 {
            denied += u64::from(!allowed(&loaded, &check(&quota, key.as_bytes(), true)));
        }
    }
    let asked = clients * LIMIT / 2;
    let bound = Approximate::new(MEMORY).false_denial(Algorithm::FixedWindow, KEYS, LIMIT);
    println!(
        "clients at half their limit: {denied} of {asked} requests denied ({:.4} %); the guide's bound for a client: {:.6} %",
        100.0 * denied as f64 / asked as f64,
        100.0 * bound
    );
    let heavy_denied: u64 = (0..2 * LIMIT)
        .map(|_| u64::from(!allowed(&loaded, &check(&quota, b"heavy", true))))
        .sum();
    let excess_denied = heavy_denied.min(LIMIT);
    println!(
        "a heavy hitter at twice its limit: {excess_denied} of its {LIMIT} excess requests denied ({:.1} %), and {} of the {LIMIT} within its limit",
        100.0 * excess_denied as f64 / LIMIT as f64,
        heavy_denied - excess_denied
    );
}
