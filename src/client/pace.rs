//! Pacing: a local copy of each quota a server announces, so that a client spreads its
//! requests over the quota's window instead of spending it at once and meeting refusals.
//!
//! A quota of `q` units per `w` is kept as GCRA keeps a bucket of `q` that refills `q` per
//! `w`: one timestamp, the time at which the bucket would be full again. Each response that
//! says how much is left (`r`) moves that time to no earlier than the server's, so the copy
//! never thinks it has more than the server does.

use super::headers::AnnouncedQuota;
use super::hold::{Origin, Partition};
use crate::clock::Nanos;
use parking_lot::Mutex;
use smallvec::{smallvec, SmallVec};
use std::collections::HashMap;
use std::time::Duration;

/// The most quotas kept for one origin and partition; a server announcing more (a quota per
/// route, say) has the one announced longest ago forgotten.
const MOST_QUOTAS: usize = 8;

/// The quotas of one origin, by the partition of the requests they were announced to
/// (`None`: requests that named none).
type OriginPaces = HashMap<Option<Partition>, SmallVec<[Pace; 1]>>;

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
    /// ahead of now once a send is booked without a wait.
    full_at: Nanos,
    /// When a response last announced this quota.
    announced: Nanos,
}

impl Pace {
    fn new(quota: &AnnouncedQuota, now: Nanos) -> Self {
        let window = crate::clock::saturating_nanos(quota.window);
        let interval = window.div_ceil(quota.quota);
        Pace {
            quota: quota.quota,
            window,
            interval,
            span: interval.saturating_mul(quota.quota),
            full_at: now,
            announced: now,
        }
    }

    fn is(&self, quota: &AnnouncedQuota) -> bool {
        self.quota == quota.quota && self.window == crate::clock::saturating_nanos(quota.window)
    }

    /// How long from `now` until one more unit is there.
    fn wait(&self, now: Nanos) -> u64 {
        let after_send = self.full_at.max(now).plus(self.interval);
        after_send
            .as_u64()
            .saturating_sub(now.as_u64().saturating_add(self.span))
    }

    /// Spends one unit, at `now` or as soon as one is there.
    fn spend(&mut self, now: Nanos) {
        self.full_at = self.full_at.max(now).plus(self.interval);
    }

    /// Takes in what a response says of this quota at `now`.
    fn learn(&mut self, quota: &AnnouncedQuota, now: Nanos) {
        self.announced = now;
        if let Some(remaining) = quota.remaining {
            // `q - r` units are spent: the server's bucket is full again that much later.
            let spent = quota.quota.saturating_sub(remaining);
            let servers = now.plus(spent.saturating_mul(self.interval));
            self.full_at = self.full_at.max(servers);
        }
    }

    /// Makes the bucket empty at `then` (a refusal's wait ends then).
    fn empty_at(&mut self, then: Nanos) {
        self.full_at = self.full_at.max(then.plus(self.span));
    }

    /// Whether the quota is full and was last announced more than its window ago (the
    /// server stopped announcing it, or changed it). While not full, it still paces: a
    /// client held back by a refusal hears nothing of its quotas.
    fn is_stale(&self, now: Nanos) -> bool {
        now >= self.full_at && now.as_u64() > self.announced.as_u64().saturating_add(self.window)
    }
}

/// The quotas every origin announced; shared by the clones of a client layer.
#[derive(Debug, Default)]
pub(crate) struct Pacers {
    origins: Mutex<HashMap<Origin, OriginPaces>>,
}

impl Pacers {
    /// Books a send at `now` to `origin` for a request in `partition`, and returns how long
    /// the request must wait for its turn; if that is longer than `up_to`, books nothing
    /// and returns the wait as the error.
    ///
    /// A request in a partition is paced by its partition's quotas and by those announced to
    /// requests that named none; a request that names none, by those only.
    pub(crate) fn book(
        &self,
        origin: &Origin,
        partition: Option<&Partition>,
        now: Nanos,
        up_to: Duration,
    ) -> Result<Duration, Duration> {
        let mut origins = self.origins.lock();
        let Some(paces) = origins.get_mut(origin) else {
            return Ok(Duration::ZERO);
        };
        let scopes: SmallVec<[Option<Partition>; 2]> = match partition {
            Some(partition) => smallvec![None, Some(partition.clone())],
            None => smallvec![None],
        };
        let wait = scopes
            .iter()
            .filter_map(|scope| paces.get(scope))
            .flatten()
            .map(|pace| pace.wait(now))
            .max()
            .unwrap_or(0);
        let wait = Duration::from_nanos(wait);
        if wait > up_to {
            return Err(wait);
        }
        for scope in &scopes {
            if let Some(paces) = paces.get_mut(scope) {
                paces.iter_mut().for_each(|pace| pace.spend(now));
            }
        }
        Ok(wait)
    }

    /// Takes in the quotas a response to a request to `origin` in `partition` announced,
    /// and, if it was refused for `refused_for`, that each quota of that scope is empty when
    /// the wait ends: from then on the client sends at the quota's pace, where a window that
    /// opens again would otherwise see the whole quota at once.
    pub(crate) fn learn(
        &self,
        origin: &Origin,
        partition: Option<&Partition>,
        quotas: &[AnnouncedQuota],
        refused_for: Option<Duration>,
        now: Nanos,
    ) {
        let mut origins = self.origins.lock();
        if quotas.is_empty() {
            // A refusal that announces no quota: only the quotas already known empty.
            let known = origins
                .get_mut(origin)
                .and_then(|scopes| scopes.get_mut(&partition.cloned()));
            if let (Some(paces), Some(wait)) = (known, refused_for) {
                let wait_ends = now.plus(crate::clock::saturating_nanos(wait));
                paces.iter_mut().for_each(|pace| pace.empty_at(wait_ends));
            }
            return;
        }
        if !origins.contains_key(origin) {
            // A new origin: first forget the origins whose quotas all went stale, so that the
            // table holds only the servers that still announce theirs.
            origins.retain(|_, scopes| {
                scopes.retain(|_, paces| {
                    paces.retain(|pace| !pace.is_stale(now));
                    !paces.is_empty()
                });
                !scopes.is_empty()
            });
            origins.insert(origin.clone(), OriginPaces::default());
        }
        // Looked up again rather than through `entry`, which would take the origin by value:
        // an allocation for each response.
        let scopes = origins.get_mut(origin).expect("present: inserted above");
        let paces = scopes.entry(partition.cloned()).or_default();
        paces.retain(|pace| !pace.is_stale(now));
        for quota in quotas {
            match paces.iter_mut().find(|pace| pace.is(quota)) {
                Some(pace) => pace.learn(quota, now),
                None => {
                    if paces.len() == MOST_QUOTAS {
                        let oldest = (0..paces.len()).min_by_key(|&i| paces[i].announced);
                        oldest.map(|i| paces.remove(i));
                    }
                    let mut pace = Pace::new(quota, now);
                    pace.learn(quota, now);
                    paces.push(pace);
                }
            }
        }
        if let Some(wait) = refused_for {
            let wait_ends = now.plus(crate::clock::saturating_nanos(wait));
            paces.iter_mut().for_each(|pace| pace.empty_at(wait_ends));
        }
    }

    /// The number of origins kept (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.origins.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const SECOND: u64 = 1_000 * MS;

    fn origin() -> Origin {
        Origin::of(&"http://a.example/".parse().unwrap(), None)
    }

    fn quota(quota: u64, window_secs: u64, remaining: Option<u64>) -> AnnouncedQuota {
        AnnouncedQuota {
            quota,
            window: Duration::from_secs(window_secs),
            remaining,
        }
    }

    /// Books sends at `now` until one would wait; how many were booked.
    fn sends_now(pacers: &Pacers, partition: Option<&Partition>, now: Nanos) -> usize {
        let mut sent = 0;
        while pacers
            .book(&origin(), partition, now, Duration::ZERO)
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
                pacers.book(&origin(), None, now, Duration::ZERO),
                Ok(Duration::ZERO)
            );
        }
    }

    #[test]
    fn a_quota_allows_what_is_left_at_once_then_one_unit_per_interval() {
        let pacers = Pacers::default();
        let now = Nanos::new(10 * SECOND);
        // 40 per 2 s (20 a second, bursts of 40), 39 left after the first request.
        pacers.learn(&origin(), None, &[quota(40, 2, Some(39))], None, now);
        assert_eq!(sends_now(&pacers, None, now), 39);
        assert_eq!(
            pacers.book(&origin(), None, now, Duration::ZERO),
            Err(Duration::from_millis(50))
        );
        assert_eq!(sends_now(&pacers, None, now.plus(50 * MS)), 1);
        // Over the next second, 20 more: the sustained rate.
        let sent: usize = (1..=20)
            .map(|i| sends_now(&pacers, None, now.plus(50 * MS + i * 50 * MS)))
            .sum();
        assert_eq!(sent, 20);
    }

    #[test]
    fn a_booked_wait_is_returned_and_spent() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        pacers.learn(&origin(), None, &[quota(10, 1, Some(0))], None, now);
        let up_to = Duration::from_millis(250);
        let waits: Vec<_> = (0..3)
            .map(|_| pacers.book(&origin(), None, now, up_to))
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
            pacers.book(&origin(), None, now, Duration::from_secs(1)),
            Ok(Duration::from_millis(300))
        );
    }

    #[test]
    fn the_server_s_remaining_count_only_ever_lowers_the_copy() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        pacers.learn(&origin(), None, &[quota(10, 1, Some(10))], None, now);
        // Another client spent 8 of the quota: the server says 2 are left.
        pacers.learn(&origin(), None, &[quota(10, 1, Some(2))], None, now);
        assert_eq!(sends_now(&pacers, None, now), 2);
        // An answer to a request sent before those two says 9 were left: not believed.
        pacers.learn(&origin(), None, &[quota(10, 1, Some(9))], None, now);
        assert_eq!(sends_now(&pacers, None, now), 0);
    }

    #[test]
    fn a_refusal_empties_the_quotas_when_its_wait_ends() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        // A window of 20 a second, spent; refused for the 400 ms left of it.
        pacers.learn(&origin(), None, &[quota(20, 1, Some(0))], None, now);
        let refused_for = Some(Duration::from_millis(400));
        pacers.learn(&origin(), None, &[quota(20, 1, Some(0))], refused_for, now);
        // When the window opens again, one request every 50 ms, not 20 at once.
        let opens = now.plus(400 * MS);
        assert_eq!(sends_now(&pacers, None, opens), 0);
        assert_eq!(sends_now(&pacers, None, opens.plus(50 * MS)), 1);
        assert_eq!(sends_now(&pacers, None, opens.plus(100 * MS)), 1);
    }

    #[test]
    fn every_quota_must_allow_the_send() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        let quotas = [quota(100, 1, Some(100)), quota(5, 60, Some(3))];
        pacers.learn(&origin(), None, &quotas, None, now);
        assert_eq!(sends_now(&pacers, None, now), 3);
        assert_eq!(
            pacers.book(&origin(), None, now, Duration::ZERO),
            Err(Duration::from_secs(12))
        );
    }

    #[test]
    fn partitions_are_paced_apart_and_by_the_unnamed_quotas() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        let (one, two) = (Partition::new("one"), Partition::new("two"));
        pacers.learn(&origin(), Some(&one), &[quota(2, 1, Some(2))], None, now);
        for _ in 0..100 {
            let unpaced = pacers.book(&origin(), Some(&two), now, Duration::ZERO);
            assert_eq!(unpaced, Ok(Duration::ZERO), "partition two has no quota");
        }
        assert_eq!(sends_now(&pacers, Some(&one), now), 2);
        pacers.learn(&origin(), None, &[quota(3, 1, Some(3))], None, now);
        assert_eq!(sends_now(&pacers, Some(&one), now.plus(SECOND)), 2);
        assert_eq!(
            sends_now(&pacers, None, now.plus(SECOND)),
            1,
            "3 less the 2 above"
        );
    }

    #[test]
    fn a_quota_no_longer_announced_is_forgotten_after_its_window() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        pacers.learn(&origin(), None, &[quota(1, 10, Some(0))], None, now);
        // The server raised the quota: the old one still paces within its window...
        let later = now.plus(5 * SECOND);
        pacers.learn(&origin(), None, &[quota(100, 10, Some(100))], None, later);
        assert_eq!(sends_now(&pacers, None, later), 0);
        // ...and is forgotten once its window has passed without it.
        let after = now.plus(11 * SECOND);
        pacers.learn(&origin(), None, &[quota(100, 10, None)], None, after);
        assert_eq!(sends_now(&pacers, None, after), 100);
    }

    #[test]
    fn origins_whose_quotas_went_stale_are_dropped() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        let other = Origin::of(&"http://b.example/".parse().unwrap(), None);
        pacers.learn(&origin(), None, &[quota(5, 1, None)], None, now);
        pacers.learn(
            &other,
            None,
            &[quota(5, 1, None)],
            None,
            now.plus(2 * SECOND),
        );
        assert_eq!(pacers.len(), 1);
    }

    #[test]
    fn at_most_eight_quotas_are_kept_per_scope() {
        let pacers = Pacers::default();
        let now = Nanos::new(SECOND);
        for n in 1..=9 {
            pacers.learn(&origin(), None, &[quota(n, 60, Some(n))], None, now.plus(n));
        }
        let origins = pacers.origins.lock();
        let kept: Vec<u64> = origins[&origin()][&None].iter().map(|p| p.quota).collect();
        assert_eq!(kept, [2, 3, 4, 5, 6, 7, 8, 9]);
    }
}
