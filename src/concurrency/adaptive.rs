//! The adaptive limit: how many requests the server runs at once, found from the latencies
//! it observes.
//!
//! It is TCP Vegas's congestion avoidance, as Netflix's concurrency-limits applies it to
//! requests (`VegasLimit`). The least latency seen is the latency without a queue; a request
//! that took longer waited behind others, and `limit × (1 − least / latency)` estimates how
//! many were queued. A queue of a few requests is what keeps a backend busy; more only adds
//! latency. So the limit grows while the queue is short, holds while it is a few requests
//! long (3 to 6 × log10 of the limit, at least 1), and shrinks beyond. A backend of fixed
//! capacity `c` settles near `c` plus that small queue, however long the overload lasts.
//!
//! Chosen over the alternatives for that reason. Gradient2 (concurrency-limits' default)
//! compares the latency with its own long-term average, which a sustained overload drags up
//! until the queue is no longer seen; Envoy's gradient controller re-measures the least
//! latency by pinning the concurrency to a minimum at intervals, refusing traffic meanwhile.
//! Vegas forgets the least latency at intervals too (every 30 × limit samples, taking the
//! latency of that moment), but keeps serving: a backend whose own latency grew is followed
//! within a probe.

use crate::rules::Bounds;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

/// The limit a server starts from, within its bounds (concurrency-limits' default).
const INITIAL: u32 = 20;
/// Samples between probes, per request of the limit.
const PROBE_MULTIPLIER: f64 = 30.0;

/// The adaptive limit, fed each admitted request's latency when it ends.
#[derive(Debug)]
pub(crate) struct AdaptiveLimit {
    /// The limit now, read by every request.
    limit: AtomicU32,
    vegas: Mutex<Vegas>,
}

#[derive(Debug)]
struct Vegas {
    estimated: f64,
    /// The least latency since the last probe, in nanoseconds.
    no_load: Option<u64>,
    samples_to_probe: u64,
}

impl Default for AdaptiveLimit {
    fn default() -> Self {
        AdaptiveLimit {
            limit: AtomicU32::new(INITIAL),
            vegas: Mutex::new(Vegas {
                estimated: f64::from(INITIAL),
                no_load: None,
                samples_to_probe: probe_interval(f64::from(INITIAL)),
            }),
        }
    }
}

impl AdaptiveLimit {
    /// The limit now, within `bounds`.
    pub(crate) fn limit(&self, bounds: Bounds) -> u32 {
        self.limit
            .load(Ordering::Relaxed)
            .clamp(bounds.min, bounds.max)
    }

    /// Learns from a request that took `latency_nanos` from admission to the end of its
    /// response, admitted with `in_flight` requests running (itself included).
    pub(crate) fn sample(&self, latency_nanos: u64, in_flight: u32, bounds: Bounds) {
        let mut vegas = self.vegas.lock();
        vegas.update(latency_nanos.max(1), in_flight, bounds);
        // Rounded to the nearest request: at most `bounds.max`, so it fits.
        self.limit
            .store(vegas.estimated.round() as u32, Ordering::Relaxed);
    }
}

impl Vegas {
    fn update(&mut self, latency: u64, in_flight: u32, bounds: Bounds) {
        let (min, max) = (f64::from(bounds.min), f64::from(bounds.max));
        self.estimated = self.estimated.clamp(min, max);
        self.samples_to_probe = self.samples_to_probe.saturating_sub(1);
        if self.samples_to_probe == 0 {
            // The backend's own latency may have grown: start again from this one.
            self.no_load = Some(latency);
            self.samples_to_probe = probe_interval(self.estimated);
            return;
        }
        let no_load = match self.no_load {
            Some(least) if latency >= least => least,
            _ => {
                self.no_load = Some(latency);
                return;
            }
        };
        let limit = self.estimated;
        // A server far from its limit learns nothing about a larger one.
        if f64::from(in_flight) * 2.0 < limit {
            return;
        }
        let queued = (limit * (1.0 - no_load as f64 / latency as f64)).ceil();
        let step = limit.log10().floor().max(1.0);
        let (alpha, beta) = (3.0 * step, 6.0 * step);
        let next = if queued <= step {
            limit + beta
        } else if queued < alpha {
            limit + step
        } else if queued > beta {
            limit - step
        } else {
            return;
        };
        self.estimated = next.clamp(min, max);
    }
}

/// Samples until the next probe at a limit of `limit`.
fn probe_interval(limit: f64) -> u64 {
    // At least one sample; the limit is at most u32::MAX.
    (PROBE_MULTIPLIER * limit).max(1.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Reverse;
    use std::collections::{BinaryHeap, VecDeque};

    /// What a simulated run served: its limit at the end, the mean latency of the requests
    /// admitted in its second half, and the requests served a second then.
    struct Run {
        limit: u32,
        mean_latency_ms: f64,
        served_per_second: f64,
    }

    /// Simulates, by the millisecond, `clients` that each send a request as soon as their
    /// last one ends (or 5 ms after it was shed) to a server with the adaptive limit (within
    /// `bounds`) in front of a backend of `workers` workers that each take `work_ms` a request.
    fn simulate(clients: usize, workers: usize, work_ms: u64, seconds: u64, bounds: Bounds) -> Run {
        let adaptive = AdaptiveLimit::default();
        let end = seconds * 1000;
        // Requests waiting for a worker: (admitted at, in flight then).
        let mut queue: VecDeque<(u64, u32)> = VecDeque::new();
        // Requests being worked on, by when they end: (end, admitted at, in flight then).
        let mut working: BinaryHeap<Reverse<(u64, u64, u32)>> = BinaryHeap::new();
        let mut next_send: Vec<u64> = vec![0; clients];
        let mut waiting_clients: usize = 0;
        let (mut latencies, mut served) = (Vec::new(), 0u64);
        for now in 0..end {
            while let Some(&Reverse((done, admitted, in_flight))) = working.peek() {
                if done > now {
                    break;
                }
                working.pop();
                let latency = done - admitted;
                adaptive.sample(latency * 1_000_000, in_flight, bounds);
                waiting_clients += 1;
                if now >= end / 2 {
                    latencies.push(latency as f64);
                    served += 1;
                }
            }
            // Clients whose request ended send again now.
            let mut sending = std::mem::take(&mut waiting_clients);
            for at in &mut next_send {
                if *at == now {
                    sending += 1;
                    *at = u64::MAX;
                }
            }
            for _ in 0..sending {
                let in_flight = u32::try_from(queue.len() + working.len()).unwrap();
                if in_flight < adaptive.limit(bounds) {
                    queue.push_back((now, in_flight + 1));
                } else if let Some(at) = next_send.iter_mut().find(|at| **at == u64::MAX) {
                    *at = now + 5;
                }
            }
            while working.len() < workers {
                let Some((admitted, in_flight)) = queue.pop_front() else {
                    break;
                };
                working.push(Reverse((now + work_ms, admitted, in_flight)));
            }
        }
        Run {
            limit: adaptive.limit(bounds),
            mean_latency_ms: latencies.iter().sum::<f64>() / latencies.len() as f64,
            served_per_second: served as f64 / (seconds / 2) as f64,
        }
    }

    #[test]
    fn a_backend_of_fixed_capacity_is_found_and_kept_busy_without_a_long_queue() {
        // 4 workers of 20 ms: 200 requests a second at most, 20 ms each without a queue.
        let run = simulate(64, 4, 20, 60, Bounds { min: 1, max: 1000 });
        assert!(
            (4..=16).contains(&run.limit),
            "the limit settles near the 4 workers: {}",
            run.limit
        );
        assert!(
            run.mean_latency_ms <= 4.0 * 20.0,
            "admitted requests wait little: {} ms",
            run.mean_latency_ms
        );
        assert!(
            run.served_per_second >= 0.9 * 200.0,
            "the backend stays busy: {} a second",
            run.served_per_second
        );
    }

    #[test]
    fn without_the_limit_the_same_load_queues_behind_every_client() {
        let unlimited = Bounds {
            min: 1000,
            max: 1000,
        };
        let run = simulate(64, 4, 20, 20, unlimited);
        // 64 requests in flight for 4 workers: each waits for 15 others' work.
        assert!(run.mean_latency_ms >= 300.0, "{} ms", run.mean_latency_ms);
    }

    #[test]
    fn the_limit_stays_within_its_bounds() {
        let adaptive = AdaptiveLimit::default();
        let bounds = Bounds { min: 2, max: 5 };
        for latency in [10, 10, 10, 1000, 1000, 10, 10] {
            adaptive.sample(latency, 5, bounds);
            assert!((2..=5).contains(&adaptive.limit(bounds)));
        }
    }
}
