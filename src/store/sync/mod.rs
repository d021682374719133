//! Local-first limits (`sync_every`): decided from local counts, agreed with the fleet
//! through a shared store every interval.
//!
//! Each server keeps, per key, the fleet's totals at its last sync and what it admitted
//! since, and decides against the limit on their sum. Every interval it sends what it
//! admitted and takes back the fleet's totals, which include every server's counts sent so
//! far. Without fresh totals (the shared store unreachable, or a key this server has not
//! synced yet) it also keeps to its share: the limit divided among the servers last seen,
//! counted on its own admissions.
//!
//! The windows (fixed window, sliding window counter) send counts per window; GCRA and the
//! token bucket (kept as GCRA's timestamp) share one schedule: a server's bookings since the
//! last sync fold into two numbers, applied to the fleet's schedule exactly as one by one.
//!
//! # What a key costs
//!
//! What every key of a limit shares (its algorithm, quota, interval, domain and label, from
//! which the shared store's expiry follows) is kept once, in a [`Limit`] the keys point to.
//! A key keeps only its own: its id (a keyed hash of its domain and state key), its counts
//! in its algorithm's form (four numbers for a schedule, seven for two windows), when it
//! last synced, two marks and its recent uses in one word, and the store's part of where
//! its fleet totals live (for Redis, the 24 bytes of digest its key name is made from again
//! when it is sent).
//! Entries sit in dense arrays, one per form, found through an index of 4-byte places: 80
//! bytes a key for a schedule and 104 for windows, plus the index (see `BENCHMARKS.md`).
//!
//! A sync visits the keys listed since the last one (asked for, given back, or whose send
//! failed), not every key; after a sync that reached no one, it sends one call's worth.
//!
//! # Bounded memory
//!
//! A key is idle once nothing is kept for a reason: no answer awaited, no fresh totals, and
//! counts that decide as a key never seen would. For the windows, both are older than the
//! one before the current (the shared store takes no count for them any more); for a
//! schedule, its bookings have run out (`after + add` in the past: they cover a span that is
//! over). So a key is idle even with counts never sent: an outage does not keep keys. At
//! each sync a clock hand visits a share of each shard's keys (an eighth) and forgets the
//! idle ones.
//!
//! The keys have a ceiling, spread over the shards. A shard at its share forgets, before
//! adding a key, the first key from the clock hand on that is idle or was not asked for in
//! the hand's last passes (each request raises a key's uses, up to 3; each pass lowers
//! them): roughly the key asked for least recently, and least often. A forgotten key
//! starts afresh when asked for again: alone, on its share, until its next sync brings the
//! fleet's totals. What it admitted and never sent is lost to the fleet, which errs towards
//! admitting; refusing new keys instead would let a flood lock out every new client.

mod entry;
mod limits;
mod shard;
mod table;
mod view;

pub(crate) use limits::Limit;
pub(crate) use table::{Admission, Outgoing, SyncTable};
pub(crate) use view::{Bookings, Payload, Totals};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{Algorithm, Quota};
    use crate::store::{CarriedFrom, LimitCheck};
    use proptest::prelude::*;
    use std::collections::HashMap;
    use std::time::Duration;

    const MS: u64 = 1_000_000;
    const MAX_KEYS: usize = 1_000_000;
    /// As many keys as are due.
    const ALL: usize = usize::MAX;

    /// The shared store, as the library's `sync` keeps it.
    #[derive(Default)]
    struct Shared {
        windows: HashMap<u64, i64>,
        tat: u64,
    }

    impl Shared {
        /// One server's sync at `now`: its counts in, the totals back.
        fn sync(&mut self, table: &SyncTable<()>, now: u64) {
            for out in table.due(now, true, ALL) {
                let totals = match out.payload {
                    Payload::Windows { added } => {
                        let current = added[0].0;
                        for (window, count) in added {
                            *self.windows.entry(window).or_default() += count;
                        }
                        let count = |w: u64| {
                            u64::try_from(self.windows.get(&w).copied().unwrap_or(0)).unwrap_or(0)
                        };
                        Totals::Windows {
                            current: count(current),
                            previous: count(current.wrapping_sub(1)),
                        }
                    }
                    Payload::Schedule(bookings) => {
                        if bookings.add > 0 || bookings.after > self.tat {
                            self.tat = self.tat.max(bookings.after) + bookings.add;
                        }
                        Totals::Schedule { tat: self.tat }
                    }
                };
                table.settle(&out, Some(totals), now);
            }
        }
    }

    fn check(algorithm: Algorithm, quota: &Quota) -> LimitCheck<'_> {
        LimitCheck {
            domain: "test",
            key: b"client",
            tag: b"client",
            algorithm,
            quota,
            cost: 1,
            shadow: false,
            check_only: false,
            sync_every: Some(Duration::from_millis(100)),
            limit: "test",
            approximate: None,
            carried_from: &[],
        }
    }

    /// Two servers, each asked `per_interval` requests every 100 ms for a second, syncing
    /// every interval: how many the fleet admitted.
    fn fleet_admits(algorithm: Algorithm, quota: &Quota, per_interval: u64) -> u64 {
        let servers = [SyncTable::new(MAX_KEYS), SyncTable::new(MAX_KEYS)];
        let mut shared = Shared::default();
        let mut admitted = 0;
        let start = 10_000 * MS;
        for interval in 0..10 {
            let now = start + interval * 100 * MS;
            for table in &servers {
                for _ in 0..per_interval {
                    let (decision, _) = table.acquire(&check(algorithm, quota), now, 2, || ());
                    admitted += u64::from(decision.allowed);
                }
            }
            for table in &servers {
                shared.sync(table, now + 50 * MS);
            }
        }
        admitted
    }

    #[test]
    fn two_servers_admit_the_limit_plus_at_most_one_interval_of_the_other() {
        let quota = Quota::new(100, Duration::from_secs(1)).unwrap();
        for algorithm in [Algorithm::FixedWindow, Algorithm::SlidingWindowCounter] {
            // 30 asked per server per interval: the limit is reached in the second interval.
            let admitted = fleet_admits(algorithm, &quota, 30);
            assert!(
                (100..=100 + 30).contains(&admitted),
                "{algorithm}: {admitted}"
            );
        }
        let burst = Quota::new(100, Duration::from_secs(1))
            .unwrap()
            .with_burst(100);
        for algorithm in [Algorithm::Gcra, Algorithm::TokenBucket] {
            // The burst of 100, then 10 an interval refilled; one interval's worth over.
            let admitted = fleet_admits(algorithm, &burst, 30);
            assert!(
                (100 + 90..=100 + 90 + 30).contains(&admitted),
                "{algorithm}: {admitted}"
            );
        }
    }

    #[test]
    fn a_server_without_fleet_totals_keeps_to_its_share() {
        let quota = Quota::new(10, Duration::from_secs(1))
            .unwrap()
            .with_burst(10);
        for algorithm in [
            Algorithm::FixedWindow,
            Algorithm::SlidingWindowCounter,
            Algorithm::Gcra,
            Algorithm::TokenBucket,
        ] {
            let table = SyncTable::new(MAX_KEYS);
            let admitted = (0..10)
                .filter(|_| {
                    table
                        .acquire(&check(algorithm, &quota), 5_000 * MS, 3, || ())
                        .0
                        .allowed
                })
                .count();
            assert_eq!(admitted, 4, "{algorithm}: ⌈10 / 3⌉");
        }
    }

    #[test]
    fn a_charge_given_back_after_it_was_sent_is_taken_off_the_fleet() {
        let quota = Quota::new(10, Duration::from_secs(1)).unwrap();
        let table = SyncTable::new(MAX_KEYS);
        let mut shared = Shared::default();
        let now = 5_000 * MS;
        let (_, admission) = table.acquire(&check(Algorithm::FixedWindow, &quota), now, 1, || ());
        shared.sync(&table, now);
        assert_eq!(shared.windows.values().sum::<i64>(), 1);
        table.give_back(admission.unwrap());
        shared.sync(&table, now + 100 * MS);
        assert_eq!(shared.windows.values().sum::<i64>(), 0);
    }

    #[test]
    fn a_failed_send_is_sent_again() {
        let quota = Quota::new(10, Duration::from_secs(1)).unwrap();
        let table = SyncTable::new(MAX_KEYS);
        let now = 5_000 * MS;
        for _ in 0..3 {
            table.acquire(&check(Algorithm::FixedWindow, &quota), now, 1, || ());
        }
        for out in table.due(now, true, ALL) {
            table.settle(&out, None, now);
        }
        let mut shared = Shared::default();
        shared.sync(&table, now);
        assert_eq!(shared.windows.values().sum::<i64>(), 3);
    }

    #[test]
    fn a_key_idle_past_its_period_is_forgotten() {
        let quota = Quota::new(10, Duration::from_secs(1)).unwrap();
        let table = SyncTable::new(MAX_KEYS);
        table.acquire(&check(Algorithm::FixedWindow, &quota), 5_000 * MS, 1, || ());
        assert_eq!(table.due(5_000 * MS, true, ALL).len(), 1);
        // Unanswered: kept until answered.
        assert!(table.due(60_000 * MS, true, ALL).is_empty());
        let mut shared = Shared::default();
        shared.sync(&table, 60_000 * MS);
        let table_empty = table.due(60_000 * MS, true, ALL).is_empty();
        assert!(table_empty);
    }

    /// `check` of the key `key`.
    fn keyed<'a>(algorithm: Algorithm, quota: &'a Quota, key: &'a [u8]) -> LimitCheck<'a> {
        LimitCheck {
            key,
            tag: key,
            ..check(algorithm, quota)
        }
    }

    /// One sync at `now` with the shared store unreachable, sending at most `most` keys.
    fn unreachable<K: Clone>(table: &SyncTable<K>, now: u64, most: usize) {
        for out in table.due(now, false, most) {
            table.settle(&out, None, now);
        }
    }

    #[test]
    fn a_changed_quota_keeps_the_counts_and_a_changed_algorithm_starts_afresh() {
        let ten = Quota::new(10, Duration::from_secs(1)).unwrap();
        let four = Quota::new(4, Duration::from_secs(1)).unwrap();
        let table = SyncTable::new(MAX_KEYS);
        let now = 5_000 * MS;
        let admitted = |algorithm, quota| {
            (0..10)
                .filter(|_| {
                    table
                        .acquire(&check(algorithm, quota), now, 1, || ())
                        .0
                        .allowed
                })
                .count()
        };
        assert_eq!(admitted(Algorithm::FixedWindow, &ten), 10);
        assert_eq!(
            admitted(Algorithm::FixedWindow, &four),
            0,
            "10 counted of 4"
        );
        assert_eq!(admitted(Algorithm::Gcra, &four), 4);
        assert_eq!(table.len(), 1);
    }

    /// The keys of one client under two limits, the second replacing the first at a reload:
    /// the state key is the limit's id (one byte), then the client.
    fn replaced<'a>(
        (algorithm, quota): (Algorithm, &'a Quota),
        key: &'a [u8],
        carried_from: &'a [CarriedFrom],
    ) -> LimitCheck<'a> {
        LimitCheck {
            carried_from,
            ..keyed(algorithm, quota, key)
        }
    }

    /// Two servers admit `each` requests of one client under `old`, sync, and are reloaded to
    /// `new`: how many more the fleet admits, asked by both, syncing between rounds (a round
    /// may admit one more per server than the fleet's totals would, as local-first does).
    fn fleet_carries(old: (Algorithm, Quota), new: (Algorithm, Quota), each: usize) -> usize {
        let servers = [SyncTable::new(MAX_KEYS), SyncTable::new(MAX_KEYS)];
        let mut shared = Shared::default();
        let now = 10_000 * MS;
        for table in &servers {
            let before = replaced((old.0, &old.1), b"1 client", &[]);
            for _ in 0..each {
                assert!(table.acquire(&before, now, 2, || ()).0.allowed);
            }
        }
        for table in &servers {
            shared.sync(table, now);
        }
        // The new key's fleet totals start empty (the mock keeps one set for every key).
        shared = Shared::default();
        let carried = [CarriedFrom::new(*b"1", old.0, old.1)];
        let after = replaced((new.0, &new.1), b"2 client", &carried);
        let mut admitted = 0;
        for round in 0..5 {
            let at = now + round * MS;
            for table in &servers {
                admitted += usize::from(table.acquire(&after, at, 2, || ()).0.allowed);
            }
            for table in &servers {
                shared.sync(table, at);
            }
        }
        admitted
    }

    #[test]
    fn a_reload_carries_each_server_s_counts_into_the_new_key() {
        let per_minute = |limit| Quota::new(limit, Duration::from_secs(60)).unwrap();
        for algorithm in [Algorithm::FixedWindow, Algorithm::SlidingWindowCounter] {
            // 3 + 3 of 10 used, raised to 12: 6 more; without the carry, 12.
            let more = fleet_carries((algorithm, per_minute(10)), (algorithm, per_minute(12)), 3);
            assert!((6..=8).contains(&more), "{algorithm}: {more}");
        }
        for algorithm in [Algorithm::Gcra, Algorithm::TokenBucket] {
            let bucket = |limit| per_minute(limit).with_burst(limit);
            let more = fleet_carries((algorithm, bucket(10)), (algorithm, bucket(12)), 3);
            // GCRA: 6 used of 12; a token bucket keeps its 4 tokens.
            let expected = if algorithm == Algorithm::Gcra { 6 } else { 4 };
            assert!(
                (expected..=expected + 2).contains(&more),
                "{algorithm}: {more}"
            );
        }
        // From windows into a schedule: the fleet's 6 used, counted once.
        let more = fleet_carries(
            (Algorithm::FixedWindow, per_minute(10)),
            (Algorithm::Gcra, per_minute(12).with_burst(12)),
            3,
        );
        assert!((6..=8).contains(&more), "{more}");
    }

    #[test]
    fn forgetting_a_key_forgets_its_counts_here() {
        let quota = Quota::new(3, Duration::from_secs(60)).unwrap();
        let table = SyncTable::new(MAX_KEYS);
        let now = 5_000 * MS;
        let client = check(Algorithm::FixedWindow, &quota);
        for _ in 0..3 {
            assert!(table.acquire(&client, now, 1, || ()).0.allowed);
        }
        assert!(!table.acquire(&client, now, 1, || ()).0.allowed);
        assert_eq!(table.forget(&client), 1);
        assert!(table.acquire(&client, now, 1, || ()).0.allowed);
        let stranger = keyed(Algorithm::FixedWindow, &quota, b"stranger");
        assert_eq!(table.forget(&stranger), 0, "never seen");
    }

    /// At the ceiling, the keys asked for least recently make room: a client asking often is
    /// never forgotten and stays limited; a quiet one is, and starts afresh.
    #[test]
    fn at_the_key_ceiling_the_keys_asked_for_least_recently_are_forgotten() {
        let quota = Quota::new(5, Duration::from_secs(3_600)).unwrap();
        let table = SyncTable::new(6_400);
        let now = 5_000 * MS;
        let admits = |check: &LimitCheck<'_>| table.acquire(check, now, 1, || ()).0.allowed;
        let quiet = keyed(Algorithm::FixedWindow, &quota, b"quiet");
        let active = keyed(Algorithm::FixedWindow, &quota, b"active");
        assert_eq!((0..10).filter(|_| admits(&quiet)).count(), 5);
        let mut active_admitted = 0;
        for i in 0..100_000u32 {
            admits(&keyed(Algorithm::FixedWindow, &quota, &i.to_le_bytes()));
            if i % 100 == 0 && admits(&active) {
                active_admitted += 1;
            }
        }
        assert!(table.len() <= 6_400, "{} keys kept", table.len());
        assert_eq!(
            active_admitted, 5,
            "a client asked for often is never forgotten"
        );
        assert!(admits(&quiet), "forgotten, the quiet client starts afresh");
    }

    /// With the shared store unreachable, keys are forgotten once their counts no longer
    /// matter (windows that ended, bookings that ran out), though they were never sent, and
    /// the memory they took is given back.
    #[test]
    fn keys_never_sent_are_forgotten_once_their_counts_no_longer_matter() {
        let windows = Quota::new(10, Duration::from_secs(1)).unwrap();
        let schedule = windows.with_burst(10);
        let table = SyncTable::new(MAX_KEYS);
        let start = 5_000 * MS;
        // 20,000 keys in a second, half windows, half schedules; a sync every 100 ms.
        for i in 0..20_000u32 {
            let now = start + u64::from(i) * 50_000;
            let (algorithm, quota) = if i % 2 == 0 {
                (Algorithm::FixedWindow, &windows)
            } else {
                (Algorithm::Gcra, &schedule)
            };
            table.acquire(&keyed(algorithm, quota, &i.to_le_bytes()), now, 1, || ());
            if i % 2_000 == 0 {
                unreachable(&table, now, ALL);
            }
        }
        let mut now = start + 1_000 * MS;
        unreachable(&table, now, ALL);
        assert!(
            table.len() >= 10_000,
            "the windows are kept while they matter"
        );
        let bytes = table.heap_bytes();
        for _ in 0..100 {
            now += 100 * MS;
            unreachable(&table, now, ALL);
        }
        assert_eq!(table.len(), 0);
        assert!(
            table.heap_bytes() < bytes / 10,
            "{} bytes",
            table.heap_bytes()
        );
    }

    const SYNCABLE: [Algorithm; 4] = [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindowCounter,
        Algorithm::Gcra,
        Algorithm::TokenBucket,
    ];

    /// 1,000 a minute, all at once.
    fn per_minute() -> Quota {
        Quota::new(1_000, Duration::from_secs(60))
            .unwrap()
            .with_burst(1_000)
    }

    /// The guide's example, one server: answers reserve 1 and use 300; the fifth is refused
    /// until it has been paid back, then admitted exactly.
    #[test]
    fn a_settled_charge_is_kept_until_paid_back() {
        let quota = per_minute();
        for algorithm in SYNCABLE {
            let table = SyncTable::new(MAX_KEYS);
            let check = check(algorithm, &quota);
            let start = 60_000 * MS;
            for answer in 0..4 {
                let (admitted, _) = table.acquire(&check, start, 1, || ());
                assert!(admitted.allowed, "{algorithm}: answer {answer}");
                table.adjust(&check, 299, start, 1);
            }
            let (fifth, _) = table.acquire(&check, start, 1, || ());
            assert!(!fifth.allowed, "{algorithm}: 1,200 used of 1,000");
            let retry = u64::try_from(fifth.retry_after.as_nanos()).unwrap();
            let early = table.acquire(&check, start + retry - 1, 1, || ()).0;
            assert!(!early.allowed, "{algorithm}: a nanosecond early");
            let paid = table.acquire(&check, start + retry, 1, || ()).0;
            assert!(paid.allowed, "{algorithm}: at retry_after exactly");
        }
    }

    /// Four requests reserve 300 and use 100: the 800 they gave back are admitted, and
    /// nothing more.
    #[test]
    fn what_a_response_did_not_use_is_given_back() {
        let quota = per_minute();
        for algorithm in SYNCABLE {
            let table = SyncTable::new(MAX_KEYS);
            let reserve = LimitCheck {
                cost: 300,
                ..check(algorithm, &quota)
            };
            let now = 60_000 * MS;
            for _ in 0..4 {
                assert!(table.acquire(&reserve, now, 1, || ()).0.allowed);
                table.adjust(&reserve, -200, now, 1);
            }
            let rest = LimitCheck {
                cost: 600,
                ..reserve
            };
            assert!(table.acquire(&rest, now, 1, || ()).0.allowed, "{algorithm}");
            let more = table.acquire(&check(algorithm, &quota), now, 1, || ()).0;
            assert!(!more.allowed, "{algorithm}: and no more");
        }
    }

    /// Two servers settle in their own counts, which reach the fleet's totals at the next
    /// sync: two answers of 300 on each, and the server that synced last refuses the
    /// fifth; a give-back after a sync is taken off the fleet at the next.
    #[test]
    fn settled_charges_reach_the_fleet_at_the_next_sync() {
        let quota = per_minute();
        for algorithm in SYNCABLE {
            let servers = [SyncTable::new(MAX_KEYS), SyncTable::new(MAX_KEYS)];
            let mut shared = Shared::default();
            let check = check(algorithm, &quota);
            let now = 60_000 * MS;
            for server in &servers {
                for _ in 0..2 {
                    assert!(server.acquire(&check, now, 2, || ()).0.allowed);
                    server.adjust(&check, 299, now, 2);
                }
                shared.sync(server, now);
            }
            let fifth = servers[1].acquire(&check, now, 2, || ()).0;
            assert!(!fifth.allowed, "{algorithm}: 1,200 used of 1,000");
            if view::counts_windows(algorithm) {
                assert_eq!(shared.windows.values().sum::<i64>(), 1_200, "{algorithm}");
                servers[0].adjust(&check, -500, now, 2);
                shared.sync(&servers[0], now);
                assert_eq!(shared.windows.values().sum::<i64>(), 700, "{algorithm}");
            } else {
                let interval = quota.emission_interval().unwrap().get();
                assert_eq!(shared.tat, now + 1_200 * interval, "{algorithm}");
            }
        }
    }

    /// 200,000 clients with the shared store unreachable: the table stays within its ceiling,
    /// in keys and in bytes (with the Redis store's 24 bytes of digest a key).
    #[test]
    fn a_flood_with_the_fleet_unreachable_stays_within_the_ceiling_in_keys_and_bytes() {
        const CEILING: usize = 50_000;
        let quota = Quota::new(100, Duration::from_secs(60)).unwrap();
        let table = SyncTable::new(CEILING);
        let start = 5_000 * MS;
        // 20,000 clients a second for 10 s, in one window: every key's counts still matter.
        for i in 0..200_000u32 {
            let now = start + u64::from(i) * 50_000;
            let key = i.to_le_bytes();
            let check = keyed(Algorithm::FixedWindow, &quota, &key);
            assert!(table.acquire(&check, now, 1, || [0u8; 24]).0.allowed);
            if i % 2_000 == 0 {
                // As the Redis store does after a sync that reached no one: one call's worth.
                unreachable(&table, now, 500);
            }
        }
        assert!(
            (CEILING * 9 / 10..=CEILING).contains(&table.len()),
            "{} keys kept",
            table.len()
        );
        let per_key = table.heap_bytes() / CEILING;
        assert!(per_key <= 200, "{per_key} bytes a key");
    }

    proptest! {
        /// Bookings sent and taken into the fleet's schedule are taken out of a key's
        /// bookings exactly: what is left moves the schedule as the bookings made since do.
        #[test]
        fn bookings_sent_are_taken_out_exactly(
            start in 0u64..1_000,
            sent in prop::collection::vec((0u64..1_000, 1u64..100), 1..10),
            since in prop::collection::vec((0u64..1_000, 1u64..100), 0..10),
            others in (0u64..2_000, 0u64..100),
        ) {
            let fold = |bookings: &[(u64, u64)]| {
                bookings
                    .iter()
                    .fold(Bookings::default(), |folded, &(after, add)| folded.then(Bookings { after, add }))
            };
            let (sent, since) = (fold(&sent), fold(&since));
            // The fleet took what was sent, then other servers' bookings.
            let fleet = Bookings { after: others.0, add: others.1 }.apply(sent.apply(start));
            prop_assert_eq!(sent.then(since).without(sent).apply(fleet), since.apply(fleet));
        }

        /// Folded bookings move a schedule as the bookings one by one do.
        #[test]
        fn bookings_fold_exactly(
            start in 0u64..1_000,
            bookings in prop::collection::vec((0u64..1_000, 1u64..100), 1..20),
        ) {
            let mut folded = Bookings::default();
            let mut one_by_one = start;
            for (after, add) in bookings {
                folded = folded.then(Bookings { after, add });
                one_by_one = one_by_one.max(after) + add;
            }
            prop_assert_eq!(folded.apply(start), one_by_one);
        }
    }
}
