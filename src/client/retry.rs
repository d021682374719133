//! [`Retry`]: which refused requests the client layer sends again, after how long, and how
//! often.

use crate::clock::Nanos;
use http::request::Parts;
use http::{Extensions, HeaderMap, Method, Request, Uri, Version};
use parking_lot::Mutex;
use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::Duration;

/// The most retries a budget saves up from deposits, so that a long calm does not pay for a
/// burst of retries later.
const MOST_SAVED: f64 = 100.0;

/// When a [`RateLimitClientLayer`](super::RateLimitClientLayer) sends a refused request again:
/// set with [`RateLimitClientLayer::retry`](super::RateLimitClientLayer::retry). Off unless set.
///
/// A request is retried only when all of these hold:
///
/// - its server refused it (HTTP 429, or gRPC `RESOURCE_EXHAUSTED`) and announced a wait of
///   at most [`up_to`](Self::up_to) (5 seconds by default); it is sent again after that wait
///   plus a random extra of up to [`jitter`](Self::jitter) of it (10 % by default), so that
///   clients refused together do not come back together;
/// - it is idempotent: `GET`, `HEAD`, `OPTIONS`, `PUT`, `DELETE` (or `TRACE`), unless
///   [`when`](Self::when) chooses otherwise;
/// - it can be replayed: **its body is empty** (`http_body::Body::is_end_stream`, or an exact
///   size hint of 0). The body is not assumed cloneable; the request is sent again with the
///   same method, URI, version, headers and extensions and a `Default` body. A request with
///   a body, such as every gRPC call, is never retried;
/// - it has attempts left: at most [`retries`](Self::retries) retries (2 by default);
/// - the budget allows it (see [`budget`](Self::budget)).
///
/// Otherwise the refusal is the answer, as without retries. If another refusal extends the
/// hold while the retry waits, beyond `up_to`, the retry fails with
/// [`ClientError::Held`](super::ClientError::Held).
///
/// Every clone of a `Retry`, and so every service of one layer, shares one budget.
///
/// ```
/// use std::time::Duration;
/// use tollgate::client::{RateLimitClientLayer, Retry};
///
/// let layer = RateLimitClientLayer::new().retry(
///     Retry::new()
///         .retries(3)
///         .up_to(Duration::from_secs(2))
///         .when(|request| request.method == http::Method::GET),
/// );
/// ```
#[derive(Clone)]
pub struct Retry {
    retries: u32,
    when: Arc<dyn Fn(&Parts) -> bool + Send + Sync>,
    jitter: f64,
    up_to: Duration,
    budget: Arc<RetryBudget>,
}

impl Retry {
    /// Two retries of idempotent, body-less requests after waits of up to 5 seconds, with
    /// 10 % jitter and the default [budget](Self::budget).
    pub fn new() -> Self {
        Retry {
            retries: 2,
            when: Arc::new(|request: &Parts| is_idempotent(&request.method)),
            jitter: 0.1,
            up_to: Duration::from_secs(5),
            budget: Arc::new(RetryBudget::new(0.2, 1)),
        }
    }

    /// Retries a request at most `retries` times (so sends it at most `retries + 1` times).
    #[must_use]
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// Retries only the requests for which `predicate` is true, instead of the idempotent
    /// methods. Requests with a body are never retried, whatever it says.
    #[must_use]
    pub fn when(mut self, predicate: impl Fn(&Parts) -> bool + Send + Sync + 'static) -> Self {
        self.when = Arc::new(predicate);
        self
    }

    /// Adds to each wait a random extra of up to `fraction` of it (0.1 by default; 0 for
    /// none).
    ///
    /// # Panics
    ///
    /// If `fraction` is negative or not finite.
    #[must_use]
    pub fn jitter(mut self, fraction: f64) -> Self {
        assert!(
            fraction.is_finite() && fraction >= 0.0,
            "jitter must be a finite fraction >= 0, got {fraction}"
        );
        self.jitter = fraction;
        self
    }

    /// Retries only after announced waits of at most `limit` (5 seconds by default); a
    /// longer wait returns the refusal at once.
    #[must_use]
    pub fn up_to(mut self, limit: Duration) -> Self {
        self.up_to = limit;
        self
    }

    /// The retry budget, so that retries cannot multiply the load of a server that is
    /// already refusing: each request sent (not retried) deposits `per_request` of a retry,
    /// each retry withdraws a whole one, and `min_per_second` retries a second are allowed
    /// whatever the balance. At most 100 retries are saved up. Defaults: 0.2 and 1, so a
    /// client retries at most a fifth of its requests, plus one a second.
    ///
    /// # Panics
    ///
    /// If `per_request` is negative or not finite.
    #[must_use]
    pub fn budget(mut self, per_request: f64, min_per_second: u32) -> Self {
        assert!(
            per_request.is_finite() && per_request >= 0.0,
            "per_request must be a finite number >= 0, got {per_request}"
        );
        self.budget = Arc::new(RetryBudget::new(per_request, min_per_second));
        self
    }

    /// What to keep of `request` to send it again, if it may be retried at all.
    pub(crate) fn replayable<B: http_body::Body>(
        &self,
        request: Request<B>,
    ) -> (Request<B>, Option<RequestHead>) {
        let empty = request.body().is_end_stream() || request.body().size_hint().exact() == Some(0);
        if !empty || self.retries == 0 {
            return (request, None);
        }
        let (parts, body) = request.into_parts();
        let head = (self.when)(&parts).then(|| RequestHead::of(&parts));
        (Request::from_parts(parts, body), head)
    }

    /// Deposits one request sent into the budget.
    pub(crate) fn deposit(&self) {
        self.budget.deposit();
    }

    /// Whether a request that has been retried `retried` times is sent again after the
    /// refusal's `wait`, at `now`; if so, takes the retry from the budget and gives the wait
    /// with jitter.
    pub(crate) fn again(&self, retried: u32, wait: Duration, now: Nanos) -> Option<Duration> {
        if retried >= self.retries || wait > self.up_to || !self.budget.withdraw(now) {
            return None;
        }
        Some(jittered(
            wait,
            self.jitter,
            RandomState::new().hash_one(now.as_u64()),
        ))
    }

    /// The longest announced wait this retries after.
    pub(crate) fn longest_wait(&self) -> Duration {
        self.up_to
    }
}

impl Default for Retry {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Retry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("retries", &self.retries)
            .field("jitter", &self.jitter)
            .field("up_to", &self.up_to)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

/// Whether `method` is idempotent (RFC 9110, 9.2.2).
fn is_idempotent(method: &Method) -> bool {
    [
        Method::GET,
        Method::HEAD,
        Method::OPTIONS,
        Method::PUT,
        Method::DELETE,
        Method::TRACE,
    ]
    .contains(method)
}

/// `wait` plus up to `fraction` of it, chosen by `random`.
fn jittered(wait: Duration, fraction: f64, random: u64) -> Duration {
    // The 53 high bits as a fraction in [0, 1).
    let share = (random >> 11) as f64 / (1u64 << 53) as f64;
    // `mul_f64` would panic on an extra too long for a `Duration` (a jitter of 1e300).
    let extra = Duration::try_from_secs_f64(wait.as_secs_f64() * fraction * share);
    wait.saturating_add(extra.unwrap_or(Duration::MAX))
}

/// Everything of a body-less request but its body: enough to send it again.
#[derive(Debug)]
pub(crate) struct RequestHead {
    method: Method,
    uri: Uri,
    version: Version,
    headers: HeaderMap,
    extensions: Extensions,
}

impl RequestHead {
    fn of(parts: &Parts) -> Self {
        RequestHead {
            method: parts.method.clone(),
            uri: parts.uri.clone(),
            version: parts.version,
            headers: parts.headers.clone(),
            extensions: parts.extensions.clone(),
        }
    }

    /// The request again, with a `Default` (empty) body.
    pub(crate) fn request<B: Default>(&self) -> Request<B> {
        let mut request = Request::new(B::default());
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = self.version;
        *request.headers_mut() = self.headers.clone();
        *request.extensions_mut() = self.extensions.clone();
        request
    }
}

/// Deposits per request sent, withdrawals per retry, and a free allowance per second.
#[derive(Debug)]
struct RetryBudget {
    per_request: f64,
    min_per_second: u32,
    balance: Mutex<Balance>,
}

#[derive(Debug, Default)]
struct Balance {
    saved: f64,
    /// The second (of the clock) the free allowance counts for, and what is left of it.
    second: u64,
    free_left: u32,
}

impl RetryBudget {
    fn new(per_request: f64, min_per_second: u32) -> Self {
        RetryBudget {
            per_request,
            min_per_second,
            balance: Mutex::new(Balance {
                second: u64::MAX,
                ..Balance::default()
            }),
        }
    }

    fn deposit(&self) {
        let mut balance = self.balance.lock();
        balance.saved = (balance.saved + self.per_request).min(MOST_SAVED);
    }

    /// Takes one retry from the free allowance of `now`'s second, else from the savings.
    fn withdraw(&self, now: Nanos) -> bool {
        let mut balance = self.balance.lock();
        let second = now.as_u64() / 1_000_000_000;
        if balance.second != second {
            balance.second = second;
            balance.free_left = self.min_per_second;
        }
        if balance.free_left > 0 {
            balance.free_left -= 1;
            true
        } else if balance.saved >= 1.0 {
            balance.saved -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn the_budget_allows_its_minimum_per_second_and_what_requests_saved() {
        let budget = RetryBudget::new(0.5, 1);
        let now = Nanos::new(10 * SECOND);
        assert!(budget.withdraw(now), "the free retry of this second");
        assert!(!budget.withdraw(now), "nothing saved");
        budget.deposit();
        assert!(!budget.withdraw(now), "half a retry is not one");
        budget.deposit();
        assert!(budget.withdraw(now), "two requests saved one retry");
        assert!(!budget.withdraw(now));
        assert!(budget.withdraw(now.plus(SECOND)), "a new second");
    }

    #[test]
    fn the_budget_saves_at_most_a_hundred_retries() {
        let budget = RetryBudget::new(1.0, 0);
        for _ in 0..1_000 {
            budget.deposit();
        }
        let now = Nanos::new(SECOND);
        assert_eq!((0..1_000).filter(|_| budget.withdraw(now)).count(), 100);
    }

    #[test]
    fn retries_are_bounded_and_only_after_short_enough_waits() {
        let retry = Retry::new()
            .retries(2)
            .up_to(Duration::from_secs(2))
            .jitter(0.0);
        let now = Nanos::new(SECOND);
        let wait = Duration::from_secs(1);
        assert_eq!(retry.again(0, wait, now), Some(wait));
        assert_eq!(retry.again(2, wait, now), None, "no third retry");
        assert_eq!(retry.again(0, Duration::from_secs(3), now), None);
    }

    #[test]
    fn jitter_adds_at_most_its_fraction() {
        let wait = Duration::from_secs(10);
        assert_eq!(jittered(wait, 0.1, 0), wait);
        let most = jittered(wait, 0.1, u64::MAX);
        assert!(most > wait && most <= Duration::from_secs(11), "{most:?}");
    }

    #[test]
    fn jitter_too_long_to_count_saturates_instead_of_panicking() {
        let hour = Duration::from_secs(3_600);
        assert_eq!(jittered(hour, 1e300, u64::MAX), Duration::MAX);
        assert_eq!(jittered(Duration::MAX, 0.5, u64::MAX), Duration::MAX);
    }

    #[test]
    fn by_default_idempotent_body_less_requests_are_replayable() {
        use http_body_util::{Empty, Full};
        let retry = Retry::new();
        let request = |method: Method| {
            Request::builder()
                .method(method)
                .uri("http://a/")
                .body(Empty::<bytes::Bytes>::new())
                .unwrap()
        };
        assert!(retry.replayable(request(Method::GET)).1.is_some());
        assert!(retry.replayable(request(Method::DELETE)).1.is_some());
        assert!(retry.replayable(request(Method::POST)).1.is_none());
        let with_body = Request::put("http://a/").body(Full::new(bytes::Bytes::from("x")));
        assert!(retry.replayable(with_body.unwrap()).1.is_none());
        let post = Retry::new().when(|request| request.method == Method::POST);
        assert!(post.replayable(request(Method::POST)).1.is_some());
    }
}
