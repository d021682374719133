//! # Algorithms
//!
//! Each `rate_limit` chooses its algorithm (`algorithm:`, else `defaults.algorithm`, else
//! `fixed_window` as in Envoy). Every algorithm is exact: a request retried at exactly
//! `retry_after` is admitted and one nanosecond earlier it is not, `remaining` never
//! overstates, and many threads on one key admit exactly the limit. The arithmetic is pure
//! ([`crate::algorithm`]: no I/O, no clock reads), and the Redis store runs the same
//! arithmetic in Lua, so both stores answer alike.
//!
//! # Which to choose
//!
//! | algorithm | choose it when | behaviour | memory per key |
//! |---|---|---|---|
//! | `token_bucket` | an API should allow short bursts but hold an average rate | `burst` tokens refilled at the rate; exact integer arithmetic, no float drift | 34 B; 67 B when the interval is not whole (7 per second) |
//! | `gcra` | the same as a token bucket, in the least memory | one timestamp per key; the interval `period / limit` is rounded up to a whole nanosecond, so the rate is never exceeded | 34 B |
//! | `leaky_bucket` | a slow upstream must see a steady rate; excess should wait rather than fail (nginx `limit_req`) | a FIFO queue of `queue` places drained at the rate ([queueing](#queueing-the-leaky-bucket)) | 34 B |
//! | `fixed_window` | cheap counting against calendar units (150 a day), as in Envoy | a counter per window aligned to the unit since the Unix epoch (a minute starts at `:00`, a day at 00:00 UTC); up to 2× the limit across a window edge | 67 B |
//! | `sliding_window_counter` | near-exact rolling windows in constant memory | the current window's count plus the previous one's weighted by overlap | 134 B |
//! | `sliding_window_log` | a rolling window must never admit more than the limit (logins, one-time passwords) | every admitted request's time, kept until it leaves the window | 198 B; 424 B with a full log of 10 |
//!
//! Memory is measured per tracked key at 1,000,000 keys (100,000 for the full logs),
//! everything included (`cargo bench --bench memory_per_key`, figures in the repository's
//! BENCHMARKS.md); governor's keyed limiter needs 69 B for an `IpAddr` key and 80 B for a
//! `String` one.
//!
//! ```rust
//! use tollgate::rules::Rules;
//!
//! let rules = Rules::from_yaml(r#"
//! domain: demo
//! sources:
//!   user_id: { header: x-user-id }
//! defaults:
//!   algorithm: sliding_window_counter
//! descriptors:
//!   - key: remote_address                  # 20 a second, bursts of 40
//!     rate_limit: { unit: second, requests_per_unit: 20, algorithm: token_bucket, burst: 40 }
//!   - key: path                            # one search a second, bursts of 3, in 8 bytes of state
//!     value: /search
//!     descriptors:
//!       - key: remote_address
//!         rate_limit: { unit: second, requests_per_unit: 1, algorithm: gcra, burst: 3 }
//!   - key: path                            # 5 logins a minute, exact in any rolling minute
//!     value: /auth/login
//!     descriptors:
//!       - key: remote_address
//!         rate_limit: { unit: minute, requests_per_unit: 5, algorithm: sliding_window_log }
//!   - key: user_id                         # 150 a day, counted per UTC day
//!     rate_limit: { unit: day, requests_per_unit: 150, algorithm: fixed_window }
//!   - key: path                            # the default: sliding_window_counter
//!     value: /feed
//!     rate_limit: { unit: minute, requests_per_unit: 60 }
//! "#)?;
//! assert_eq!(rules.limits().len(), 5);
//! # Ok::<(), tollgate::rules::RuleErrors>(())
//! ```
//!
//! # Token bucket and GCRA
//!
//! A token bucket holds `burst` tokens (default: the limit) and refills at `requests_per_unit`
//! per period; a request takes `cost` tokens. GCRA (the generic cell rate algorithm, as in
//! governor) gives the same answers from one timestamp per key, with `burst` requests
//! allowed at once. When a token bucket's interval `period / limit` is a whole number of
//! nanoseconds (100 per second, 60 per minute) and an empty bucket refills within 146
//! years, the memory store keeps and decides it as GCRA, with the same answers and in the
//! same memory. Other token buckets (7 per second) keep exact token counts in two words.
//!
//! # Queueing: the leaky bucket
//!
//! A leaky bucket is a FIFO queue of `queue` places (default 0) drained at the limit's rate.
//!
//! - `mode: shape` (the default): a request that finds room waits its turn inside the layer
//!   (with `X-Ratelimit-*` headers as usual), then goes to the service; one that finds the
//!   queue full gets `429` at once. `max_delay` refuses a request that would wait longer.
//! - `mode: police`: the same decision, but an admitted request goes at once.
//!
//! The wait is a Tokio timer, so the server runs on Tokio with time enabled, as axum and
//! tonic servers do. The release time is fixed when the request is decided. A client that
//! goes away while it waits gives its place back when it was the newest in the queue (the
//! requests behind it keep their times). A request under several shaping buckets waits for
//! the longest of its delays. [`Limiter::check`](crate::Limiter::check) reports the delay
//! ([`Verdict::delay`](crate::Verdict::delay)); waiting is then up to the caller, and the
//! place stays booked. With Redis, the release time comes from Redis and each server waits
//! locally.
//!
//! ```yaml
//! descriptors:
//!   - key: path                            # up to 10 wait their turn, released 5 a second, in order
//!     value: /reports
//!     rate_limit: { unit: second, requests_per_unit: 5, algorithm: leaky_bucket, queue: 10, max_delay: 3s }
//! ```
//!
//! # The windows
//!
//! - `fixed_window` counts per window aligned to the unit since the Unix epoch, so up to
//!   twice the limit can pass across a window's edge.
//! - `sliding_window_counter` weighs the previous window's count by how much of it still
//!   overlaps. Admission rounds neither way:
//!   `previous × (period − elapsed) + (current + cost) × period ≤ limit × period` is compared
//!   exactly in integers; `remaining` rounds down, so it never promises a request that would
//!   be denied.
//! - `sliding_window_log` keeps the time of every admitted request (16 bytes each) until it
//!   leaves the window: exact, with memory that grows with the limit. On Redis its limit is
//!   capped at 1,000; use `sliding_window_counter` for larger ones.
//!
//! # What the headers report
//!
//! `X-Ratelimit-Limit` is the most a client may send at once under the limit:
//!
//! | algorithm | `X-Ratelimit-Limit` |
//! |---|---|
//! | `token_bucket`, `gcra` | the burst |
//! | `leaky_bucket` | the queue's places plus the request being served (fewer when `max_delay` cuts the queue short) |
//! | the windows | `requests_per_unit` |
//!
//! The IETF `RateLimit-Policy` (`response.headers: ietf` or `both`) gives that number as
//! `q`, and as `w` the time `q` takes to come back: a window's period, and a bucket's
//! capacity over its rate, rounded up to a whole second (20 a second with bursts of 40 is
//! `q=40;w=2`). A client that spends `q` at once and then `q` per `w`, as tollgate's client
//! layer does when it paces, is never refused by a bucket. `RateLimit`'s `t` is the time
//! until the limit is full again.
//!
//! `X-Ratelimit-Remaining` never overstates what the client may still send. `Retry-After`
//! is exact, rounded up to whole seconds: a retry after that long is admitted. A limit that
//! can never admit the request (`requests_per_unit: 0`, or a `cost` larger than the limit)
//! reports one period. When several limits apply, the headers are those of the most
//! restrictive one. The full list is in
//! [operations: headers](super::operations#headers-and-grpc-answers).
//!
//! # Bounded memory
//!
//! The memory store keeps a 64-bit keyed fingerprint of each state key rather than the key
//! itself, and each state as small as its algorithm allows. A key whose state is back to
//! "never seen" (a full bucket, an expired window) is idle and dropped as its shard fills,
//! or by [`MemoryStore::sweep`](crate::store::MemoryStore::sweep). The number of keys has a
//! ceiling ([`MemoryStore::max_keys`](crate::store::MemoryStore::max_keys),
//! default 1,000,000). At the ceiling the keys not seen for the longest are forgotten (two
//! generations per shard, O(1) per request): under a flood of distinct keys a quiet client
//! may get a fresh allowance, but memory stays bounded and nobody is locked out. Refusing new
//! keys instead would let a flood lock out every new client.
