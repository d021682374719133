//! Synthetic traffic: requests at random but reproducible instants from numbered clients,
//! in one of five patterns, for `tollgate simulate` without a trace file.
//!
//! ```text
//! tollgate simulate rules.yaml --synthetic spikes --rate 50 --seconds 600 --period 60
//! ```
//!
//! The same [`Synthetic`] gives the same requests, bit for bit, on every run and platform:
//! the randomness is ChaCha8 keyed with the seed, and every function of it is IEEE arithmetic
//! or libm's portable `log` and `exp`.

use super::traffic::TraceRequest;
use http::Method;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt;
use std::iter::FusedIterator;
use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;

/// A shape of synthetic traffic: how the arrival rate varies over time, and who sends.
///
/// Every pattern's arrivals are a Poisson process; `rate`, `period`, `clients` and
/// `exponent` are the fields of [`Synthetic`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pattern {
    /// Poisson arrivals at `rate` a second; each request from a client drawn uniformly among
    /// `clients`.
    Steady,
    /// Every `period` seconds, that period's requests (`rate` × `period` on average) arrive
    /// within its first second: Poisson at `rate` × `period` a second during that second, and
    /// nothing for the rest of the period. A last period cut short by `seconds` still has its
    /// whole burst. Uniform clients.
    Burst,
    /// Poisson arrivals whose rate rises linearly from 0 at the start to 2 × `rate` at the
    /// end, so that the mean is `rate`. Uniform clients.
    Ramp,
    /// Poisson arrivals at `rate`, plus, in the first second of every `period`, a spike of
    /// Poisson arrivals at 9 × `rate` more (10 × `rate` in all during the spike). The mean is
    /// therefore above `rate`: `rate` × (1 + 9 / `period`) when `seconds` is a multiple of
    /// `period`. Uniform clients.
    Spikes,
    /// Poisson arrivals at `rate`; each request's client drawn from a Zipf distribution over
    /// `clients` with `exponent`: the k-th client (from 1) sends in proportion to
    /// 1 / k^`exponent`, so the first client (10.0.0.1) sends the most.
    Zipf,
}

impl Pattern {
    /// Every pattern, with its name on the command line.
    const NAMES: [(Pattern, &'static str); 5] = [
        (Pattern::Steady, "steady"),
        (Pattern::Burst, "burst"),
        (Pattern::Ramp, "ramp"),
        (Pattern::Spikes, "spikes"),
        (Pattern::Zipf, "zipf"),
    ];
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (_, name) = Pattern::NAMES
            .iter()
            .find(|(pattern, _)| pattern == self)
            .expect("every pattern has a name");
        f.write_str(name)
    }
}

impl FromStr for Pattern {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        match Pattern::NAMES.iter().find(|(_, known)| *known == name) {
            Some((pattern, _)) => Ok(*pattern),
            None => {
                let names: Vec<&str> = Pattern::NAMES.iter().map(|(_, name)| *name).collect();
                Err(format!(
                    "unknown pattern `{name}`: expected one of {}",
                    names.join(", ")
                ))
            }
        }
    }
}

/// Synthetic traffic: a pattern, its parameters, and a seed.
#[derive(Debug, Clone)]
pub(crate) struct Synthetic {
    pub(crate) pattern: Pattern,
    /// Mean requests a second over the whole run (`spikes` adds its spikes to it).
    pub(crate) rate: f64,
    /// How long, in seconds.
    pub(crate) seconds: u64,
    /// How many clients (client addresses) send.
    pub(crate) clients: u32,
    /// The period of `burst` and `spikes`, in seconds.
    pub(crate) period: u64,
    /// The exponent of `zipf`.
    pub(crate) exponent: f64,
    /// Picks the random instants and clients: the same seed, the same traffic.
    pub(crate) seed: u64,
    /// When the traffic starts, ns since the epoch (the simulator passes a fixed instant, so
    /// that runs repeat).
    pub(crate) start: u64,
    /// The request target every request asks for, e.g. "/".
    pub(crate) target: String,
    /// The method of every request.
    pub(crate) method: Method,
}

/// The largest `--rate`, in requests a second.
const MAX_RATE: f64 = 1e7;
/// The largest `--seconds`: a day.
const MAX_SECONDS: u64 = 86_400;
/// The largest `--clients`; 10.255.255.255 would be client 16,777,214.
const MAX_CLIENTS: u32 = 10_000_000;
/// The most requests a traffic may have on average.
const MAX_REQUESTS: f64 = 1e8;
/// Nanoseconds in a second.
const SECOND: u64 = 1_000_000_000;

impl Synthetic {
    /// Checks the parameters; the error names every flag at fault, one a line.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let mut errors = Vec::new();
        // Written so that NaN fails too.
        if !(self.rate > 0.0 && self.rate <= MAX_RATE) {
            errors.push(format!(
                "--rate must be above 0 and at most {MAX_RATE} requests a second, not {}",
                self.rate
            ));
        }
        if !(1..=MAX_SECONDS).contains(&self.seconds) {
            errors.push(format!(
                "--seconds must be from 1 to {MAX_SECONDS}, not {}",
                self.seconds
            ));
        }
        if !(1..=MAX_CLIENTS).contains(&self.clients) {
            errors.push(format!(
                "--clients must be from 1 to {MAX_CLIENTS}, not {}",
                self.clients
            ));
        }
        if self.period == 0 {
            errors.push("--period must be at least 1 second, not 0".to_owned());
        }
        if !(self.exponent > 0.0 && self.exponent.is_finite()) {
            errors.push(format!(
                "--exponent must be a finite number above 0, not {}",
                self.exponent
            ));
        }
        if errors.is_empty() && self.expected_requests() > MAX_REQUESTS {
            let period = match self.pattern {
                Pattern::Burst | Pattern::Spikes => format!(" with --period {}", self.period),
                Pattern::Steady | Pattern::Ramp | Pattern::Zipf => String::new(),
            };
            errors.push(format!(
                "--synthetic {} at --rate {} for --seconds {}{period} makes {:.0} requests on \
                 average, more than {MAX_REQUESTS}: lower --rate or --seconds",
                self.pattern,
                self.rate,
                self.seconds,
                self.expected_requests(),
            ));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("\n"))
        }
    }

    /// How many requests the traffic has on average.
    pub(crate) fn expected_requests(&self) -> f64 {
        let rate = self.rate;
        let seconds = self.seconds as f64;
        // Every period that starts within the run has its whole first second in it.
        let periods = self.seconds.div_ceil(self.period.max(1)) as f64;
        match self.pattern {
            Pattern::Steady | Pattern::Ramp | Pattern::Zipf => rate * seconds,
            Pattern::Burst => rate * self.period as f64 * periods,
            Pattern::Spikes => rate * seconds + 9.0 * rate * periods,
        }
    }

    /// The requests, in time order (non-decreasing `at`), within
    /// [`start`, `start` + `seconds`); none when [`validate`](Self::validate) fails.
    pub(crate) fn requests(&self) -> Requests<'_> {
        let schedule = match self.pattern {
            Pattern::Steady | Pattern::Zipf => Schedule::Constant { rate: self.rate },
            Pattern::Ramp => Schedule::Ramp {
                rate: self.rate,
                seconds: self.seconds as f64,
            },
            Pattern::Burst => Schedule::periodic(self.period, self.rate * self.period as f64, 0.0),
            Pattern::Spikes => Schedule::periodic(self.period, 10.0 * self.rate, self.rate),
        };
        let senders = match self.pattern {
            Pattern::Zipf => Senders::Zipf(ZipfRanks::new(self.clients.max(1), self.exponent)),
            Pattern::Steady | Pattern::Burst | Pattern::Ramp | Pattern::Spikes => {
                Senders::Uniform {
                    clients: self.clients.max(1),
                }
            }
        };
        let mut key = [0; 32];
        key[..8].copy_from_slice(&self.seed.to_le_bytes());
        let arrivals = ChaCha8Rng::from_seed(key);
        let mut clients = arrivals.clone();
        clients.set_stream(1);
        Requests {
            traffic: self,
            schedule,
            senders,
            arrivals,
            clients,
            mass: 0.0,
            last: 0,
            end: self.seconds.saturating_mul(SECOND),
            done: self.validate().is_err(),
        }
    }
}

/// The address of client `index` (from 0): 10.0.0.1, 10.0.0.2, ... up to 10.255.255.255.
fn client_ip(index: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0A00_0000 | (index + 1)))
}

/// The requests of a [`Synthetic`] traffic, in time order.
#[derive(Debug)]
pub(crate) struct Requests<'a> {
    traffic: &'a Synthetic,
    schedule: Schedule,
    senders: Senders,
    /// Draws the instants. A stream of its own, so that `clients` doesn't move them.
    arrivals: ChaCha8Rng,
    /// Draws the clients.
    clients: ChaCha8Rng,
    /// The arrivals so far as the time of a Poisson process at 1 a second, which the
    /// schedule maps to the traffic's time.
    mass: f64,
    /// The last request's offset from `start`, in ns.
    last: u64,
    /// `seconds`, in ns.
    end: u64,
    done: bool,
}

impl Iterator for Requests<'_> {
    type Item = TraceRequest;

    fn next(&mut self) -> Option<TraceRequest> {
        if self.done {
            return None;
        }
        self.mass += exponential(&mut self.arrivals);
        // Rounding where a periodic rate changes could put a request a nanosecond early.
        let offset = self.schedule.offset(self.mass).max(self.last);
        if offset >= self.end {
            self.done = true;
            return None;
        }
        self.last = offset;
        let client = match &self.senders {
            Senders::Uniform { clients } => below(&mut self.clients, *clients),
            Senders::Zipf(ranks) => ranks.sample(&mut self.clients) - 1,
        };
        Some(TraceRequest {
            at: self.traffic.start.saturating_add(offset),
            method: self.traffic.method.clone(),
            target: self.traffic.target.clone(),
            ip: client_ip(client),
            headers: Vec::new(),
            duration: None,
            status: None,
            response_headers: Vec::new(),
        })
    }
}

impl FusedIterator for Requests<'_> {}

/// How the arrival rate varies over the run.
#[derive(Debug, Clone, Copy)]
enum Schedule {
    /// `rate` a second throughout.
    Constant { rate: f64 },
    /// Rising linearly from 0 at the start to 2 × `rate` at `seconds`.
    Ramp { rate: f64, seconds: f64 },
    /// In each period of `period` ns, `high` a second during the first second and `low` a
    /// second for the rest; `per_period` arrivals a period on average.
    Periodic {
        period: u64,
        high: f64,
        low: f64,
        per_period: f64,
    },
}

impl Schedule {
    /// A periodic schedule of `period` seconds.
    fn periodic(period: u64, high: f64, low: f64) -> Self {
        Schedule::Periodic {
            period: period.saturating_mul(SECOND),
            high,
            low,
            per_period: high + low * period.saturating_sub(1) as f64,
        }
    }

    /// The offset from the start, in ns, at which the cumulative rate (the mean number of
    /// arrivals since the start) reaches `mass`: the inverse of the cumulative rate, which
    /// turns a Poisson process at 1 a second into one at the schedule's rate.
    fn offset(self, mass: f64) -> u64 {
        match self {
            Schedule::Constant { rate } => nanos(mass / rate),
            // The cumulative rate is rate × t² / seconds.
            Schedule::Ramp { rate, seconds } => nanos((mass * seconds / rate).sqrt()),
            Schedule::Periodic {
                period,
                high,
                low,
                per_period,
            } => {
                let index = (mass / per_period).floor();
                let within = (mass - index * per_period).max(0.0);
                // The clamps keep a rounded instant inside the part of the period it fell in.
                let offset = if within < high || low == 0.0 {
                    nanos(within / high).min(SECOND - 1)
                } else {
                    (SECOND + nanos((within - high) / low)).min(period - 1)
                };
                (index as u64).saturating_mul(period).saturating_add(offset)
            }
        }
    }
}

/// Seconds as whole nanoseconds, rounded down (and saturated).
fn nanos(seconds: f64) -> u64 {
    (seconds * 1e9) as u64
}

/// Who sends each request.
#[derive(Debug)]
enum Senders {
    /// Any of `clients`, uniformly.
    Uniform { clients: u32 },
    /// A Zipf-distributed rank.
    Zipf(ZipfRanks),
}

/// A uniform draw from 0..`n`, exactly (Lemire's multiply-and-reject); `n` > 0.
fn below(rng: &mut ChaCha8Rng, n: u32) -> u32 {
    let n = u64::from(n);
    loop {
        let product = u128::from(rng.next_u64()) * u128::from(n);
        let low = product as u64;
        // Rejects the 2^64 mod n values that would favour the smaller results.
        if low >= n || low >= n.wrapping_neg() % n {
            return (product >> 64) as u32;
        }
    }
}

/// A uniform draw from [0, 1), with 53 random bits.
fn unit(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A draw from the exponential distribution of mean 1: the gap between arrivals of a Poisson
/// process at 1 a second.
fn exponential(rng: &mut ChaCha8Rng) -> f64 {
    // In (0, 1], so the logarithm is finite; the subtraction is exact.
    -libm::log(1.0 - unit(rng))
}

/// Draws ranks 1..=n with probabilities proportional to 1 / k^exponent, by rejection-inversion
/// (Hörmann and Derflinger, 1996; as in Apache Commons RNG): a constant time a draw, for any n.
#[derive(Debug)]
struct ZipfRanks {
    n: f64,
    exponent: f64,
    /// `h_integral(1.5) - 1`.
    h_integral_x1: f64,
    /// `h_integral(n + 0.5)`.
    h_integral_n: f64,
    /// Below this distance from the inverse, a rank is accepted without the test.
    squeeze: f64,
}

impl ZipfRanks {
    /// Ranks 1..=`n` (`n` ≥ 1) with `exponent` (> 0).
    fn new(n: u32, exponent: f64) -> Self {
        let mut ranks = ZipfRanks {
            n: f64::from(n),
            exponent,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            squeeze: 0.0,
        };
        ranks.h_integral_x1 = ranks.h_integral(1.5) - 1.0;
        ranks.h_integral_n = ranks.h_integral(ranks.n + 0.5);
        ranks.squeeze = 2.0 - ranks.h_integral_inverse(ranks.h_integral(2.5) - ranks.h(2.0));
        ranks
    }

    /// One rank.
    fn sample(&self, rng: &mut ChaCha8Rng) -> u32 {
        loop {
            // In (h_integral_x1, h_integral_n].
            let u = self.h_integral_n + unit(rng) * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.squeeze || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u32;
            }
        }
    }

    /// The weight of rank x: x^-exponent.
    fn h(&self, x: f64) -> f64 {
        libm::exp(-self.exponent * libm::log(x))
    }

    /// The integral of `h` from 1 to x: (x^(1 - exponent) - 1) / (1 - exponent), or ln x.
    fn h_integral(&self, x: f64) -> f64 {
        let log_x = libm::log(x);
        expm1_over((1.0 - self.exponent) * log_x) * log_x
    }

    /// The inverse of `h_integral`.
    fn h_integral_inverse(&self, x: f64) -> f64 {
        // Below -1 only by rounding, where the logarithm would be undefined.
        let t = (x * (1.0 - self.exponent)).max(-1.0);
        libm::exp(log1p_over(t) * x)
    }
}

/// ln(1 + x) / x, accurate near 0 (where it tends to 1).
fn log1p_over(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        libm::log1p(x) / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// (e^x - 1) / x, accurate near 0 (where it tends to 1).
fn expm1_over(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        libm::expm1(x) / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2023-11-14T22:13:20Z.
    const START: u64 = 1_700_000_000_000_000_000;

    /// Every test's count is asserted within this many standard deviations of its mean: a
    /// correct generator fails it with a chance under 1e-6 (and the seeds are fixed).
    const SDS: f64 = 5.0;

    fn traffic(pattern: Pattern) -> Synthetic {
        Synthetic {
            pattern,
            rate: 1000.0,
            seconds: 20,
            clients: 100,
            period: 5,
            exponent: 1.0,
            seed: 7,
            start: START,
            target: "/".to_owned(),
            method: Method::GET,
        }
    }

    /// Requests in each second of the run.
    fn per_second(traffic: &Synthetic) -> Vec<f64> {
        let mut counts = vec![0.0; traffic.seconds as usize];
        for request in traffic.requests() {
            counts[((request.at - traffic.start) / SECOND) as usize] += 1.0;
        }
        counts
    }

    /// Requests from each client.
    fn per_client(traffic: &Synthetic) -> Vec<f64> {
        let mut counts = vec![0.0; traffic.clients as usize];
        for request in traffic.requests() {
            let IpAddr::V4(ip) = request.ip else {
                panic!("{} is not IPv4", request.ip)
            };
            counts[(u32::from(ip) - 0x0A00_0001) as usize] += 1.0;
        }
        counts
    }

    /// Asserts that a count is within `SDS` standard deviations `sd` of `mean`.
    #[track_caller]
    fn assert_near(count: f64, mean: f64, sd: f64, what: &str) {
        assert!(
            (count - mean).abs() <= SDS * sd,
            "{what}: {count}, expected {mean} ± {}",
            SDS * sd
        );
    }

    /// Asserts that a Poisson count is near its mean (its standard deviation is √mean).
    #[track_caller]
    fn assert_poisson(count: f64, mean: f64, what: &str) {
        assert_near(count, mean, mean.sqrt(), what);
    }

    /// FNV-1a over the first 1000 requests' instants and addresses.
    fn checksum(traffic: &Synthetic) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for request in traffic.requests().take(1000) {
            let IpAddr::V4(ip) = request.ip else {
                panic!("{} is not IPv4", request.ip)
            };
            for byte in request.at.to_le_bytes().into_iter().chain(ip.octets()) {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        hash
    }

    const PATTERNS: [Pattern; 5] = [
        Pattern::Steady,
        Pattern::Burst,
        Pattern::Ramp,
        Pattern::Spikes,
        Pattern::Zipf,
    ];

    #[test]
    fn pattern_parses_every_name_and_lists_them_for_an_unknown_one() {
        for pattern in PATTERNS {
            assert_eq!(pattern.to_string().parse::<Pattern>(), Ok(pattern));
        }
        assert_eq!("spikes".parse::<Pattern>(), Ok(Pattern::Spikes));
        assert_eq!(
            "Steady".parse::<Pattern>(),
            Err(
                "unknown pattern `Steady`: expected one of steady, burst, ramp, spikes, zipf"
                    .into()
            )
        );
    }

    #[test]
    fn every_pattern_is_in_time_order_within_the_run_with_its_mean_count() {
        for pattern in PATTERNS {
            let traffic = traffic(pattern);
            let requests: Vec<_> = traffic.requests().collect();
            let end = START + traffic.seconds * SECOND;
            assert!(requests.windows(2).all(|pair| pair[0].at <= pair[1].at));
            assert!(requests.iter().all(|r| (START..end).contains(&r.at)));
            assert!(requests
                .iter()
                .all(|r| r.method == Method::GET && r.target == "/" && r.headers.is_empty()));
            let what = format!("{pattern} requests");
            assert_poisson(requests.len() as f64, traffic.expected_requests(), &what);
        }
    }

    #[test]
    fn steady_spreads_its_requests_evenly_over_the_seconds() {
        let traffic = traffic(Pattern::Steady);
        assert_eq!(traffic.expected_requests(), 20_000.0);
        for (second, count) in per_second(&traffic).into_iter().enumerate() {
            assert_poisson(count, 1000.0, &format!("second {second}"));
        }
    }

    #[test]
    fn burst_arrives_only_in_the_first_second_of_each_period() {
        // The last period is cut to 2 seconds, and keeps its whole burst.
        let traffic = Synthetic {
            seconds: 22,
            ..traffic(Pattern::Burst)
        };
        assert_eq!(traffic.expected_requests(), 25_000.0);
        let counts = per_second(&traffic);
        for (second, count) in counts.iter().enumerate() {
            if second % 5 == 0 {
                assert_poisson(*count, 5000.0, &format!("second {second}"));
            } else {
                assert_eq!(*count, 0.0, "second {second}");
            }
        }
        assert_poisson(counts.iter().sum(), 25_000.0, "all bursts");
    }

    #[test]
    fn spikes_multiply_the_rate_by_ten_in_the_first_second_of_each_period() {
        let traffic = Synthetic {
            rate: 100.0,
            seconds: 100,
            period: 10,
            ..traffic(Pattern::Spikes)
        };
        assert_eq!(traffic.expected_requests(), 10_000.0 + 9000.0);
        let counts = per_second(&traffic);
        let spikes = (0..100).step_by(10).map(|second| counts[second]);
        for (index, count) in spikes.clone().enumerate() {
            assert_poisson(count, 1000.0, &format!("second {}", index * 10));
        }
        assert_poisson(spikes.sum(), 10_000.0, "the 10 spikes");
        let between: f64 = (0..100).filter(|s| s % 10 != 0).map(|s| counts[s]).sum();
        assert_poisson(between, 9000.0, "the other 90 seconds");
    }

    #[test]
    fn ramp_rises_linearly_from_zero() {
        let traffic = traffic(Pattern::Ramp);
        let counts = per_second(&traffic);
        let sum = |seconds: std::ops::Range<usize>| counts[seconds].iter().sum::<f64>();
        // The cumulative mean is rate × t² / seconds: quarters 1:3:5:7, halves 1:3.
        assert_poisson(sum(0..10), 5000.0, "first half");
        assert_poisson(sum(10..20), 15_000.0, "second half");
        for (quarter, mean) in [1250.0, 3750.0, 6250.0, 8750.0].into_iter().enumerate() {
            let seconds = quarter * 5..quarter * 5 + 5;
            assert_poisson(sum(seconds), mean, &format!("quarter {quarter}"));
        }
        assert!(counts[0] < 100.0, "the first second: {}", counts[0]);
    }

    #[test]
    fn zipf_gives_client_zero_the_share_one_over_the_harmonic_number() {
        for (clients, exponent) in [(100, 1.0), (1000, 0.8), (50, 2.0)] {
            let traffic = Synthetic {
                clients,
                exponent,
                ..traffic(Pattern::Zipf)
            };
            let counts = per_client(&traffic);
            let total: f64 = counts.iter().sum();
            let harmonic: f64 = (1..=clients).map(|k| f64::from(k).powf(-exponent)).sum();
            for rank in 1..=3 {
                let share = f64::from(rank).powf(-exponent) / harmonic;
                let sd = (total * share * (1.0 - share)).sqrt();
                let what = format!("client {} of {clients}, exponent {exponent}", rank - 1);
                assert_near(counts[rank as usize - 1], total * share, sd, &what);
            }
            let most = counts.iter().copied().fold(0.0, f64::max);
            assert_eq!(counts[0], most, "{clients} clients, exponent {exponent}");
        }
    }

    #[test]
    fn zipf_over_ten_million_clients_stays_among_them() {
        let traffic = Synthetic {
            clients: MAX_CLIENTS,
            exponent: 1.1,
            seconds: 5,
            ..traffic(Pattern::Zipf)
        };
        let last = client_ip(MAX_CLIENTS - 1);
        let (mut total, mut first) = (0.0, 0.0);
        for request in traffic.requests() {
            assert!(
                client_ip(0) <= request.ip && request.ip <= last,
                "{}",
                request.ip
            );
            total += 1.0;
            first += f64::from(u8::from(request.ip == client_ip(0)));
        }
        // H(10^7, 1.1): the first 1000 terms, then the integral of the rest (k ± 0.5 about
        // each term), whose error is far below the tolerance.
        let head: f64 = (1..=1000).map(|k| f64::from(k).powf(-1.1)).sum();
        let tail = (1000.5f64.powf(-0.1) - (1e7f64 + 0.5).powf(-0.1)) / 0.1;
        let share = 1.0 / (head + tail);
        let sd = (total * share * (1.0 - share)).sqrt();
        assert_near(first, total * share, sd, "client 0 of 10^7");
    }

    #[test]
    fn uniform_patterns_spread_requests_evenly_over_clients() {
        for pattern in [
            Pattern::Steady,
            Pattern::Burst,
            Pattern::Ramp,
            Pattern::Spikes,
        ] {
            let traffic = Synthetic {
                clients: 10,
                ..traffic(pattern)
            };
            let counts = per_client(&traffic);
            let total: f64 = counts.iter().sum();
            let sd = (total * 0.1 * 0.9).sqrt();
            for (client, count) in counts.into_iter().enumerate() {
                assert_near(
                    count,
                    total / 10.0,
                    sd,
                    &format!("{pattern} client {client}"),
                );
            }
        }
    }

    #[test]
    fn client_addresses_count_from_10_0_0_1() {
        assert_eq!(client_ip(0), IpAddr::from([10, 0, 0, 1]));
        assert_eq!(client_ip(255), IpAddr::from([10, 0, 1, 0]));
        assert_eq!(client_ip(16_777_214), IpAddr::from([10, 255, 255, 255]));
        let one = Synthetic {
            clients: 1,
            ..traffic(Pattern::Steady)
        };
        assert!(one.requests().all(|r| r.ip == client_ip(0)));
    }

    #[test]
    fn the_same_seed_gives_the_same_requests_and_another_seed_others() {
        for pattern in PATTERNS {
            let traffic = traffic(pattern);
            let again: Vec<_> = traffic.requests().collect();
            assert_eq!(traffic.requests().collect::<Vec<_>>(), again);
            let other = Synthetic { seed: 8, ..traffic };
            assert_ne!(other.requests().take(10).collect::<Vec<_>>(), again[..10]);
        }
    }

    #[test]
    fn the_number_of_clients_does_not_move_the_instants() {
        let instants = |clients| {
            let traffic = Synthetic {
                clients,
                ..traffic(Pattern::Zipf)
            };
            traffic.requests().map(|r| r.at).collect::<Vec<_>>()
        };
        assert_eq!(instants(3), instants(1000));
    }

    #[test]
    fn the_first_thousand_requests_match_their_checksums() {
        // Fixed by the seed on every platform; a change here changes every user's runs.
        let expected = [
            (Pattern::Steady, 0x46df2fe3fcfa177b),
            (Pattern::Burst, 0x4d3b907de6219e53),
            (Pattern::Ramp, 0x374123f83ec63ae2),
            (Pattern::Spikes, 0xd37b60581b4ba59d),
            (Pattern::Zipf, 0x574eedf4bc8d87e1),
        ];
        for (pattern, sum) in expected {
            assert_eq!(checksum(&traffic(pattern)), sum, "{pattern}");
        }
    }

    #[test]
    fn validate_accepts_the_limits() {
        let at_limits = Synthetic {
            rate: 1e7,
            seconds: 10,
            clients: MAX_CLIENTS,
            period: 1,
            exponent: 1e-9,
            ..traffic(Pattern::Zipf)
        };
        assert_eq!(at_limits.validate(), Ok(()));
        let longest = Synthetic {
            rate: 1000.0,
            seconds: 86_400,
            clients: 1,
            ..traffic(Pattern::Steady)
        };
        assert_eq!(longest.validate(), Ok(()));
    }

    #[test]
    fn validate_names_each_flag_at_fault() {
        let cases = [
            (
                Synthetic {
                    rate: 0.0,
                    ..traffic(Pattern::Steady)
                },
                "--rate must be above 0 and at most 10000000 requests a second, not 0",
            ),
            (
                Synthetic {
                    rate: f64::NAN,
                    ..traffic(Pattern::Steady)
                },
                "--rate must be above 0 and at most 10000000 requests a second, not NaN",
            ),
            (
                Synthetic {
                    rate: 1e7 + 1.0,
                    ..traffic(Pattern::Steady)
                },
                "--rate must be above 0 and at most 10000000 requests a second, not 10000001",
            ),
            (
                Synthetic {
                    seconds: 0,
                    ..traffic(Pattern::Steady)
                },
                "--seconds must be from 1 to 86400, not 0",
            ),
            (
                Synthetic {
                    seconds: 86_401,
                    ..traffic(Pattern::Steady)
                },
                "--seconds must be from 1 to 86400, not 86401",
            ),
            (
                Synthetic {
                    clients: 0,
                    ..traffic(Pattern::Steady)
                },
                "--clients must be from 1 to 10000000, not 0",
            ),
            (
                Synthetic {
                    clients: 10_000_001,
                    ..traffic(Pattern::Steady)
                },
                "--clients must be from 1 to 10000000, not 10000001",
            ),
            (
                Synthetic {
                    period: 0,
                    ..traffic(Pattern::Burst)
                },
                "--period must be at least 1 second, not 0",
            ),
            (
                Synthetic {
                    exponent: 0.0,
                    ..traffic(Pattern::Zipf)
                },
                "--exponent must be a finite number above 0, not 0",
            ),
            (
                Synthetic {
                    exponent: f64::INFINITY,
                    ..traffic(Pattern::Zipf)
                },
                "--exponent must be a finite number above 0, not inf",
            ),
            (
                Synthetic {
                    rate: 1e7,
                    seconds: 11,
                    ..traffic(Pattern::Ramp)
                },
                "--synthetic ramp at --rate 10000000 for --seconds 11 makes 110000000 \
                 requests on average, more than 100000000: lower --rate or --seconds",
            ),
            (
                // 1e8 at `rate`, and the spikes on top.
                Synthetic {
                    rate: 1e6,
                    seconds: 100,
                    period: 10,
                    ..traffic(Pattern::Spikes)
                },
                "--synthetic spikes at --rate 1000000 for --seconds 100 with --period 10 \
                 makes 190000000 requests on average, more than 100000000: lower --rate or \
                 --seconds",
            ),
            (
                Synthetic {
                    rate: -1.0,
                    seconds: 0,
                    ..traffic(Pattern::Steady)
                },
                "--rate must be above 0 and at most 10000000 requests a second, not -1\n\
                 --seconds must be from 1 to 86400, not 0",
            ),
        ];
        for (traffic, message) in cases {
            assert_eq!(traffic.validate(), Err(message.to_owned()));
        }
    }

    #[test]
    fn invalid_traffic_has_no_requests() {
        let invalid = Synthetic {
            rate: f64::NAN,
            ..traffic(Pattern::Steady)
        };
        assert_eq!(invalid.requests().next(), None);
    }

    /// `cargo test --release -p tollgate-cli -- --ignored --nocapture a_million`
    #[test]
    #[ignore = "a measurement: run it in release"]
    fn generating_a_million_requests() {
        for pattern in PATTERNS {
            let traffic = Synthetic {
                rate: 100_000.0,
                seconds: 10,
                clients: 10_000,
                ..traffic(pattern)
            };
            let started = std::time::Instant::now();
            let count = traffic.requests().count();
            let elapsed = started.elapsed();
            println!("{pattern}: {count} requests in {elapsed:.3?}");
        }
    }
}
