//! Pacing: a local copy of each quota a server announces, so that a client spreads its
//! requests over the quota's window instead of spending it at once and meeting refusals.
//!
//! A quota of `q` units per `w` is kept as GCRA keeps a bucket of `q` that refills `q` per
//! `w`: one timestamp, the time at which the bucket would be full again. Each response that
//! says how much is left (`r`) moves that time to no earlier than the server's, so the copy
//! never thinks it has more than the server does.
//!
//! Quotas belong to an origin, and to a partition of it when the server names one (`pk`),
//! as holds do. The quotas of at most `MOST_ORIGINS` origins are kept, and of at most
//! `MOST_PARTITIONS` partitions of each (besides the whole origin's): past either, the one
//! announced longest ago is forgotten, and paces nothing until it is announced again.

use super::announcement::AnnouncedQuota;
use super::hold::{Origin, Partition, MOST_ORIGINS, MOST_PARTITIONS};
use crate::clock::{saturating_nanos, Nanos};
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::time::Duration;

/// The most quotas kept for one partition of an origin (or for the origin as a whole); a
/// server announcing more has the one announced longest ago forgotten.
const MOST_QUOTAS: usize = 8;

/// The fewest partitions of one origin at which stale ones are looked for.
const FIRST_SWEEP: usize = 16;

/// One announced quota, kept as GCRA keeps a bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pace {
    quota: u64,
    /// `w` in nanoseconds.
    window: u64,
    /// `w / q` in nanoseconds, rounded up: one unit comes back this often.
    interval: u64,
    /// `q` intervals: how long the whole quota takes to come back (`w`, or a few
    /// nanoseconds more after rounding).
    span: u64,
    /// When the bucket is full again (GCRA's theoretical arrival time); at most `span`
    /// ahead of a send booked without a wait.
    full_at: Nanos,
    /// When a response last announced this quota, or a refusal's wait for it ends.
    announced: Nanos,
}

impl Pace {
    /// A copy of `quota`, announced at `now` by the answer to a request that spent a unit
    /// of it (so one unit is spent when the server does not say what is left).
    fn new(quota: &AnnouncedQuota, now: Nanos) -> Self {
        let window = saturating_nanos(quota.window);
        let interval = window.div_ceil(quota.quota);
        let mut pace = Pace {
            quota: quota.quota,
            window,
            interval,
            span: interval.saturating_mul(quota.quota),
            full_at: now,
            announced: now,
        };
        pace.learn(Some(quota.remaining.unwrap_or(quota.quota - 1)), now);
        pace
    }

    fn is_same_quota(&self, quota: &AnnouncedQuota) -> bool {
        self.quota == quota.quota && self.window == saturating_nanos(quota.window)
    }

    /// How long after `at` one more unit is there.
    fn wait(&self, at: Nanos) -> u64 {
        let after_send = self.full_at.max(at).plus(self.interval);
        after_send
            .as_u64()
            .saturating_sub(at.as_u64().saturating_add(self.span))
    }

    /// Brings the time the bucket is full again forward, if need be, so that a send booked
    /// at `at` waits at most `longest` nanoseconds.
    fn wait_at_most(&mut self, at: Nanos, longest: u64) {
        let latest = at
            .plus(self.span.saturating_sub(self.interval))
            .plus(longest);
        self.full_at = self.full_at.min(latest);
    }

    /// Spends one unit, at `at` or as soon as one is there.
    fn spend(&mut self, at: Nanos) {
        self.full_at = self.full_at.max(at).plus(self.interval);
    }

    /// Takes in that the server had `remaining` units left at `now`.
    fn learn(&mut self, remaining: Option<u64>, now: Nanos) {
        self.announced = self.announced.max(now);
        if let Some(remaining) = remaining {
            // `q - r` units are spent: the server's bucket is full again that much later.
            let spent = self.quota.saturating_sub(remaining);
            let servers = now.plus(spent.saturating_mul(self.interval));
            self.full_at = self.full_at.max(servers);
        }
    }

    /// Makes the bucket empty at `then`, when a refusal's wait ends.
    fn empty_at(&mut self, then: Nanos) {
        self.full_at = self.full_at.max(then.plus(self.span));
        self.announced = self.announced.max(then);
    }

    /// Whether the quota was last announced (or its refusal's wait ended) more than its
    /// window ago: the server stopped announcing it, or changed it.
    fn is_stale(&self, now: Nanos) -> bool {
        now.as_u64() > self.announced.as_u64().saturating_add(self.window)
    }
}

/// The quotas of one partition of an origin, or of the whole origin.
type Paces = SmallVec<[Pace; 1]>;

/// When the latest of `paces` was announced.
fn last_announced<'a>(paces: impl IntoIterator<Item = &'a Pace>) -> Nanos {
    paces
        .into_iter()
        .map(|pace| pace.announced)
        .max()
        .unwrap_or_default()
}

/// The quotas of one origin, by partition (`None`: the whole origin's).
#[derive(Debug, Default)]
struct OriginPaces {
    scopes: HashMap<Option<Partition>, Paces>,
    /// At how many partitions the stale ones are looked for next: twice as many as were
    /// left after the last look, so that each look is paid for by the partitions added.
    sweep_at: usize,
}

impl OriginPaces {
    /// Forgets the stale quotas at `now`, and the partitions left with none.
    fn sweep(&mut self, now: Nanos) {
        self.scopes.retain(|_, paces| {
            paces.retain(|pace| !pace.is_stale(now));
            !paces.is_empty()
        });
        self.sweep_at = (2 * self.scopes.len()).max(FIRST_SWEEP);
    }

    /// The number of partitions with quotas kept (the whole origin's not counted).
    fn partitions(&self) -> usize {
        self.scopes.len() - usize::from(self.scopes.contains_key(&None))
    }

    /// Makes room for one more partition at `now`: forgets the stale quotas, then, if
    /// `MOST_PARTITIONS` partitions are still kept, the partition announced longest ago.
    fn make_room_for_a_partition(&mut self, now: Nanos) {
        if self.partitions() < MOST_PARTITIONS {
            return;
        }
        self.sweep(now);
        if self.partitions() < MOST_PARTITIONS {
            return;
        }
        let oldest = self
            .scopes
            .iter()
            .filter(|(scope, _)| scope.is_some())
            .min_by_key(|(_, paces)| last_announced(paces.iter()))
            .map(|(scope, _)| scope.clone());
        if let Some(oldest) = oldest {
            self.scopes.remove(&oldest);
        }
    }
}

/// The quotas every origin announced; shared by the clones of a client layer.
#[derive(Debug, Default)]
pub(crate) struct Pacers {
    origins: Mutex<HashMap<Origin, OriginPaces>>,
}

impl Pacers {
    /// Books a send at `at` to `origin` for a request in `partition`, and returns how long
    /// after `at` its turn comes; if that is longer than `up_to`, books nothing and returns
    /// the wait as the error. No turn is more than `max_hold` after `at`: a quota whose copy
    /// would hold the request longer gives its next unit back then.
    ///
    /// A request is paced by its origin's quotas that belong to no partition and by those
    /// of its partition; a request that names no partition, by every quota of its origin
    /// (it may be in any of them), as holds hold it.
    pub(crate) fn book(
        &self,
        origin: &Origin,
        partition: Option<&Partition>,
        at: Nanos,
        up_to: Duration,
        max_hold: Duration,
    ) -> Result<Duration, Duration> {
        let mut origins = self.origins.lock();
        let Some(origin) = origins.get_mut(origin) else {
            return Ok(Duration::ZERO);
        };
        let scopes = &mut origin.scopes;
        let max_hold = saturating_nanos(max_hold);
        let wait_of = |pace: &mut Pace| {
            pace.wait_at_most(at, max_hold);
            pace.wait(at)
        };
        let mut wait = 0;
        match partition {
            Some(partition) => {
                for scope in [None, Some(partition.clone())] {
                    let paces = scopes.get_mut(&scope).into_iter().flatten();
                    wait = paces.map(wait_of).fold(wait, u64::max);
                }
            }
            None => {
                let paces = scopes.values_mut().flatten();
                wait = paces.map(wait_of).fold(wait, u64::max);
            }
        }
        let wait = Duration::from_nanos(wait);
        if wait > up_to {
            return Err(wait);
        }
        match partition {
            Some(partition) => {
                for scope in [None, Some(partition.clone())] {
                    let paces = scopes.get_mut(&scope).into_iter().flatten();
                    paces.for_each(|pace| pace.spend(at));
                }
            }
            None => scopes
                .values_mut()
                .flatten()
                .for_each(|pace| pace.spend(at)),
        }
        Ok(wait)
    }

    /// Takes in the quotas an answer from `origin` announced at `now`, and, if it was a
    /// refusal for `refused_for`, that each quota it says is spent is empty when the wait
    /// ends: from then on the client sends at the quota's pace, where a window that opens
    /// again would otherwise see the whole quota at once.
    pub(crate) fn learn(
        &self,
        origin: &Origin,
        quotas: &[AnnouncedQuota],
        refused_for: Option<Duration>,
        now: Nanos,
    ) {
        let mut origins = self.origins.lock();
        if !origins.contains_key(origin) {
            // A new origin: first forget the origins whose quotas all went stale, so that
            // the table holds only the servers that still announce theirs; if it is still
            // full, the origin announced longest ago.
            origins.retain(|_, paces| {
                paces.sweep(now);
                !paces.scopes.is_empty()
            });
            if origins.len() >= MOST_ORIGINS {
                let oldest = origins
                    .iter()
                    .min_by_key(|(_, paces)| last_announced(paces.scopes.values().flatten()))
                    .map(|(origin, _)| origin.clone());
                if let Some(oldest) = oldest {
                    origins.remove(&oldest);
                }
            }
            origins.insert(origin.clone(), OriginPaces::default());
        }
        // Looked up again rather than through `entry`, which would take the origin by value:
        // an allocation for each answer.
        let paces = origins.get_mut(origin).expect("present: inserted above");
        let wait_ends = refused_for.map(|wait| now.plus(saturating_nanos(wait)));
        for quota in quotas {
            if quota.partition.is_some() && !paces.scopes.contains_key(&quota.partition) {
                paces.make_room_for_a_partition(now);
            }
            let scope = paces.scopes.entry(quota.partition.clone()).or_default();
            scope.retain(|pace| !pace.is_stale(now));
            let pace = match scope.iter().position(|pace| pace.is_same_quota(quota)) {
                Some(known) => {
                    scope[known].learn(quota.remaining, now);
                    &mut scope[known]
                }
                None => {
                    if scope.len() == MOST_QUOTAS {
                        let oldest = (0..scope.len()).min_by_key(|&i| scope[i].announced);
                        if let Some(oldest) = oldest {
                            scope.remove(oldest);
                        }
                    }
                    scope.push(Pace::new(quota, now));
                    let last = scope.len() - 1;
                    &mut scope[last]
                }
            };
            if let (Some(then), Some(0)) = (wait_ends, quota.remaining) {
                pace.empty_at(then);
            }
        }
        if paces.scopes.len() >= paces.sweep_at {
            paces.sweep(now);
        }
    }

    /// Forgets the quotas of `origin`, or of every origin when `None`: requests to it are
    /// not paced until its server announces them again.
    pub(crate) fn clear(&self, origin: Option<&Origin>) {
        let mut origins = self.origins.lock();
        match origin {
            Some(origin) => {
                origins.remove(origin);
            }
            None => origins.clear(),
        }
    }

    /// The number of origins kept (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.origins.lock().len()
    }

    /// The quotas (`q`) kept for `origin`'s `partition` (for tests).
    #[cfg(test)]
    fn quotas(&self, origin: &Origin, partition: Option<Partition>) -> Vec<u64> {
        let origins = self.origins.lock();
        let scope = origins
            .get(origin)
            .and_then(|paces| paces.scopes.get(&partition));
        scope.into_iter().flatten().map(|pace| pace.quota).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const SECOND: u64 = 1_000 * MS;
    /// The longest a quota may hold a request back: the default `max_hold`.
    const HOUR: Duration = Duration::from_secs(3_600);

    fn origin() -> Origin {
        Origin::of(&"http://a.example/".parse().unwrap(), None)
    }

    fn quota(quota: u64, window_secs: u64, remaining: Option<u64>) -> AnnouncedQuota {
        AnnouncedQuota {
            quota,
            window: Duration::from_secs(window_secs),
            remaining,
            partition: None,
        }
    }

    fn in_partition(mut quota: AnnouncedQuota, key: &'static str) -> AnnouncedQuota {
        quota.partition = Some(Partition::new(key));
        quota
    }

    /// Books sends at `at` until one would wait; how many were booked.
    fn sends_at(pacers: &Pacers, partition: Option<&Partition>, at: Nanos) -> usize {
        let mut sent = 0;
        while pacers
            .book(&origin(), partition, at, Duration::ZERO, HOUR)
            .is_ok()
        {
            sent += 1;
            assert!(sent <= 10_000, "never paced");
        }
        sent
    }

    #[test]
    fn nothing_is_paced_before_a_quota_is_announced() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        for _ in 0..1000 {
            assert_eq!(
                pacers.book(&origin(), None, now, Duration::ZERO, HOUR),
                Ok(Duration::ZERO)
            );
        }
    }

    #[test]
    fn a_quota_allows_what_is_left_at_once_then_one_unit_per_interval() {
        let pacers = Pacers::default();
        let now = Nanos::new(10 * SECOND);
        // 40 per 2 s (20 a second, bursts of 40), 39 left after the first request.
        pacers.learn(&origin(), &[quota(40, 2, Some(39))], None, now);
        assert_eq!(sends_at(&pacers, None, now), 39);
        assert_eq!(
            pacers.book(&origin(), None, now, Duration::ZERO, HOUR),
            Err(Duration::from_millis(50))
        );
        assert_eq!(sends_at(&pacers, None, now.plus(50 * MS)), 1);
        // Over the next second, 20 more: the sustained rate.
        let sent: usize = (1..=20)
            .map(|i| sends_at(&pacers, None, now.plus(50 * MS + i * 50 * MS)))
            .sum();
        assert_eq!(sent, 20);
    }

    #[test]
    fn a_new_quota_without_what_is_left_counts_the_request_that_brought_it() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        pacers.learn(&origin(), &[quota(5, 1, None)], None, now);
        assert_eq!(sends_at(&pacers, None, now), 4);
    }

    #[test]
    fn a_booked_wait_is_returned_and_spent() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        pacers.learn(&origin(), &[quota(10, 1, Some(0))], None, now);
        let up_to = Duration::from_millis(250);
        let waits: Vec<_> = (0..3)
            .map(|_| pacers.book(&origin(), None, now, up_to, HOUR))
            .collect();
        assert_eq!(
            waits,
            [
                Ok(Duration::from_millis(100)),
                Ok(Duration::from_millis(200)),
                Err(Duration::from_millis(300)),
            ]
        );
        // The refused booking took nothing: the third send waits 300 ms, not 400.
        assert_eq!(
            pacers.book(&origin(), None, now, Duration::from_secs(1), HOUR),
            Ok(Duration::from_millis(300))
        );
    }

    #[test]
    fn a_send_booked_later_waits_from_then() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        pacers.learn(&origin(), &[quota(10, 1, Some(0))], None, now);
        // Booked for 1 s from now, when the bucket is full again: no further wait.
        let later = now.plus(SECOND);
        assert_eq!(
            pacers.book(&origin(), None, later, Duration::ZERO, HOUR),
            Ok(Duration::ZERO)
        );
        // And it was spent then: 9 more at that instant, not 10.
        assert_eq!(sends_at(&pacers, None, later), 9);
    }

    #[test]
    fn the_server_s_remaining_count_only_ever_lowers_the_copy() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        pacers.learn(&origin(), &[quota(10, 1, Some(10))], None, now);
        // Another client spent 8 of the quota: the server says 2 are left.
        pacers.learn(&origin(), &[quota(10, 1, Some(2))], None, now);
        assert_eq!(sends_at(&pacers, None, now), 2);
        // An answer to a request sent before those two says 9 were left: not believed.
        pacers.learn(&origin(), &[quota(10, 1, Some(9))], None, now);
        assert_eq!(sends_at(&pacers, None, now), 0);
    }

    #[test]
    fn a_refusal_empties_the_spent_quota_when_its_wait_ends() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        // A window of 20 a second, spent; refused for the 400 ms left of it.
        pacers.learn(&origin(), &[quota(20, 1, Some(0))], None, now);
        let refused_for = Some(Duration::from_millis(400));
        pacers.learn(&origin(), &[quota(20, 1, Some(0))], refused_for, now);
        // When the window opens again, one request every 50 ms, not 20 at once.
        let opens = now.plus(400 * MS);
        assert_eq!(sends_at(&pacers, None, opens), 0);
        assert_eq!(sends_at(&pacers, None, opens.plus(50 * MS)), 1);
        assert_eq!(sends_at(&pacers, None, opens.plus(100 * MS)), 1);
    }

    #[test]
    fn a_refusal_leaves_the_quotas_it_does_not_say_are_spent() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        // Refused by the burst quota; the day's quota has plenty left.
        let refusal = [quota(40, 2, Some(0)), quota(1000, 86_400, Some(900))];
        pacers.learn(&origin(), &refusal, Some(Duration::from_millis(50)), now);
        let later = now.plus(SECOND);
        // A second later the burst quota has given back 20 (less its 50 ms): the day's
        // quota does not stand in the way.
        assert_eq!(sends_at(&pacers, None, later), 19);
        // A refusal that says nothing of the quotas empties none.
        let pacers = Pacers::default();
        pacers.learn(&origin(), &[quota(10, 1, Some(10))], None, now);
        pacers.learn(&origin(), &[], Some(Duration::from_secs(1)), now);
        assert_eq!(sends_at(&pacers, None, now), 10);
    }

    #[test]
    fn every_quota_must_allow_the_send() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        let quotas = [quota(100, 1, Some(100)), quota(5, 60, Some(3))];
        pacers.learn(&origin(), &quotas, None, now);
        assert_eq!(sends_at(&pacers, None, now), 3);
        assert_eq!(
            pacers.book(&origin(), None, now, Duration::ZERO, HOUR),
            Err(Duration::from_secs(12))
        );
    }

    #[test]
    fn a_partition_s_quota_paces_its_requests_and_those_that_name_none() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        let (one, two) = (Partition::new("one"), Partition::new("two"));
        pacers.learn(
            &origin(),
            &[in_partition(quota(2, 1, Some(2)), "one")],
            None,
            now,
        );
        for _ in 0..100 {
            let unpaced = pacers.book(&origin(), Some(&two), now, Duration::ZERO, HOUR);
            assert_eq!(unpaced, Ok(Duration::ZERO), "partition two has no quota");
        }
        assert_eq!(sends_at(&pacers, Some(&one), now), 2);
        // A request in no partition may be in partition one.
        assert!(pacers
            .book(&origin(), None, now, Duration::ZERO, HOUR)
            .is_err());
    }

    #[test]
    fn a_quota_of_the_whole_origin_paces_every_partition_together() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        let (one, two) = (Partition::new("one"), Partition::new("two"));
        pacers.learn(&origin(), &[quota(3, 1, Some(3))], None, now);
        assert_eq!(sends_at(&pacers, Some(&one), now), 3);
        assert_eq!(sends_at(&pacers, Some(&two), now), 0, "one bucket for all");
    }

    #[test]
    fn a_quota_no_longer_announced_is_forgotten_after_its_window_even_while_busy() {
        let pacers = Pacers::default();
        let mut now = Nanos::new(SECOND);
        // 40 per 2 s, and a client asking 100 a second for 5 s.
        pacers.learn(&origin(), &[quota(40, 2, Some(0))], None, now);
        let mut sent = 0;
        for _ in 0..500 {
            now = now.plus(10 * MS);
            if pacers
                .book(&origin(), None, now, Duration::ZERO, HOUR)
                .is_ok()
            {
                sent += 1;
                // The server announces 400 per 2 s now.
                pacers.learn(&origin(), &[quota(400, 2, Some(399))], None, now);
            }
        }
        // 20 a second until the old quota went stale, 2 s after its announcement; then
        // all 100 a second. Kept, it would have allowed 100 in all.
        assert!(sent >= 300, "sent {sent}");
        assert_eq!(pacers.quotas(&origin(), None), [400]);
    }

    #[test]
    fn stale_origins_and_partitions_are_dropped() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        let other = Origin::of(&"http://b.example/".parse().unwrap(), None);
        pacers.learn(&origin(), &[quota(5, 1, None)], None, now);
        pacers.learn(&other, &[quota(5, 1, None)], None, now.plus(2 * SECOND));
        assert_eq!(pacers.len(), 1);

        // 10,000 users of one origin, each announced once a second apart: the stale ones
        // are swept as new ones come.
        let pacers = Pacers::default();
        for user in 0..10_000_u64 {
            let quota = AnnouncedQuota {
                partition: Some(Partition::new(user.to_be_bytes().to_vec())),
                ..quota(5, 1, None)
            };
            pacers.learn(&origin(), &[quota], None, now.plus(user * SECOND));
        }
        let kept = pacers.origins.lock()[&origin()].scopes.len();
        assert!(kept <= FIRST_SWEEP, "{kept} partitions kept");
    }

    #[test]
    fn at_most_eight_quotas_are_kept_per_partition() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        for n in 1..=9 {
            pacers.learn(&origin(), &[quota(n, 60, Some(n))], None, now.plus(n));
        }
        assert_eq!(pacers.quotas(&origin(), None), [2, 3, 4, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn no_quota_holds_a_request_back_longer_than_max_hold() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        // One a day, spent: the next unit is a day away.
        pacers.learn(&origin(), &[quota(1, 86_400, Some(0))], None, now);
        let book = |at: Nanos| pacers.book(&origin(), None, at, Duration::ZERO, HOUR);
        assert_eq!(book(now), Err(HOUR));
        let ten_seconds = Duration::from_secs(10);
        let held = pacers.book(&origin(), None, now, Duration::ZERO, ten_seconds);
        assert_eq!(held, Err(ten_seconds), "the copy was brought forward");
        assert_eq!(book(now.plus(10 * SECOND)), Ok(Duration::ZERO));
        // Then one an hour at most apart, not one a day.
        assert_eq!(book(now.plus(10 * SECOND)), Err(HOUR));

        // A refusal for an hour that spent the quota: the turn after it is within the hour.
        let pacers = Pacers::default();
        let spent = [quota(1, 86_400, Some(0))];
        pacers.learn(&origin(), &spent, Some(HOUR), now);
        let turn = pacers.book(&origin(), None, now, Duration::ZERO, HOUR);
        assert_eq!(turn, Err(HOUR));
    }

    #[test]
    fn past_the_most_partitions_the_one_announced_longest_ago_is_forgotten() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        let partition = |i: u64| Partition::new(i.to_be_bytes().to_vec());
        let per_user = |i: u64| AnnouncedQuota {
            partition: Some(partition(i)),
            ..quota(5, 86_400, None)
        };
        pacers.learn(&origin(), &[quota(100, 86_400, None)], None, now);
        // Partition `i` announced at `i` seconds: partition 0 longest ago.
        for i in 0..=MOST_PARTITIONS as u64 {
            pacers.learn(&origin(), &[per_user(i)], None, now.plus(i * SECOND));
        }
        assert!(pacers.quotas(&origin(), Some(partition(0))).is_empty());
        let last = Some(partition(MOST_PARTITIONS as u64));
        assert_eq!(pacers.quotas(&origin(), last), [5]);
        assert_eq!(
            pacers.quotas(&origin(), None),
            [100],
            "the whole origin's stays"
        );

        // A flood of partitions whose quotas never go stale stays within the bound.
        for i in 0..10_000 {
            pacers.learn(&origin(), &[per_user(i)], None, now.plus(100 * SECOND + i));
        }
        let kept = pacers.origins.lock()[&origin()].partitions();
        assert_eq!(kept, MOST_PARTITIONS);
    }

    #[test]
    fn past_the_most_origins_the_one_announced_longest_ago_is_forgotten() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        let origin_number =
            |i: u64| Origin::of(&format!("http://host-{i}/").parse().unwrap(), None);
        let daily = [quota(5, 86_400, None)];
        // Origin `i` announced at `i` seconds: origin 0 longest ago.
        for i in 0..=MOST_ORIGINS as u64 {
            pacers.learn(&origin_number(i), &daily, None, now.plus(i * SECOND));
        }
        assert_eq!(pacers.len(), MOST_ORIGINS);
        assert!(pacers.quotas(&origin_number(0), None).is_empty());
        assert_eq!(pacers.quotas(&origin_number(1), None), [5]);

        for i in 0..3 * MOST_ORIGINS as u64 {
            let at = now.plus(10_000 * SECOND + i);
            pacers.learn(&origin_number(10_000 + i), &daily, None, at);
        }
        assert_eq!(pacers.len(), MOST_ORIGINS);
    }

    #[test]
    fn clearing_forgets_the_quotas_of_one_origin_or_of_all() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        let other = Origin::of(&"http://b.example/".parse().unwrap(), None);
        let spent = [quota(1, 86_400, Some(0))];
        pacers.learn(&origin(), &spent, None, now);
        pacers.learn(&other, &spent, None, now);

        pacers.clear(Some(&origin()));
        for _ in 0..10 {
            let unpaced = pacers.book(&origin(), None, now, Duration::ZERO, HOUR);
            assert_eq!(unpaced, Ok(Duration::ZERO));
        }
        let still_paced = pacers.book(&other, None, now, Duration::ZERO, HOUR);
        assert!(still_paced.is_err());

        pacers.clear(None);
        assert_eq!(pacers.len(), 0);
    }
}
