//! Who is held until when: the servers' announced waits, per origin and partition.

use crate::clock::Nanos;
use bytes::Bytes;
use http::Uri;
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The most origins whose holds or quotas a client layer remembers.
pub(crate) const MOST_ORIGINS: usize = 1024;

/// The most partitions of one origin whose holds or quotas a client layer remembers.
pub(crate) const MOST_PARTITIONS: usize = 64;

/// The server a request goes to: scheme, host and port, as in `https://api.example.com:443`.
///
/// Read from the request URI, with the scheme's default port filled in and the host in lower
/// case. A URI without a host (as a tonic `Channel` sees, or a client that adds the host
/// later) takes the `Host` header, and without that the unnamed origin `""`: one service
/// talking to one server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin(Box<str>);

impl Origin {
    /// The origin of a request for `uri` with the `Host` header `host`.
    pub(crate) fn of(uri: &Uri, host: Option<&http::HeaderValue>) -> Origin {
        let scheme = uri.scheme_str().unwrap_or("http").to_ascii_lowercase();
        let authority = uri
            .authority()
            .cloned()
            .or_else(|| host?.to_str().ok()?.parse().ok());
        let Some(authority) = authority else {
            return Origin("".into());
        };
        let (host, port) = (authority.host(), authority.port_u16());
        let port = port.or(match scheme.as_str() {
            "https" => Some(443),
            "http" => Some(80),
            _ => None,
        });
        let host = host.to_ascii_lowercase();
        Origin(match port {
            Some(port) => format!("{scheme}://{host}:{port}").into(),
            None => format!("{scheme}://{host}").into(),
        })
    }

    /// The origin as text, e.g. `http://127.0.0.1:3000`; `""` for the unnamed origin.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("(unnamed origin)")
        } else {
            f.write_str(&self.0)
        }
    }
}

/// A partition of a server's quota: the `pk` parameter of the IETF `RateLimit` fields,
/// decoded (a server may limit each user or API key separately and say which one a response
/// counted against).
///
/// A request tells the client layer its partition through its extensions; without one, a
/// request is held by every hold of its origin, because it may belong to any of them. A
/// refusal that names no partition holds the whole origin, whatever the request's partition.
///
/// ```
/// use tollgate::client::Partition;
///
/// let mut request = http::Request::new(());
/// request.extensions_mut().insert(Partition::new("user-42"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Partition(Bytes);

impl Partition {
    /// The partition with key `key` (the bytes of `pk`, not their base64 text).
    pub fn new(key: impl Into<Bytes>) -> Self {
        Partition(key.into())
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// The holds of one origin.
#[derive(Debug, Default)]
struct OriginHolds {
    /// Until when the whole origin is held.
    whole: Option<Nanos>,
    /// Until when each named partition is held (few: one per identity the client uses; at
    /// most `MOST_PARTITIONS`).
    partitions: SmallVec<[(Partition, Nanos); 1]>,
}

impl OriginHolds {
    /// The latest time that holds a request in `partition` (any partition when `None`).
    fn until(&self, partition: Option<&Partition>) -> Option<Nanos> {
        let partitions = self
            .partitions
            .iter()
            .filter(|(held, _)| partition.is_none_or(|p| p == held))
            .map(|&(_, until)| until);
        self.whole.into_iter().chain(partitions).max()
    }

    /// Holds `partition` until `until`, unless a later hold of it is there; past
    /// `MOST_PARTITIONS`, drops the partition hold that ends soonest.
    fn hold_partition(&mut self, partition: Partition, until: Nanos) {
        let partitions = &mut self.partitions;
        match partitions.iter_mut().find(|(held, _)| *held == partition) {
            Some((_, held)) => *held = (*held).max(until),
            None => partitions.push((partition, until)),
        }
        if partitions.len() > MOST_PARTITIONS {
            let soonest = (0..partitions.len()).min_by_key(|&i| partitions[i].1);
            if let Some(soonest) = soonest {
                partitions.swap_remove(soonest);
            }
        }
    }

    /// Drops the holds that end at or before `now`; whether none are left.
    fn drop_past(&mut self, now: Nanos) -> bool {
        self.whole = self.whole.filter(|&until| until > now);
        self.partitions.retain(|(_, until)| *until > now);
        self.whole.is_none() && self.partitions.is_empty()
    }
}

/// The holds of every origin a client talks to; shared by the clones of a client layer.
///
/// Entries are dropped once past (on the next look-up of their origin, and at every new
/// hold), so the map holds only the origins that are held now: at most `MOST_ORIGINS`, each
/// with at most `MOST_PARTITIONS` partitions. Beyond either, the hold that ends soonest is
/// dropped (the new one included), as the one that holds back the fewest requests: what
/// it held may be sent, and refused, once.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    origins: Mutex<HashMap<Origin, OriginHolds>>,
    /// The map's length, read without the lock: while nothing is held (the common case), a
    /// request takes no lock at all.
    held_origins: AtomicUsize,
}

impl Holds {
    /// Whether no origin is held. A hold written at this very moment may be missed, as if
    /// the request had been sent a moment earlier.
    pub(crate) fn is_empty(&self) -> bool {
        self.held_origins.load(Ordering::Acquire) == 0
    }

    /// How long a request to `origin` in `partition` is still held at `now`, if at all.
    pub(crate) fn remaining(
        &self,
        origin: &Origin,
        partition: Option<&Partition>,
        now: Nanos,
    ) -> Option<Duration> {
        let mut origins = self.origins.lock();
        let holds = origins.get_mut(origin)?;
        if holds.drop_past(now) {
            origins.remove(origin);
            self.held_origins.store(origins.len(), Ordering::Release);
            return None;
        }
        let until = holds.until(partition).filter(|&until| until > now)?;
        Some(until.since(now))
    }

    /// Holds `origin` (only `partition` of it, when named) until `until`; a later hold
    /// already there stays.
    pub(crate) fn hold(
        &self,
        origin: &Origin,
        partition: Option<Partition>,
        until: Nanos,
        now: Nanos,
    ) {
        let mut origins = self.origins.lock();
        origins.retain(|_, holds| !holds.drop_past(now));
        let holds = origins.entry(origin.clone()).or_default();
        match partition {
            None => holds.whole = Some(holds.whole.map_or(until, |held| held.max(until))),
            Some(partition) => holds.hold_partition(partition, until),
        }
        if origins.len() > MOST_ORIGINS {
            let soonest = origins
                .iter()
                .min_by_key(|(_, holds)| holds.until(None))
                .map(|(origin, _)| origin.clone());
            if let Some(soonest) = soonest {
                origins.remove(&soonest);
            }
        }
        self.held_origins.store(origins.len(), Ordering::Release);
    }

    /// Ends the holds of `origin` at once, or of every origin when `None`.
    pub(crate) fn clear(&self, origin: Option<&Origin>) {
        let mut origins = self.origins.lock();
        match origin {
            Some(origin) => {
                origins.remove(origin);
            }
            None => origins.clear(),
        }
        self.held_origins.store(origins.len(), Ordering::Release);
    }

    /// The number of origins held (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.origins.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    fn origin(uri: &str) -> Origin {
        Origin::of(&uri.parse().unwrap(), None)
    }

    #[test]
    fn origins_fill_in_default_ports_and_lower_case_hosts() {
        assert_eq!(
            origin("http://Example.COM/a?b").as_str(),
            "http://example.com:80"
        );
        assert_eq!(
            origin("https://example.com").as_str(),
            "https://example.com:443"
        );
        assert_eq!(
            origin("http://127.0.0.1:3000/").as_str(),
            "http://127.0.0.1:3000"
        );
        assert_eq!(origin("http://[::1]:8080/").as_str(), "http://[::1]:8080");
    }

    #[test]
    fn origins_without_a_host_take_the_host_header_or_none() {
        let host = http::HeaderValue::from_static("api.example.com:81");
        let uri: Uri = "/pkg.Service/Method".parse().unwrap();
        assert_eq!(
            Origin::of(&uri, Some(&host)).as_str(),
            "http://api.example.com:81"
        );
        assert_eq!(Origin::of(&uri, None).as_str(), "");
        let garbage = http::HeaderValue::from_static("not a host");
        assert_eq!(Origin::of(&uri, Some(&garbage)).as_str(), "");
    }

    #[test]
    fn a_hold_ends_at_its_time_and_is_then_dropped() {
        let holds = Holds::default();
        let a = origin("http://a/");
        let now = Nanos::new(100 * SECOND);
        assert!(holds.is_empty());
        holds.hold(&a, None, now.plus(2 * SECOND), now);
        assert!(!holds.is_empty());
        assert_eq!(holds.remaining(&a, None, now), Some(Duration::from_secs(2)));
        assert_eq!(
            holds.remaining(&a, None, now.plus(SECOND)),
            Some(Duration::from_secs(1))
        );
        assert_eq!(holds.remaining(&a, None, now.plus(2 * SECOND)), None);
        assert_eq!(holds.len(), 0);
        assert!(holds.is_empty());
    }

    #[test]
    fn other_origins_are_not_held() {
        let holds = Holds::default();
        let now = Nanos::new(SECOND);
        holds.hold(&origin("http://a/"), None, now.plus(SECOND), now);
        assert_eq!(holds.remaining(&origin("http://b/"), None, now), None);
        assert_eq!(holds.remaining(&origin("https://a/"), None, now), None);
    }

    #[test]
    fn a_shorter_hold_does_not_cut_a_longer_one() {
        let holds = Holds::default();
        let a = origin("http://a/");
        let now = Nanos::new(SECOND);
        holds.hold(&a, None, now.plus(5 * SECOND), now);
        holds.hold(&a, None, now.plus(SECOND), now);
        assert_eq!(holds.remaining(&a, None, now), Some(Duration::from_secs(5)));
    }

    #[test]
    fn a_partition_hold_holds_its_partition_and_requests_without_one() {
        let holds = Holds::default();
        let a = origin("http://a/");
        let now = Nanos::new(SECOND);
        let (one, two) = (Partition::new("one"), Partition::new("two"));
        holds.hold(&a, Some(one.clone()), now.plus(3 * SECOND), now);
        assert_eq!(
            holds.remaining(&a, Some(&one), now),
            Some(Duration::from_secs(3))
        );
        assert_eq!(holds.remaining(&a, Some(&two), now), None);
        assert_eq!(holds.remaining(&a, None, now), Some(Duration::from_secs(3)));
    }

    #[test]
    fn a_new_hold_drops_the_past_ones_of_other_origins() {
        let holds = Holds::default();
        let now = Nanos::new(SECOND);
        holds.hold(&origin("http://a/"), None, now.plus(SECOND), now);
        let later = now.plus(2 * SECOND);
        holds.hold(&origin("http://b/"), None, later.plus(SECOND), later);
        assert_eq!(holds.len(), 1);
    }

    #[test]
    fn past_the_most_partitions_the_hold_that_ends_soonest_is_dropped() {
        let holds = Holds::default();
        let a = origin("http://a/");
        let now = Nanos::new(SECOND);
        let partition = |i: u64| Partition::new(i.to_be_bytes().to_vec());
        // Partition `i` is held for `i + 1` seconds: partition 0 ends soonest.
        for i in 0..=MOST_PARTITIONS as u64 {
            holds.hold(&a, Some(partition(i)), now.plus((i + 1) * SECOND), now);
        }
        assert_eq!(holds.remaining(&a, Some(&partition(0)), now), None);
        let last = partition(MOST_PARTITIONS as u64);
        let held_for = Duration::from_secs(MOST_PARTITIONS as u64 + 1);
        assert_eq!(holds.remaining(&a, Some(&last), now), Some(held_for));
        // A new hold that ends sooner than every kept one is the one dropped.
        holds.hold(&a, Some(partition(1_000)), now.plus(SECOND), now);
        assert_eq!(holds.remaining(&a, Some(&partition(1_000)), now), None);

        // A flood of partitions stays within the bound.
        for i in 0..10_000 {
            holds.hold(&a, Some(partition(i)), now.plus(SECOND + i), now);
        }
        let kept = holds.origins.lock()[&a].partitions.len();
        assert_eq!(kept, MOST_PARTITIONS);
    }

    #[test]
    fn past_the_most_origins_the_one_whose_holds_end_soonest_is_dropped() {
        let holds = Holds::default();
        let now = Nanos::new(SECOND);
        let origin_number = |i: u64| origin(&format!("http://host-{i}/"));
        // Origin `i` is held for `i + 1` seconds: origin 0 ends soonest.
        for i in 0..=MOST_ORIGINS as u64 {
            holds.hold(&origin_number(i), None, now.plus((i + 1) * SECOND), now);
        }
        assert_eq!(holds.len(), MOST_ORIGINS);
        assert_eq!(holds.remaining(&origin_number(0), None, now), None);
        let last = origin_number(MOST_ORIGINS as u64);
        assert!(holds.remaining(&last, None, now).is_some());

        for i in 0..3 * MOST_ORIGINS as u64 {
            let until = now.plus(SECOND + i);
            holds.hold(&origin_number(10_000 + i), None, until, now);
        }
        assert_eq!(holds.len(), MOST_ORIGINS);
    }

    #[test]
    fn clearing_ends_the_holds_of_one_origin_or_of_all() {
        let holds = Holds::default();
        let (a, b) = (origin("http://a/"), origin("http://b/"));
        let now = Nanos::new(SECOND);
        let later = now.plus(3_600 * SECOND);
        holds.hold(&a, None, later, now);
        holds.hold(&b, Some(Partition::new("one")), later, now);

        holds.clear(Some(&a));
        assert_eq!(holds.remaining(&a, None, now), None);
        assert!(holds.remaining(&b, None, now).is_some());
        assert!(!holds.is_empty());

        holds.clear(None);
        assert_eq!(holds.remaining(&b, None, now), None);
        assert!(holds.is_empty(), "requests take no lock again");
    }
}
