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

mod table;
mod view;

pub(crate) use table::{Admission, Outgoing, SyncTable};
pub(crate) use view::{horizon, Bookings, Payload, Totals};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{Algorithm, Quota};
    use crate::store::LimitCheck;
    use proptest::prelude::*;
    use std::collections::HashMap;
    use std::time::Duration;

    const MS: u64 = 1_000_000;

    /// The shared store, as `sync.lua` keeps it.
    #[derive(Default)]
    struct Shared {
        windows: HashMap<u64, i64>,
        tat: u64,
    }

    impl Shared {
        /// One server's sync at `now`: its counts in, the totals back.
        fn sync(&mut self, table: &SyncTable<()>, now: u64) {
            for out in table.due(now, true) {
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
                        if bookings.add > 0 {
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
        let servers = [SyncTable::new(), SyncTable::new()];
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
            let table = SyncTable::new();
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
        let table = SyncTable::new();
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
        let table = SyncTable::new();
        let now = 5_000 * MS;
        for _ in 0..3 {
            table.acquire(&check(Algorithm::FixedWindow, &quota), now, 1, || ());
        }
        for out in table.due(now, true) {
            table.settle(&out, None, now);
        }
        let mut shared = Shared::default();
        shared.sync(&table, now);
        assert_eq!(shared.windows.values().sum::<i64>(), 3);
    }

    #[test]
    fn a_key_idle_past_its_period_is_forgotten() {
        let quota = Quota::new(10, Duration::from_secs(1)).unwrap();
        let table = SyncTable::new();
        table.acquire(&check(Algorithm::FixedWindow, &quota), 5_000 * MS, 1, || ());
        assert_eq!(table.due(5_000 * MS, true).len(), 1);
        // Unanswered: kept until answered.
        assert!(table.due(60_000 * MS, true).is_empty());
        let mut shared = Shared::default();
        shared.sync(&table, 60_000 * MS);
        let table_empty = table.due(60_000 * MS, true).is_empty();
        assert!(table_empty);
    }

    proptest! {
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
