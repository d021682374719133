//! One replay: the traffic through one set of rules, on a manual clock, and what each limit
//! made of it.

use super::traffic::TraceRequest;
use http::{HeaderMap, HeaderName, HeaderValue, Request, StatusCode};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tollgate::clock::{ManualClock, Nanos};
use tollgate::rules::Rules;
use tollgate::source::{MissingPeerAddr, PeerAddr};
use tollgate::store::MemoryStore;
use tollgate::{HeldSlots, LimitDecision, Limiter};

/// The seed every replay hashes its keys under.
const REPLAY_SEED: u64 = 0x7472_6163_6573;

/// A second, in nanoseconds.
const SECOND: u64 = 1_000_000_000;

/// What the limiter decided for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Admitted at once.
    Admitted,
    /// Admitted after this wait in a shaping leaky bucket's queue.
    Delayed(Duration),
    /// Refused (the layer's `429`).
    Denied,
}

impl Outcome {
    /// `admitted`, `delayed` or `denied`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Outcome::Admitted => "admitted",
            Outcome::Delayed(_) => "delayed",
            Outcome::Denied => "denied",
        }
    }
}

/// What became of one request, and which limit its verdict names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Replayed {
    pub(crate) outcome: Outcome,
    /// The limit the verdict names: the one that refused; for an admitted request, the one
    /// with the least room left. `None` when no limit applied.
    pub(crate) limit: Option<Arc<str>>,
}

/// What one limit made of the traffic.
#[derive(Debug, Default, Clone)]
pub(crate) struct LimitFigures {
    /// Requests it applied to.
    pub(crate) seen: u64,
    /// Of those, admitted (at once or delayed).
    pub(crate) admitted: u64,
    /// Refused by this limit (the limit the refusal names, when several refuse). For a
    /// shadow-mode limit: requests it would have refused.
    pub(crate) denied: u64,
    /// Admitted after a wait in this limit's queue.
    pub(crate) delayed: u64,
    /// The waits of the delayed requests, in nanoseconds.
    pub(crate) delays: Vec<u64>,
    /// Requests per state key (the client, user, ...), and how many of them it refused.
    pub(crate) keys: HashMap<String, KeyFigures>,
    /// Per second from the start of the traffic, for the seconds with any: admitted,
    /// denied, delayed. (A map: a trace may leave days between two requests.)
    pub(crate) per_second: BTreeMap<u64, [u64; 3]>,
}

/// One state key's requests under a limit.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyFigures {
    pub(crate) requests: u64,
    pub(crate) denied: u64,
}

impl LimitFigures {
    /// Counts a request that this limit applied to, with state key `key`, at second
    /// `second` of the traffic: admitted, delayed by its queue, or refused by it (or not
    /// refused by it, when another limit refused the request).
    fn count(&mut self, key: String, second: u64, outcome: Count) {
        self.seen += 1;
        let figures = self.keys.entry(key).or_default();
        figures.requests += 1;
        let per_second = self.per_second.entry(second).or_default();
        match outcome {
            Count::Admitted => {
                self.admitted += 1;
                per_second[0] += 1;
            }
            Count::Delayed(delay) => {
                self.admitted += 1;
                self.delayed += 1;
                self.delays.push(delay);
                per_second[0] += 1;
                per_second[2] += 1;
            }
            Count::DeniedHere => {
                self.denied += 1;
                figures.denied += 1;
                per_second[1] += 1;
            }
            Count::DeniedElsewhere => {}
        }
    }
}

/// How a request counts for one limit.
enum Count {
    Admitted,
    Delayed(u64),
    DeniedHere,
    DeniedElsewhere,
}

/// The traffic through one set of rules: a limiter with an in-memory store on a manual
/// clock, set to each request's instant.
pub(crate) struct Replay {
    limiter: Limiter<MemoryStore<ManualClock>>,
    clock: ManualClock,
    rules: Arc<Rules>,
    /// The instant of the traffic's first request (its whole second is second 0 of the
    /// per-second figures).
    first: Option<u64>,
    /// Per limit, in the rules' order.
    figures: Vec<LimitFigures>,
    /// Requests no limit applied to.
    unlimited: u64,
    /// The slots of the requests still running at the traffic's instant (those whose trace
    /// says how long they ran), by when they end.
    running: BinaryHeap<Reverse<Running>>,
}

/// A request still running in the replay: when it ends, and the slots it holds until then.
struct Running {
    until: u64,
    /// Held for its drop, which gives the slots back.
    _slots: HeldSlots,
}

impl PartialEq for Running {
    fn eq(&self, other: &Self) -> bool {
        self.until == other.until
    }
}

impl Eq for Running {}

impl PartialOrd for Running {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Running {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.until.cmp(&other.until)
    }
}

impl Replay {
    pub(crate) fn new(rules: Rules) -> Self {
        let clock = ManualClock::new();
        let figures = vec![LimitFigures::default(); rules.limits().len()];
        // The same seed and shards in every run: the same answers, byte for byte.
        let store = MemoryStore::reproducible(clock.clone(), REPLAY_SEED);
        let limiter = Limiter::with_store(rules, store);
        let rules = limiter.rules();
        Replay {
            limiter,
            clock,
            rules,
            first: None,
            figures,
            unlimited: 0,
            running: BinaryHeap::new(),
        }
    }

    /// The rules replayed.
    pub(crate) fn rules(&self) -> &Rules {
        &self.rules
    }

    /// What each limit made of the traffic so far, in the rules' order.
    pub(crate) fn figures(&self) -> &[LimitFigures] {
        &self.figures
    }

    /// Requests that no limit applied to.
    pub(crate) fn unlimited(&self) -> u64 {
        self.unlimited
    }

    /// Decides `traffic` at its instant, as the layer would, and counts it for each limit
    /// by that limit's own decision. The requests that ended by then have given their slots
    /// back; an admitted one whose trace says how long it ran holds its own that long.
    ///
    /// # Errors
    ///
    /// [`MissingPeerAddr`] never happens (every request has its client's address), but is
    /// passed on rather than hidden.
    pub(crate) async fn decide(
        &mut self,
        traffic: &TraceRequest,
    ) -> Result<Replayed, MissingPeerAddr> {
        let request = http_request(traffic);
        self.clock.set(Nanos::new(traffic.at));
        let first = *self.first.get_or_insert(traffic.at);
        // Whole seconds of the clock, as the plot's axis shows them.
        let second = traffic.at / SECOND - first / SECOND;
        while self
            .running
            .peek()
            .is_some_and(|Reverse(running)| running.until <= traffic.at)
        {
            self.running.pop();
        }
        let (verdict, each, mut slots) = self.limiter.check_request_held(&request).await?;
        // What the trace says of the response settles the request's limits (a status of
        // 200 when it gives headers alone); a trace that says nothing leaves the charges.
        let answered = traffic.status.is_some() || !traffic.response_headers.is_empty();
        if answered && verdict.is_allowed() {
            let status = traffic.status.and_then(|s| StatusCode::from_u16(s).ok());
            slots.settle(
                status.unwrap_or(StatusCode::OK),
                &response_headers(&traffic.response_headers),
            );
        }
        if let (Some(duration), true) = (traffic.duration, verdict.is_allowed()) {
            let until = traffic.at.saturating_add(duration);
            self.running.push(Reverse(Running {
                until,
                _slots: slots,
            }));
        }
        let outcome = match (verdict.is_allowed(), verdict.delay()) {
            (false, _) => Outcome::Denied,
            (true, delay) if delay.is_zero() => Outcome::Admitted,
            (true, delay) => Outcome::Delayed(delay),
        };
        if each.is_empty() {
            self.unlimited += 1;
        } else {
            // The state keys in words, by limit: what the rules' explanation calls them.
            let explanation = self.rules.explain(&request)?;
            let key_of = |index: usize| {
                let limit = &self.rules.limits()[index];
                explanation
                    .applied()
                    .iter()
                    .find(|applied| std::ptr::eq(applied.limit(), limit))
                    .map(|applied| applied.state_key())
                    .unwrap_or_default()
            };
            let keyed: Vec<(usize, String, Count)> = each
                .iter()
                .map(|limit| {
                    let index = limit.limit_index();
                    (index, key_of(index), count(limit, outcome))
                })
                .collect();
            for (index, key, count) in keyed {
                self.figures[index].count(key, second, count);
            }
        }
        Ok(Replayed {
            outcome,
            limit: verdict.limit().map(Arc::from),
        })
    }
}

/// How a request with `outcome` counts for a limit whose own decision was `limit`'s.
fn count(limit: &LimitDecision, outcome: Outcome) -> Count {
    let decision = limit.decision();
    if !decision.allowed {
        // It refused the request, or would have (shadow mode).
        return Count::DeniedHere;
    }
    match outcome {
        Outcome::Denied => Count::DeniedElsewhere,
        _ if limit.is_shadow() || decision.delay.is_zero() => Count::Admitted,
        _ => Count::Delayed(u64::try_from(decision.delay.as_nanos()).unwrap_or(u64::MAX)),
    }
}

/// `traffic` as the request a server would have received from its client.
fn http_request(traffic: &TraceRequest) -> Request<()> {
    let mut request = Request::new(());
    *request.method_mut() = traffic.method.clone();
    // The readers check the target; one that still does not parse is asked for as `/`.
    *request.uri_mut() = traffic.target.parse().unwrap_or_default();
    let headers = request.headers_mut();
    for (name, value) in &traffic.headers {
        let (Ok(name), Ok(value)) = (
            HeaderName::try_from(name.as_str()),
            HeaderValue::try_from(value.as_str()),
        ) else {
            continue;
        };
        headers.append(name, value);
    }
    request
        .extensions_mut()
        .insert(PeerAddr(SocketAddr::new(traffic.ip, 0)));
    request
}

/// A trace's response headers as a response carries them (each checked when read).
fn response_headers(headers: &[(String, String)]) -> HeaderMap {
    headers
        .iter()
        .filter_map(|(name, value)| {
            let name = HeaderName::try_from(name.as_str()).ok()?;
            let value = HeaderValue::try_from(value.as_str()).ok()?;
            Some((name, value))
        })
        .collect()
}
