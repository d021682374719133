//! What a response announces as a whole: whether it refuses, the waits to hold requests for,
//! and the quotas to pace them by. Each field is read once, by the parsers of
//! [`headers`](super::headers).

use super::headers::{
    delta_seconds, draft_03_policies, field_items, grpc_pushback, is_resource_exhausted,
    quota_policies, retry_after, service_limits, QuotaPolicy, ServiceLimit,
};
use super::Partition;
use crate::response::{RATELIMIT, RATELIMIT_POLICY, X_RATELIMIT_RETRY_AFTER};
use http::{HeaderMap, StatusCode};
use smallvec::SmallVec;
use std::time::{Duration, SystemTime};

/// The longest window a quota is paced by: a year (and a day). A longer one is read as no
/// quota: it would pace nothing a client can notice, and its time would not fit the clock.
const LONGEST_WINDOW: Duration = Duration::from_secs(366 * 86_400);

/// What a response announces.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Announcement {
    /// Whether it refuses: HTTP 429, or gRPC `RESOURCE_EXHAUSTED` in the headers of a
    /// trailers-only answer.
    pub(crate) refused: bool,
    /// The waits to hold requests for.
    pub(crate) notices: SmallVec<[Notice; 1]>,
    /// The quotas to pace requests by.
    pub(crate) quotas: SmallVec<[AnnouncedQuota; 1]>,
}

impl Announcement {
    /// The longest wait, if the response is a refusal that gives one.
    pub(crate) fn refused_for(&self) -> Option<Duration> {
        let longest = self.notices.iter().map(|notice| notice.wait).max();
        longest.filter(|_| self.refused)
    }

    /// Cuts every wait to `max_hold`; a wait cut to nothing holds nothing.
    pub(crate) fn cap_waits(&mut self, max_hold: Duration) {
        for notice in &mut self.notices {
            notice.wait = notice.wait.min(max_hold);
        }
        self.notices.retain(|notice| !notice.wait.is_zero());
    }
}

/// A wait the server announced, for its whole origin (`partition: None`) or one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Notice {
    pub(crate) partition: Option<Partition>,
    pub(crate) wait: Duration,
    /// Whether this is an announced quota's reset on an answer that spent the quota but was
    /// admitted: pacing by that quota takes the place of such a hold.
    pub(crate) paced: bool,
}

/// A quota a response announces, `quota` units per `window`, and what is left of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AnnouncedQuota {
    pub(crate) quota: u64,
    pub(crate) window: Duration,
    /// The units left, when the server said.
    pub(crate) remaining: Option<u64>,
    /// The partition the quota belongs to (`pk`); `None`: the whole origin's.
    pub(crate) partition: Option<Partition>,
}

/// What a response of `status` with `headers` announces, read at wall-clock time `now`; its
/// quotas only if `pacing` (a client that does not pace has no use for them).
///
/// A refusal holds for the longest wait any field gives (`Retry-After`,
/// `X-Ratelimit-Retry-After`, `grpc-retry-pushback-ms`, the reset of a spent `RateLimit`
/// item); the partitions named by the spent items when every one of them names one, else
/// the whole origin. A refusal that gives no wait holds nothing. Any other response holds
/// each spent `RateLimit` item's partition (or origin) until its reset: the next request
/// would be refused.
///
/// The quotas are the `RateLimit-Policy` items with a `q` and a `w`, each with the `r` of
/// the `RateLimit` item of the same name and partition; without any, those of Envoy's
/// draft-03 `X-Ratelimit-Limit` (`10, 10;w=60`) with `X-Ratelimit-Remaining`. A quota of 0
/// units, or a window of 0 seconds or more than a year, is not one to pace by: what it
/// refuses, the refusal's wait holds.
pub(crate) fn read(
    status: StatusCode,
    headers: &HeaderMap,
    now: SystemTime,
    pacing: bool,
) -> Announcement {
    let limits = field_items(headers, RATELIMIT, service_limits);
    let policies = if pacing {
        field_items(headers, RATELIMIT_POLICY, quota_policies)
    } else {
        SmallVec::new()
    };
    let refused = status == StatusCode::TOO_MANY_REQUESTS || is_resource_exhausted(headers);
    let paced = |limit: &ServiceLimit<'_>| {
        policies
            .iter()
            .any(|policy| is_of(limit, policy) && quota_of(policy, None).is_some())
    };
    let spent = limits.iter().filter(|limit| limit.remaining == Some(0));
    let notices = if refused {
        refusal_notices(headers, spent, now)
    } else {
        spent
            .filter_map(|limit| {
                let wait = limit.reset.filter(|wait| !wait.is_zero())?;
                Some(Notice {
                    partition: limit.partition.clone(),
                    wait,
                    paced: paced(limit),
                })
            })
            .collect()
    };
    let mut quotas: SmallVec<[AnnouncedQuota; 1]> = policies
        .iter()
        .filter_map(|policy| {
            let state = limits.iter().find(|limit| is_of(limit, policy));
            quota_of(policy, state.and_then(|state| state.remaining))
        })
        .collect();
    if pacing && quotas.is_empty() {
        quotas = draft_03_policies(headers)
            .into_iter()
            .filter_map(|(quota, window, remaining)| {
                paceable(AnnouncedQuota {
                    quota,
                    window,
                    remaining,
                    partition: None,
                })
            })
            .collect();
    }
    Announcement {
        refused,
        notices,
        quotas,
    }
}

/// The holds of a refusal whose spent `RateLimit` items are `spent`.
fn refusal_notices<'a>(
    headers: &HeaderMap,
    spent: impl Iterator<Item = &'a ServiceLimit<'a>> + Clone,
    now: SystemTime,
) -> SmallVec<[Notice; 1]> {
    let announced = [
        headers
            .get(http::header::RETRY_AFTER)
            .and_then(|v| retry_after(v, now)),
        headers.get(X_RATELIMIT_RETRY_AFTER).and_then(delta_seconds),
        grpc_pushback(headers),
    ];
    let wait = announced
        .into_iter()
        .flatten()
        .chain(spent.clone().filter_map(|limit| limit.reset))
        .max();
    let Some(wait) = wait.filter(|wait| !wait.is_zero()) else {
        return SmallVec::new();
    };
    let mut partitions = spent.map(|limit| limit.partition.clone()).peekable();
    let named_partitions = partitions.peek().is_some() && partitions.clone().all(|p| p.is_some());
    let notice = |partition| Notice {
        partition,
        wait,
        paced: false,
    };
    if named_partitions {
        partitions.map(notice).collect()
    } else {
        smallvec::smallvec![notice(None)]
    }
}

/// Whether `limit` is the state of `policy`: the same name and partition.
fn is_of(limit: &ServiceLimit<'_>, policy: &QuotaPolicy<'_>) -> bool {
    limit.name == policy.name && limit.partition == policy.partition
}

/// `policy` as a quota to pace by, with `remaining` units left; `None` if it is not one.
fn quota_of(policy: &QuotaPolicy<'_>, remaining: Option<u64>) -> Option<AnnouncedQuota> {
    paceable(AnnouncedQuota {
        quota: policy.quota?,
        window: policy.window?,
        remaining,
        partition: policy.partition.clone(),
    })
}

fn paceable(quota: AnnouncedQuota) -> Option<AnnouncedQuota> {
    let window_fits = !quota.window.is_zero() && quota.window <= LONGEST_WINDOW;
    (quota.quota > 0 && window_fits).then_some(quota)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use std::time::UNIX_EPOCH;

    /// 1994-11-06T08:49:37Z, the example date of RFC 9110.
    fn rfc_date() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(784_111_777)
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, text)| {
                let value = HeaderValue::from_str(text).unwrap();
                (http::HeaderName::from_static(name), value)
            })
            .collect()
    }

    fn admitted(pairs: &[(&'static str, &str)]) -> Announcement {
        read(StatusCode::OK, &headers(pairs), rfc_date(), true)
    }

    fn refused(pairs: &[(&'static str, &str)]) -> Announcement {
        read(
            StatusCode::TOO_MANY_REQUESTS,
            &headers(pairs),
            rfc_date(),
            true,
        )
    }

    fn quota(quota: u64, window: u64, remaining: Option<u64>) -> AnnouncedQuota {
        AnnouncedQuota {
            quota,
            window: Duration::from_secs(window),
            remaining,
            partition: None,
        }
    }

    fn hold(partition: Option<&[u8]>, wait: u64, paced: bool) -> Notice {
        Notice {
            partition: partition.map(|key| Partition::new(key.to_vec())),
            wait: Duration::from_secs(wait),
            paced,
        }
    }

    #[test]
    fn quotas_come_from_the_policy_with_the_state_of_the_same_name() {
        let answer = admitted(&[
            (
                "ratelimit-policy",
                r#""burst";q=40;w=2, "day";q=1000;qu="request";w=86400"#,
            ),
            ("ratelimit", r#""day";r=7;t=60, "burst";r=39;t=1"#),
        ]);
        assert_eq!(
            answer.quotas.as_slice(),
            [quota(40, 2, Some(39)), quota(1000, 86_400, Some(7))]
        );
    }

    #[test]
    fn a_state_belongs_to_the_policy_of_the_same_partition() {
        let answer = admitted(&[
            (
                "ratelimit-policy",
                r#""u";q=10;w=1;pk=:YQ==:, "u";q=10;w=1;pk=:Yg==:"#,
            ),
            (
                "ratelimit",
                r#""u";r=9;t=1;pk=:Yg==:, "u";r=3;t=1;pk=:YQ==:"#,
            ),
        ]);
        let left: Vec<_> = answer.quotas.iter().map(|q| q.remaining).collect();
        assert_eq!(left, [Some(3), Some(9)]);
        assert_eq!(answer.quotas[0].partition, Some(Partition::new(&b"a"[..])));
    }

    #[test]
    fn quotas_without_a_quota_or_a_fitting_window_are_not_announced() {
        let policies = [
            r#""a";q=10"#,
            r#""a";w=10"#,
            r#""a";q=0;w=1"#,
            r#""a";q=5;w=0"#,
            r#""a";q=5;w=999999999999999"#,
        ];
        for policy in policies {
            let answer = admitted(&[("ratelimit-policy", policy)]);
            assert!(answer.quotas.is_empty(), "{policy}");
        }
        let unnamed_state = admitted(&[
            ("ratelimit-policy", r#""a";q=10;w=1"#),
            ("ratelimit", r#""b";r=0;t=1"#),
        ]);
        assert_eq!(unnamed_state.quotas[0].remaining, None);
    }

    #[test]
    fn envoy_draft_03_quotas_are_read_when_there_is_no_policy() {
        let answer = admitted(&[
            ("x-ratelimit-limit", "10, 10;w=60"),
            ("x-ratelimit-remaining", "4"),
        ]);
        assert_eq!(answer.quotas.as_slice(), [quota(10, 60, Some(4))]);
        let both = admitted(&[
            ("x-ratelimit-limit", "10, 10;w=60"),
            ("ratelimit-policy", r#""a";q=5;w=1"#),
        ]);
        assert_eq!(both.quotas.as_slice(), [quota(5, 1, None)]);
    }

    #[test]
    fn a_429_holds_the_origin_for_the_longest_wait() {
        let answer = refused(&[
            ("retry-after", "2"),
            ("x-ratelimit-retry-after", "3"),
            ("ratelimit", r#""api";r=0;t=1"#),
        ]);
        assert!(answer.refused);
        assert_eq!(answer.notices.as_slice(), [hold(None, 3, false)]);
        assert_eq!(answer.refused_for(), Some(Duration::from_secs(3)));
    }

    #[test]
    fn a_429_for_named_partitions_holds_only_them() {
        let answer = refused(&[
            ("retry-after", "4"),
            ("ratelimit", r#""api";r=0;t=4;pk=:YQ==:, "all";r=7;t=60"#),
        ]);
        assert_eq!(answer.notices.as_slice(), [hold(Some(b"a"), 4, false)]);
    }

    #[test]
    fn a_429_without_a_wait_holds_nothing() {
        let answer = refused(&[("retry-after", "later")]);
        assert!(answer.notices.is_empty());
        assert_eq!(answer.refused_for(), None);
        let zero = refused(&[("retry-after", "0")]);
        assert!(zero.notices.is_empty());
    }

    #[test]
    fn waits_are_cut_to_max_hold() {
        let hour = Duration::from_secs(3_600);
        let answers = [
            refused(&[("retry-after", "99999999999")]),
            refused(&[("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT")]),
            refused(&[("x-ratelimit-retry-after", "99999999999999999999999")]),
            refused(&[("ratelimit", r#""api";r=0;t=999999999999999"#)]),
            admitted(&[("ratelimit", r#""api";r=0;t=999999999999999"#)]),
            admitted(&[
                ("grpc-status", "8"),
                ("grpc-retry-pushback-ms", "99999999999999999999999"),
            ]),
        ];
        for mut answer in answers {
            answer.cap_waits(hour);
            assert_eq!(answer.notices.len(), 1, "{answer:?}");
            assert_eq!(answer.notices[0].wait, hour, "{answer:?}");
        }
        let mut answer = refused(&[("retry-after", "2"), ("ratelimit", r#""api";r=0;t=9"#)]);
        answer.cap_waits(Duration::from_secs(5));
        assert_eq!(answer.refused_for(), Some(Duration::from_secs(5)));
        answer.cap_waits(Duration::ZERO);
        assert!(
            answer.notices.is_empty(),
            "a wait cut to nothing holds nothing"
        );
        assert_eq!(answer.refused_for(), None);
    }

    #[test]
    fn grpc_resource_exhausted_holds_for_the_pushback() {
        let answer = admitted(&[("grpc-status", "8"), ("grpc-retry-pushback-ms", "250")]);
        assert!(answer.refused);
        assert_eq!(answer.refused_for(), Some(Duration::from_millis(250)));
    }

    #[test]
    fn an_admitted_answer_that_spent_a_quota_holds_until_its_reset() {
        let answer = admitted(&[("ratelimit", r#""api";r=0;t=5, "b";r=3;t=9"#)]);
        assert_eq!(answer.notices.as_slice(), [hold(None, 5, false)]);
        assert!(!answer.refused);
        assert_eq!(answer.refused_for(), None);
    }

    #[test]
    fn a_spent_quota_with_a_policy_is_marked_as_paced() {
        let answer = admitted(&[
            ("ratelimit-policy", r#""burst";q=40;w=2"#),
            ("ratelimit", r#""burst";r=0;t=2, "day";r=0;t=3600"#),
        ]);
        assert_eq!(
            answer.notices.as_slice(),
            [hold(None, 2, true), hold(None, 3600, false)]
        );
    }

    #[test]
    fn quotas_are_read_only_for_pacing() {
        let pairs = [
            ("ratelimit-policy", r#""burst";q=40;w=2"#),
            ("ratelimit", r#""burst";r=0;t=2"#),
        ];
        let answer = read(StatusCode::OK, &headers(&pairs), rfc_date(), false);
        assert!(answer.quotas.is_empty());
        assert_eq!(answer.notices.as_slice(), [hold(None, 2, false)]);
    }

    #[test]
    fn other_responses_announce_nothing() {
        let pairs = [("retry-after", "5"), ("x-ratelimit-remaining", "0")];
        let unavailable = read(
            StatusCode::SERVICE_UNAVAILABLE,
            &headers(&pairs),
            rfc_date(),
            true,
        );
        assert_eq!(unavailable, Announcement::default());
        assert_eq!(admitted(&pairs), Announcement::default());
    }
}
