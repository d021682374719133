//! What a simulation shows: a table per replay (or JSON), the requests that change verdict
//! between two rules files, and the figures to plot.

use super::plot::{Panel, Plot};
use super::replay::{LimitFigures, Outcome, Replay, Replayed};
use super::traffic::TraceRequest;
use crate::describe;
use crate::table::Table;
use serde::Serialize;
use std::collections::BTreeMap;
use tollgate::algorithm::Algorithm;
use tollgate::rules::{Limit, Rules};

/// How many requests that change verdict are shown as examples, per limit.
const EXAMPLES: usize = 3;
/// The longest traffic `--plot` draws, in seconds: a week, in at most ~900 bars.
const MOST_PLOTTED_SECONDS: usize = 7 * 86_400;

/// One replay of the traffic: the rules as written, or under one algorithm.
pub(crate) struct Run {
    label: String,
    algorithm: Option<Algorithm>,
    pub(crate) replay: Replay,
}

impl Run {
    /// A replay of `rules`, named `label`; `algorithm` when every limit was set to it.
    pub(crate) fn new(label: String, algorithm: Option<Algorithm>, rules: Rules) -> Self {
        Run {
            label,
            algorithm,
            replay: Replay::new(rules),
        }
    }
}

/// A request whose verdict differs under the other rules.
pub(crate) struct Change {
    ordinal: u64,
    request: RequestSummary,
    ours: Replayed,
    theirs: Replayed,
}

impl Change {
    pub(crate) fn new(
        ordinal: u64,
        request: &TraceRequest,
        ours: &Replayed,
        theirs: &Replayed,
    ) -> Self {
        Change {
            ordinal,
            request: RequestSummary::of(request),
            ours: ours.clone(),
            theirs: theirs.clone(),
        }
    }

    /// The limit the change is counted under: the one that refused, in either replay (ours
    /// first), else the one either verdict names.
    fn limit(&self) -> String {
        let refused = |verdict: &Replayed| {
            (verdict.outcome == Outcome::Denied)
                .then(|| verdict.limit.clone())
                .flatten()
        };
        refused(&self.ours)
            .or_else(|| refused(&self.theirs))
            .or_else(|| self.ours.limit.clone())
            .or_else(|| self.theirs.limit.clone())
            .map_or_else(|| "(no limit)".to_owned(), |label| label.to_string())
    }

    /// `admitted → denied`, and so on.
    fn kind(&self) -> String {
        format!(
            "{} → {}",
            self.ours.outcome.name(),
            self.theirs.outcome.name()
        )
    }
}

/// What is shown of a request: when, what, from whom.
#[derive(Debug, Clone, Serialize)]
struct RequestSummary {
    at: String,
    method: String,
    target: String,
    ip: String,
}

impl RequestSummary {
    fn of(request: &TraceRequest) -> Self {
        RequestSummary {
            at: rfc3339(request.at),
            method: request.method.to_string(),
            target: request.target.clone(),
            ip: request.ip.to_string(),
        }
    }
}

impl std::fmt::Display for RequestSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let RequestSummary {
            at,
            method,
            target,
            ip,
        } = self;
        write!(f, "{at} {method} {target} from {ip}")
    }
}

/// One request's verdict, for `--verbose`.
#[derive(Debug, Serialize)]
struct RequestLine {
    request: u64,
    #[serde(flatten)]
    summary: RequestSummary,
    verdict: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    delay_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<String>,
}

/// Everything the traffic came to, gathered as it is replayed.
pub(crate) struct Report {
    /// What the traffic is: a trace and its format, or a synthetic pattern.
    traffic: String,
    top: usize,
    verbose: bool,
    requests: u64,
    skipped: u64,
    first: Option<u64>,
    last: Option<u64>,
    lines: Vec<RequestLine>,
    /// Per limit label: changes counted by kind, and the first few as examples.
    changes: BTreeMap<String, Changes>,
    changed: u64,
}

/// The changes counted under one limit.
#[derive(Default)]
struct Changes {
    by_kind: BTreeMap<String, u64>,
    examples: Vec<Change>,
}

impl Report {
    /// A report on `traffic`, with each limit's `top` most denied keys, and every request's
    /// verdict if `verbose`.
    pub(crate) fn new(traffic: String, top: usize, verbose: bool) -> Self {
        Report {
            traffic,
            top,
            verbose,
            requests: 0,
            skipped: 0,
            first: None,
            last: None,
            lines: Vec::new(),
            changes: BTreeMap::new(),
            changed: 0,
        }
    }

    /// A trace line that could not be read was skipped.
    pub(crate) fn skipped(&mut self) {
        self.skipped += 1;
    }

    /// The `ordinal`th request of the traffic, and its verdict under the rules as written.
    pub(crate) fn request(&mut self, ordinal: u64, request: &TraceRequest, verdict: &Replayed) {
        self.requests += 1;
        self.first.get_or_insert(request.at);
        self.last = Some(request.at);
        if self.verbose {
            let delay_ms = match verdict.outcome {
                Outcome::Delayed(delay) => Some(delay.as_secs_f64() * 1000.0),
                _ => None,
            };
            self.lines.push(RequestLine {
                request: ordinal,
                summary: RequestSummary::of(request),
                verdict: verdict.outcome.name(),
                delay_ms,
                limit: verdict.limit.as_deref().map(str::to_owned),
            });
        }
    }

    /// A request changed verdict under the other rules.
    pub(crate) fn change(&mut self, change: Change) {
        self.changed += 1;
        let changes = self.changes.entry(change.limit()).or_default();
        *changes.by_kind.entry(change.kind()).or_default() += 1;
        if changes.examples.len() < EXAMPLES {
            changes.examples.push(change);
        }
    }

    /// The report as text: the traffic, a table per replay, the most denied keys, and the
    /// changes against other rules.
    pub(crate) fn text(&self, runs: &[Run], against: Option<&(String, Replay)>) -> String {
        let mut out = String::new();
        out.push_str(&self.traffic_line());
        if let Some(run) = runs.first() {
            out.push_str(&format!(
                "no limit applied to {} request(s)\n",
                run.replay.unlimited()
            ));
        }
        let mut table = Table::new([
            "LIMIT",
            "ALGORITHM",
            "QUOTA",
            "SEEN",
            "ADMITTED",
            "DENIED",
            "DELAYED",
            "DELAY P50",
            "DELAY P99",
            "KEYS",
        ]);
        let comparing = runs.len() > 1;
        for (limit, rows) in self.rows(runs) {
            for (run, figures) in rows {
                let summary = Summary::of(figures);
                let spec = &run.replay.rules().limits()[limit];
                let mut algorithm = describe::algorithm(spec).to_owned();
                if comparing && run.algorithm.is_none() {
                    algorithm.push_str(" (as written)");
                }
                table.row([
                    spec.label().to_owned(),
                    algorithm,
                    describe::quota(spec),
                    summary.seen.to_string(),
                    summary.admitted.to_string(),
                    summary.denied.to_string(),
                    summary.delayed.to_string(),
                    millis(summary.delay_p50_ms),
                    millis(summary.delay_p99_ms),
                    summary.keys.to_string(),
                ]);
            }
        }
        out.push('\n');
        out.push_str(&table.to_string());
        if let Some(run) = runs.first() {
            out.push_str(&self.top_denied_text(run));
        }
        if let Some((path, other)) = against {
            out.push_str(&self.changes_text(path, other));
        }
        if self.verbose {
            out.push_str("\nEvery request (as written):\n");
            for line in &self.lines {
                let mut text = format!("#{} {}: {}", line.request, line.summary, line.verdict);
                if let Some(delay) = line.delay_ms {
                    text.push_str(&format!(" {delay:.3} ms"));
                }
                if let Some(limit) = &line.limit {
                    text.push_str(&format!(" ({limit})"));
                }
                out.push_str(&text);
                out.push('\n');
            }
        }
        out
    }

    /// The first line: how much traffic, over how long.
    fn traffic_line(&self) -> String {
        let span = match (self.first, self.last) {
            (Some(first), Some(last)) => format!(
                " from {} to {} ({:.3} s)",
                rfc3339(first),
                rfc3339(last),
                (last - first) as f64 / 1e9
            ),
            _ => String::new(),
        };
        let skipped = match self.skipped {
            0 => String::new(),
            n => format!("; {n} unreadable line(s) skipped"),
        };
        format!(
            "{} request(s){span}{skipped}\ntraffic: {}\n",
            self.requests, self.traffic
        )
    }

    /// Each limit's figures in every run, limit by limit: (limit index, [(run, figures)]).
    fn rows<'r>(&self, runs: &'r [Run]) -> Vec<(usize, Vec<(&'r Run, &'r LimitFigures)>)> {
        let limits = runs.first().map_or(0, |run| run.replay.figures().len());
        (0..limits)
            .map(|limit| {
                let rows = runs
                    .iter()
                    .map(|run| (run, &run.replay.figures()[limit]))
                    .collect();
                (limit, rows)
            })
            .collect()
    }

    /// Each limit's most denied keys under the rules as written.
    fn top_denied_text(&self, run: &Run) -> String {
        let mut table = Table::new(["LIMIT", "STATE KEY", "REQUESTS", "DENIED"]);
        let mut any = false;
        for (limit, figures) in run.replay.rules().limits().iter().zip(run.replay.figures()) {
            for (key, keyed) in top_denied(figures, self.top) {
                any = true;
                table.row([
                    limit.label().to_owned(),
                    key.to_owned(),
                    keyed.requests.to_string(),
                    keyed.denied.to_string(),
                ]);
            }
        }
        if !any {
            return String::new();
        }
        format!("\nMost denied keys:\n{table}")
    }

    /// The requests that change verdict under the other rules.
    fn changes_text(&self, path: &str, other: &Replay) -> String {
        let share = percent(self.changed, self.requests);
        let mut out = format!(
            "\nAgainst {path} ({} limit(s)): {} of {} request(s) change verdict ({share})\n",
            other.rules().limits().len(),
            self.changed,
            self.requests
        );
        if self.changes.is_empty() {
            return out;
        }
        let mut table = Table::new(["LIMIT", "CHANGE", "REQUESTS"]);
        for (limit, changes) in &self.changes {
            for (kind, count) in &changes.by_kind {
                table.row([limit.clone(), kind.clone(), count.to_string()]);
            }
        }
        out.push_str(&table.to_string());
        out.push_str("\nExamples:\n");
        for (limit, changes) in &self.changes {
            for change in &changes.examples {
                out.push_str(&format!(
                    "  {limit}: #{} {}: {}\n",
                    change.ordinal,
                    change.request,
                    change.kind()
                ));
            }
        }
        out
    }

    /// The report as JSON, with the same figures as [`text`](Self::text).
    pub(crate) fn json(&self, runs: &[Run], against: Option<&(String, Replay)>) -> String {
        let limits = self
            .rows(runs)
            .into_iter()
            .flat_map(|(limit, rows)| {
                rows.into_iter().map(move |(run, figures)| {
                    let spec = &run.replay.rules().limits()[limit];
                    JsonLimit {
                        limit: spec.label().to_owned(),
                        rules: run.label.clone(),
                        algorithm: describe::algorithm(spec),
                        quota: describe::quota(spec),
                        figures: Summary::of(figures),
                        top_denied: top_denied(figures, self.top)
                            .into_iter()
                            .map(|(key, keyed)| JsonKey {
                                key: key.to_owned(),
                                requests: keyed.requests,
                                denied: keyed.denied,
                            })
                            .collect(),
                    }
                })
            })
            .collect();
        let against = against.map(|(path, other)| JsonAgainst {
            rules: path.clone(),
            changed: self.changed,
            limits: self
                .changes
                .iter()
                .map(|(limit, changes)| JsonChanges {
                    limit: limit.clone(),
                    changes: changes.by_kind.clone(),
                    examples: changes
                        .examples
                        .iter()
                        .map(|change| JsonExample {
                            request: change.ordinal,
                            summary: change.request.clone(),
                            change: change.kind(),
                        })
                        .collect(),
                })
                .collect(),
            limit_count: other.rules().limits().len(),
        });
        let report = JsonReport {
            traffic: &self.traffic,
            requests: self.requests,
            skipped: self.skipped,
            first: self.first.map(rfc3339),
            last: self.last.map(rfc3339),
            unlimited: runs.first().map_or(0, |run| run.replay.unlimited()),
            limits,
            against,
            every_request: self.verbose.then_some(&self.lines),
        };
        let mut text = serde_json::to_string_pretty(&report).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Admitted, denied and delayed per second: a panel per limit of each run, then per
    /// limit of the other rules.
    pub(crate) fn plot(
        &self,
        runs: &[Run],
        against: Option<&(String, Replay)>,
    ) -> Result<Plot, String> {
        let (Some(first), Some(last)) = (self.first, self.last) else {
            return Err("no request to plot".to_owned());
        };
        let seconds =
            usize::try_from(last / 1_000_000_000 - first / 1_000_000_000 + 1).unwrap_or(usize::MAX);
        if seconds > MOST_PLOTTED_SECONDS {
            return Err(format!(
                "--plot draws at most 7 days of traffic; this trace spans {seconds} s"
            ));
        }
        let comparing = runs.len() > 1;
        let mut panels = Vec::new();
        for (limit, rows) in self.rows(runs) {
            for (run, figures) in rows {
                let spec = &run.replay.rules().limits()[limit];
                let written = if comparing && run.algorithm.is_none() {
                    ", as written"
                } else {
                    ""
                };
                panels.push(panel(spec, figures, seconds, written));
            }
        }
        if let Some((path, other)) = against {
            let limits = other.rules().limits().iter().zip(other.figures());
            for (spec, figures) in limits {
                panels.push(panel(spec, figures, seconds, &format!(", {path}")));
            }
        }
        Ok(Plot {
            title: format!("{} request(s)", self.requests),
            start: first / 1_000_000_000,
            panels,
        })
    }
}

/// The panel of limit `spec`'s `figures` over `seconds`, its title ending with `note`.
fn panel(spec: &Limit, figures: &LimitFigures, seconds: usize, note: &str) -> Panel {
    let column = |i: usize| -> Vec<u64> {
        let mut values = vec![0; seconds];
        for (&second, counts) in &figures.per_second {
            if let Some(value) = usize::try_from(second).ok().and_then(|s| values.get_mut(s)) {
                *value = counts[i];
            }
        }
        values
    };
    Panel {
        title: format!(
            "{} ({}, {}{note})",
            spec.label(),
            describe::algorithm(spec),
            describe::quota(spec)
        ),
        admitted: column(0),
        denied: column(1),
        delayed: column(2),
    }
}

/// A limit's figures, as shown.
#[derive(Debug, Serialize)]
struct Summary {
    seen: u64,
    admitted: u64,
    denied: u64,
    delayed: u64,
    delay_p50_ms: Option<f64>,
    delay_p99_ms: Option<f64>,
    keys: usize,
}

impl Summary {
    fn of(figures: &LimitFigures) -> Self {
        let mut delays = figures.delays.clone();
        delays.sort_unstable();
        Summary {
            seen: figures.seen,
            admitted: figures.admitted,
            denied: figures.denied,
            delayed: figures.delayed,
            delay_p50_ms: percentile(&delays, 50),
            delay_p99_ms: percentile(&delays, 99),
            keys: figures.keys.len(),
        }
    }
}

/// The `p`th percentile (nearest rank) of sorted nanoseconds, in milliseconds.
fn percentile(sorted: &[u64], p: usize) -> Option<f64> {
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted.get(rank - 1).map(|&nanos| nanos as f64 / 1e6)
}

/// The `top` keys with the most denials (ties by key), those with any.
fn top_denied(figures: &LimitFigures, top: usize) -> Vec<(&str, super::replay::KeyFigures)> {
    let mut keys: Vec<_> = figures
        .keys
        .iter()
        .filter(|(_, keyed)| keyed.denied > 0)
        .map(|(key, keyed)| (key.as_str(), *keyed))
        .collect();
    keys.sort_by(|(a, x), (b, y)| y.denied.cmp(&x.denied).then(a.cmp(b)));
    keys.truncate(top);
    keys
}

fn millis(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |ms| format!("{ms:.1} ms"))
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "0 %".to_owned();
    }
    format!("{:.2} %", part as f64 * 100.0 / whole as f64)
}

/// Nanoseconds since the epoch as RFC 3339 in UTC, to the millisecond.
fn rfc3339(nanos: u64) -> String {
    let seconds = i64::try_from(nanos / 1_000_000_000).unwrap_or(i64::MAX);
    let millis = (nanos % 1_000_000_000) / 1_000_000;
    let time = jiff::Timestamp::from_second(seconds).unwrap_or(jiff::Timestamp::MAX);
    format!("{}.{millis:03}Z", time.strftime("%Y-%m-%dT%H:%M:%S"))
}

#[derive(Serialize)]
struct JsonReport<'a> {
    traffic: &'a str,
    requests: u64,
    skipped: u64,
    first: Option<String>,
    last: Option<String>,
    unlimited: u64,
    limits: Vec<JsonLimit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    against: Option<JsonAgainst>,
    #[serde(skip_serializing_if = "Option::is_none")]
    every_request: Option<&'a Vec<RequestLine>>,
}

#[derive(Serialize)]
struct JsonLimit {
    limit: String,
    rules: String,
    algorithm: &'static str,
    quota: String,
    #[serde(flatten)]
    figures: Summary,
    top_denied: Vec<JsonKey>,
}

#[derive(Serialize)]
struct JsonKey {
    key: String,
    requests: u64,
    denied: u64,
}

#[derive(Serialize)]
struct JsonAgainst {
    rules: String,
    limit_count: usize,
    changed: u64,
    limits: Vec<JsonChanges>,
}

#[derive(Serialize)]
struct JsonChanges {
    limit: String,
    changes: BTreeMap<String, u64>,
    examples: Vec<JsonExample>,
}

#[derive(Serialize)]
struct JsonExample {
    request: u64,
    #[serde(flatten)]
    summary: RequestSummary,
    change: String,
}
