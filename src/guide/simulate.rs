//! # Trying rules on traffic: `tollgate simulate`
//!
//! Every algorithm has parameters that are hard to choose by thinking alone: how large a
//! burst, how long a window, which algorithm at all. `tollgate simulate` replays traffic
//! through a rules file and shows what each limit would have done to it: before the rules
//! ship, instead of shipping them in shadow mode and watching.
//!
//! ```sh
//! tollgate simulate rules.yaml --trace access.log                # what the rules do to a day of logs
//! tollgate simulate rules.yaml --trace access.log --compare-algorithms --plot what.svg
//! tollgate simulate rules.yaml --trace access.log --against new-rules.yaml
//! tollgate simulate rules.yaml --synthetic zipf --rate 200 --clients 1000 --seconds 600
//! ```
//!
//! Each request goes through the same code as [`RateLimitLayer`](crate::RateLimitLayer):
//! the same sources, client address (the trace's address is the socket peer, and forwarding
//! headers in the trace are believed from trusted proxies), matching and algorithms, by way
//! of `Limiter::check_request_each` on a clock set to
//! each request's time. Nothing sleeps: an hour of traffic replays in seconds. The state
//! lives in memory, as in one server with the memory store, hashed under a fixed seed
//! (`MemoryStore::reproducible`), so the same
//! input gives the same output, byte for byte, on every machine. Two sources are not in a
//! trace: the matched route (the `route` key) and an [`Identity`](crate::source::Identity)
//! an authentication layer would set; limits on them never apply in a simulation.
//!
//! # Traffic
//!
//! A trace, one request a line, in one of three formats (`--format`, or detected from the
//! first line):
//!
//! | format | a line |
//! |---|---|
//! | `combined`: nginx and Apache's combined (or common) log format | `203.0.113.9 - - [27/Nov/2026:10:00:00 +0000] "GET /search?q=x HTTP/1.1" 200 512 "-" "curl/8.5"` |
//! | `jsonl`: JSON lines | `{"ts": "2026-11-27T10:00:00.25Z", "method": "GET", "path": "/search", "ip": "203.0.113.9", "headers": {"x-user-id": "42"}}` |
//! | `csv`: a header row, then one row a request | `ts,method,path,ip,x-user-id` then `1795773600.25,GET,/search,203.0.113.9,42` |
//!
//! `ts` is RFC 3339 or Unix seconds with a fraction; `ip` is the client's address; `method`
//! (default `GET`) and `path` (default `/`, with the query) are optional. A combined log
//! line gives its `Referer` and `User-Agent` as headers; a CSV column other than the four
//! is a header of that name. Times are whole seconds in a combined log, so the requests of
//! one second arrive together, which makes the buckets look harsher than they are (and
//! nginx logs the time a request ended, not when it arrived): a JSON or CSV trace with
//! fractions of a second is closer to the truth.
//!
//! [Concurrency limits](super::rules#concurrency) and [load shedding](super::rules#load_shedding)
//! count the requests running: a request whose trace says how long it ran holds its slots
//! that long, from its time on (`duration_ms`, in milliseconds, in a JSON line or a CSV
//! column; in a combined log, nginx's `$request_time`, in seconds, right after the user
//! agent). A request without a duration holds its slots for no time at all.
//!
//! Limits that learn from the response ([`settle`](super::rules#settle-costs-known-after-the-response),
//! [`count_when`](super::rules#count_when-counting-outcomes)) read what the trace says of it:
//! `status` and a `response_headers` object in a JSON line; a `status` column and columns
//! named `response:<header>` in a CSV; the status of a combined log. A trace that says
//! nothing of a response leaves each request its reservation. [Blocks](super::rules#block_for-a-penalty)
//! and [calendar windows](super::rules#calendar-quotas) follow the trace's time.
//!
//! A line that cannot be read is reported on standard error with its number and skipped,
//! or stops the run with `--strict`. A line earlier in time than the one before it stops
//! the run, with both line numbers: sort the trace first.
//!
//! Without a trace, `--synthetic PATTERN` generates traffic, the same for the same
//! `--seed`: `steady` (random arrivals at `--rate` a second), `burst` (each `--period`'s
//! requests within its first second), `ramp` (from 0 to twice `--rate`), `spikes` (ten
//! times `--rate` for the first second of each `--period`), and `zipf` (`--clients` clients
//! whose shares follow Zipf's law, `--exponent`). Every pattern sends from `--clients`
//! addresses (10.0.0.1, 10.0.0.2, ...) for `--seconds`, asking `--method` `--path`.
//!
//! # What it shows
//!
//! A table with a row per limit: the requests it applied to (`SEEN`), how many of them it
//! `ADMITTED` (at once or after a delay), `DENIED` and `DELAYED` (a shaping leaky bucket's
//! queue), with the median and 99th percentile of those delays, and the distinct state keys
//! (clients, users, ...) it counted; then the keys each limit denied most (`--top`). Each
//! limit counts by its own decision: when two limits refuse a request, both count it; a
//! request another limit refused counts in `SEEN` only (all or nothing: it charged this
//! limit nothing). A shadow-mode limit counts what it would have done.
//!
//! `--json` prints the same figures as JSON; `--verbose` adds every request's verdict, and
//! nothing else is printed per request. `--plot FILE` draws each limit's admitted, delayed
//! and denied requests a second (`.svg`, `.png`, or `.html` with a table of totals).
//!
//! `--compare-algorithms` replays the traffic under each algorithm as well, every limit
//! keeping its quota (`Rules::with_algorithm`): the
//! same requests per period, and the same capacity (the token bucket's and GCRA's burst
//! become the leaky bucket's queue and the request served, and back). `--against OTHER`
//! replays it under other rules too, and counts the requests whose verdict changes, per
//! limit, with the first few as examples. Every replay reads the traffic once, side by side.
//!
//! # A worked example: a bursty client
//!
//! Two clients over a minute: one sends 4 requests a second, evenly; the other 25 requests
//! in half a second every 10 seconds, 2.5 a second on average. The trace
//! (`examples/traces/bursty.jsonl` in the repository) starts:
//!
//! ```text
//! {"ts": "1795773600.000", "method": "GET", "path": "/api/items", "ip": "198.51.100.10"}
//! {"ts": "1795773600.250", "method": "GET", "path": "/api/items", "ip": "198.51.100.10"}
//! ```
//!
//! The rules (`examples/traces/per-client.yaml`) allow each client 5 requests a second, in
//! fixed windows:
//!
//! ```yaml
//! domain: example
//! descriptors:
//!   - key: remote_address
//!     rate_limit: { unit: second, requests_per_unit: 5, algorithm: fixed_window, name: per-client }
//! ```
//!
//! Both clients stay under 5 a second on average, but the bursty one is refused 120 of its
//! 150 requests. Would another algorithm do better?
//!
//! ```text
//! $ cd examples/traces
//! $ tollgate simulate per-client.yaml --trace bursty.jsonl --compare-algorithms
#![doc = include_str!("simulate-compare.txt")]
//! ```
//!
//! Not much: with the same quota, every algorithm lets a client send 5 at once, and the
//! buckets give back 2 or 3 more during the half second of the burst (the leaky bucket
//! makes 36 of them wait, up to 800 ms). What the bursty client needs is a larger burst. A
//! token bucket that lets a client save up 25 requests (`burst: 25`,
//! `examples/traces/per-client-burst.yaml`) keeps the same 5 a second on average:
//!
//! ```text
//! $ tollgate simulate per-client.yaml --trace bursty.jsonl --against per-client-burst.yaml --plot bursty.svg
#![doc = include_str!("simulate-against.txt")]
//! ```
//!
//! Every request of the bursty client is admitted, and the steady one is not affected:
//!
#![doc = include_str!("simulate-bursty.svg")]
//!
//! A token bucket of 5 a second with bursts of 25 still refuses a client that sends more
//! than 25 at once, or more than 5 a second for long; `tollgate simulate` on a day of real
//! traffic shows how many of your clients that is.
