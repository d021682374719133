//! A load client that shows what the client layer saves: it asks a server for more than its
//! limit, through `tollgate::client::RateLimitClientLayer` or without it.
//!
//! ```text
//! cargo run --example server      # in another shell: 127.0.0.1:3000, per client 20/s, bursts of 40
//! cargo run --example client --features client -- http://127.0.0.1:3000/ --rate 200 --seconds 5
//! cargo run --example client --features client -- http://127.0.0.1:3000/ --rate 200 --seconds 5 --no-pace
//! cargo run --example client --features client -- http://127.0.0.1:3000/ --rate 200 --seconds 5 --no-layer
//! ```
//!
//! It sends `GET URL` `N` times a second (paced by a timer; each request runs on its own
//! task, so a slow answer does not slow the pace) for `S` seconds, with hyper-util's legacy
//! client behind a `RateLimitClientLayer` that paces by the quota the server announces and
//! fails fast (`--no-pace`: that only honours refusals and exhausted quotas; `--no-layer`:
//! none), waits for every answer, and prints one JSON line:
//!
//! ```text
//! {"sent":…,"ok":…,"limited":…,"failed_fast":…,"waited_ms":…}
//! ```
//!
//! - `sent`: requests that reached the server (all but the `failed_fast` ones);
//! - `ok`: 2xx answers; `limited`: 429 answers;
//! - `failed_fast`: requests the layer refused with `ClientError::Held`, without sending them
//!   (the server refused an earlier one for a while, or the quota's next unit is not back);
//! - `waited_ms`: time requests spent waiting in the layer: always 0 here, since the layer
//!   fails fast (it is built without `wait_up_to`).
//!
//! Transport errors (no server listening, for instance) count as sent and are reported on
//! stderr. Bad arguments print the usage and exit with code 2.

use bytes::Bytes;
use http::{Request, Response, StatusCode, Uri};
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tollgate::client::{ClientError, RateLimitClientLayer};
use tower::{Layer, Service, ServiceExt};

const USAGE: &str = "usage: cargo run --example client --features client -- URL --rate N --seconds S [--no-pace | --no-layer]
  URL          an http:// URL, requested with GET
  --rate N     requests a second, 1 to 100000
  --seconds S  how long to send, in seconds, 1 to 3600
  --no-pace    send through tollgate's client layer without pacing
  --no-layer   send without tollgate's client layer";

const EXCLUSIVE: &str = "--no-pace and --no-layer exclude each other";

/// What the requests go through.
#[derive(Clone, Copy, PartialEq)]
enum Through {
    /// The client layer, pacing.
    Paced,
    /// The client layer, not pacing.
    Layer,
    /// Nothing: the plain client.
    Nothing,
}

struct Args {
    uri: Uri,
    rate: u32,
    seconds: u32,
    through: Through,
}

fn parse_args(args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut uri = None;
    let mut rate = None;
    let mut seconds = None;
    let mut through = Through::Paced;
    let mut args = args;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--rate" => rate = Some(number(&mut args, "--rate", 100_000)?),
            "--seconds" => seconds = Some(number(&mut args, "--seconds", 3600)?),
            "--no-pace" if through == Through::Nothing => return Err(EXCLUSIVE.to_owned()),
            "--no-layer" if through == Through::Layer => return Err(EXCLUSIVE.to_owned()),
            "--no-pace" => through = Through::Layer,
            "--no-layer" => through = Through::Nothing,
            "-h" | "--help" => return Err(String::new()),
            other if other.starts_with('-') => return Err(format!("unknown option {other}")),
            other if uri.is_none() => {
                let parsed: Uri = other
                    .parse()
                    .map_err(|error| format!("bad URL {other:?}: {error}"))?;
                if parsed.scheme_str() != Some("http") || parsed.host().is_none() {
                    return Err(format!(
                        "bad URL {other:?}: expected http://HOST[:PORT]/PATH"
                    ));
                }
                uri = Some(parsed);
            }
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    Ok(Args {
        uri: uri.ok_or("missing URL")?,
        rate: rate.ok_or("missing --rate N")?,
        seconds: seconds.ok_or("missing --seconds S")?,
        through,
    })
}

fn number(args: &mut impl Iterator<Item = String>, name: &str, max: u32) -> Result<u32, String> {
    let value = args.next().ok_or(format!("{name} needs a value"))?;
    match value.parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "{name} {value:?}: expected a whole number from 1 to {max}"
        )),
    }
}

/// What the requests came to.
#[derive(Default)]
struct Counts {
    sent: AtomicU64,
    ok: AtomicU64,
    limited: AtomicU64,
    failed_fast: AtomicU64,
    errors: AtomicU64,
}

impl Counts {
    fn count<E: std::fmt::Display>(
        &self,
        answer: Result<Response<hyper::body::Incoming>, ClientError<E>>,
    ) {
        let counter = match &answer {
            Err(ClientError::Held(_)) => &self.failed_fast,
            Err(error) => {
                self.sent.fetch_add(1, Ordering::Relaxed);
                if self.errors.fetch_add(1, Ordering::Relaxed) == 0 {
                    eprintln!("request failed: {error}");
                }
                return;
            }
            Ok(response) => {
                self.sent.fetch_add(1, Ordering::Relaxed);
                if response.status().is_success() {
                    &self.ok
                } else if response.status() == StatusCode::TOO_MANY_REQUESTS {
                    &self.limited
                } else {
                    return;
                }
            }
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The JSON line, its fields in this order.
#[derive(serde::Serialize)]
struct Report {
    sent: u64,
    ok: u64,
    limited: u64,
    failed_fast: u64,
    waited_ms: u64,
}

/// Sends `rate` requests a second for `seconds` seconds through `service`, one task each.
async fn run<S, E>(service: S, args: &Args) -> Arc<Counts>
where
    S: Service<
            Request<Empty<Bytes>>,
            Response = Response<hyper::body::Incoming>,
            Error = ClientError<E>,
        > + Clone
        + Send
        + 'static,
    S::Future: Send,
    E: std::fmt::Display + Send + 'static,
{
    let counts = Arc::new(Counts::default());
    let total = u64::from(args.rate) * u64::from(args.seconds);
    let mut ticks = tokio::time::interval(Duration::from_secs(1) / args.rate);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut tasks = JoinSet::new();
    for _ in 0..total {
        ticks.tick().await;
        let request = Request::get(args.uri.clone()).body(Empty::new());
        let Ok(request) = request else {
            // The URL was checked when parsed; a GET with an empty body cannot fail.
            continue;
        };
        let service = service.clone();
        let counts = counts.clone();
        tasks.spawn(async move {
            let answer = service.oneshot(request).await;
            counts.count(answer);
        });
        // Reap finished tasks as we go, so that a long run does not keep them all.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    counts
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("error: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    // Fail fast: a request the server would refuse is not sent, and not waited for.
    let counts = match args.through {
        Through::Paced => run(RateLimitClientLayer::new().pace().layer(client), &args).await,
        Through::Layer => run(RateLimitClientLayer::new().layer(client), &args).await,
        // The same counting, with the plain client's errors in the same shape.
        Through::Nothing => run(client.map_err(ClientError::Service), &args).await,
    };
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    let errors = load(&counts.errors);
    if errors > 0 {
        eprintln!("{errors} requests failed without an answer");
    }
    let report = Report {
        sent: load(&counts.sent),
        ok: load(&counts.ok),
        limited: load(&counts.limited),
        failed_fast: load(&counts.failed_fast),
        waited_ms: 0,
    };
    match serde_json::to_string(&report) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
