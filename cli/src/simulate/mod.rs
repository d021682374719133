//! `tollgate simulate`: replays traffic through the real limiter on a manual clock, and
//! shows what each limit made of it.
//!
//! The traffic comes from a trace file ([`trace`]) or a synthetic pattern ([`synthetic`]).
//! Each request goes through [`Limiter::check_request`](tollgate::Limiter::check_request),
//! the layer's own way in, at its instant: an hour of traffic replays in seconds. Several
//! replays run side by side over one pass of the traffic: the rules as written, each
//! algorithm (`--compare-algorithms`), and other rules (`--against`).

mod plot;
mod replay;
mod report;
mod synthetic;
mod trace;
mod traffic;

use clap::Args;
use replay::Replay;
use report::{Change, Report, Run};
use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use synthetic::{Pattern, Requests, Synthetic};
use tollgate::algorithm::Algorithm;
use tollgate::rules::Rules;
use trace::{Format, TraceError, TraceReader};
use traffic::TraceRequest;

/// Bad input: rules, a trace, or a file that cannot be written.
const FAILED: u8 = 1;
/// A mistake on the command line (as clap's own).
const USAGE: u8 = 2;

/// Where synthetic traffic starts: a fixed instant, so that runs repeat.
const SYNTHETIC_START: u64 = 1_798_761_600 * 1_000_000_000; // 2027-01-01T00:00:00Z

/// The traffic, the comparisons and the output of `tollgate simulate`.
#[derive(Debug, Args)]
pub(crate) struct SimulateArgs {
    /// A trace: nginx/Apache combined log lines, JSON lines or CSV (see --format).
    #[arg(long, value_name = "FILE", conflicts_with = "synthetic")]
    trace: Option<PathBuf>,
    /// The trace's format: combined, jsonl or csv; detected from its first line if not given.
    #[arg(long, requires = "trace")]
    format: Option<Format>,
    /// Stop at the first line that cannot be read, instead of reporting and skipping it.
    #[arg(long, requires = "trace")]
    strict: bool,
    /// Generated traffic instead of a trace: steady, burst, ramp, spikes or zipf.
    #[arg(long, value_name = "PATTERN", required_unless_present = "trace")]
    synthetic: Option<Pattern>,
    /// Synthetic traffic: mean requests a second.
    #[arg(long, default_value_t = 100.0, requires = "synthetic")]
    rate: f64,
    /// Synthetic traffic: how long, in seconds.
    #[arg(long, default_value_t = 60, requires = "synthetic")]
    seconds: u64,
    /// Synthetic traffic: how many clients (addresses 10.0.0.1, 10.0.0.2, ...).
    #[arg(long, default_value_t = 1, requires = "synthetic")]
    clients: u32,
    /// Synthetic traffic: the period of `burst` and `spikes`, in seconds.
    #[arg(long, default_value_t = 10, requires = "synthetic")]
    period: u64,
    /// Synthetic traffic: the exponent of `zipf`.
    #[arg(long, default_value_t = 1.0, requires = "synthetic")]
    exponent: f64,
    /// Synthetic traffic: the seed; the same seed gives the same traffic.
    #[arg(long, default_value_t = 1, requires = "synthetic")]
    seed: u64,
    /// Synthetic traffic: the method and path every request asks for.
    #[arg(long, default_value = "GET", requires = "synthetic")]
    method: http::Method,
    /// Synthetic traffic: the path (and query) every request asks for.
    #[arg(long, default_value = "/", requires = "synthetic")]
    path: String,
    /// Also replay the traffic under each algorithm, every limit keeping its quota.
    #[arg(long)]
    compare_algorithms: bool,
    /// Also replay the traffic under these rules, and show which requests change verdict.
    #[arg(long, value_name = "OTHER_RULES")]
    against: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Also show every request's verdict.
    #[arg(long)]
    verbose: bool,
    /// Draw admitted, denied and delayed requests per second for each limit: .svg, .png or .html.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// How many of each limit's most denied keys to show.
    #[arg(long, default_value_t = 5)]
    top: usize,
}

/// Runs `tollgate simulate` on the rules in `file`.
pub(crate) fn run(file: &Path, rules: Rules, args: &SimulateArgs) -> ExitCode {
    let usage = check_usage(args);
    match usage.and_then(|()| simulate(file, rules, args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, message)) => {
            eprintln!("error: {message}");
            ExitCode::from(code)
        }
    }
}

/// What is wrong with the command line, before any traffic is read: a plot format, or
/// synthetic traffic's settings.
fn check_usage(args: &SimulateArgs) -> Result<(), (u8, String)> {
    let usage = |message: String| (USAGE, message);
    if let Some(path) = &args.plot {
        plot::PlotFormat::from_path(path).map_err(usage)?;
    }
    if args.synthetic.is_none() {
        return Ok(());
    }
    let target = args.path.parse::<http::uri::PathAndQuery>();
    if !args.path.starts_with('/') || target.is_err() {
        let message = format!(
            "--path {:?}: expected a path such as /api/items?q=1",
            args.path
        );
        return Err(usage(message));
    }
    if let Source::Synthetic(synthetic) = synthetic_source(args) {
        synthetic.validate().map_err(usage)?;
    }
    Ok(())
}

fn simulate(file: &Path, rules: Rules, args: &SimulateArgs) -> Result<(), (u8, String)> {
    replay(file, rules, args).map_err(|message| (FAILED, message))
}

/// Replays the traffic and writes the report (and the plot).
fn replay(file: &Path, rules: Rules, args: &SimulateArgs) -> Result<(), String> {
    let plot_format = args
        .plot
        .as_deref()
        .map(plot::PlotFormat::from_path)
        .transpose()?;
    let other = match &args.against {
        Some(path) => Some((path.clone(), load_other(path)?)),
        None => None,
    };
    let mut runs = vec![Run::new(file.display().to_string(), None, rules.clone())];
    if args.compare_algorithms {
        for algorithm in Algorithm::ALL {
            match rules.with_algorithm(algorithm) {
                Ok(compared) => {
                    let label = format!("{} as {}", file.display(), algorithm.name());
                    runs.push(Run::new(label, Some(algorithm), compared));
                }
                Err(errors) => eprint!("not compared as {}:\n{errors}", algorithm.name()),
            }
        }
    }
    let mut against = other.map(|(path, rules)| (path, Replay::new(rules)));
    let mut source = source(args)?;
    let mut report = Report::new(source.describe(args), args.top, args.verbose);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|error| format!("cannot start: {error}"))?;
    runtime.block_on(async {
        let mut traffic = source.traffic();
        let mut ordinal = 0_u64;
        while let Some(request) = traffic.next_request(args.strict, &mut report)? {
            ordinal += 1;
            // The rules as written, then each algorithm in turn.
            let (written, compared) = runs.split_at_mut(1);
            let verdict = written[0]
                .replay
                .decide(&request)
                .await
                .map_err(no_address)?;
            for run in compared {
                run.replay.decide(&request).await.map_err(no_address)?;
            }
            if let Some((_, other)) = &mut against {
                let theirs = other.decide(&request).await.map_err(no_address)?;
                if theirs.outcome.name() != verdict.outcome.name() {
                    report.change(Change::new(ordinal, &request, &verdict, &theirs));
                }
            }
            report.request(ordinal, &request, &verdict);
        }
        Ok::<(), String>(())
    })?;
    let against = against.map(|(path, replay)| (path.display().to_string(), replay));
    let output = if args.json {
        report.json(&runs, against.as_ref())
    } else {
        report.text(&runs, against.as_ref())
    };
    std::io::stdout()
        .write_all(output.as_bytes())
        .map_err(|error| format!("cannot write the report: {error}"))?;
    if let (Some(path), Some(format)) = (&args.plot, plot_format) {
        let plot = report.plot(&runs, against.as_ref())?;
        let bytes = plot::render(&plot, format)?;
        std::fs::write(path, bytes)
            .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    }
    Ok(())
}

/// The rules to compare with, or every error in them.
fn load_other(path: &Path) -> Result<Rules, String> {
    Rules::from_file(path).map_err(|errors| format!("--against {}:\n{errors}", path.display()))
}

fn no_address(_: tollgate::source::MissingPeerAddr) -> String {
    "a request has no client address".to_owned()
}

/// Where the traffic comes from: a trace file, or a synthetic pattern.
enum Source {
    Trace(TraceReader<BufReader<File>>),
    Synthetic(Synthetic),
}

impl Source {
    /// What the traffic is, e.g. `trace access.log (combined)`.
    fn describe(&self, args: &SimulateArgs) -> String {
        match self {
            Source::Trace(reader) => {
                let path = args.trace.as_deref().unwrap_or(Path::new("-"));
                format!("trace {} ({})", path.display(), reader.format())
            }
            Source::Synthetic(synthetic) => format!(
                "synthetic {} at {}/s for {} s from {} client(s), seed {}",
                synthetic.pattern,
                synthetic.rate,
                synthetic.seconds,
                synthetic.clients,
                synthetic.seed
            ),
        }
    }

    /// The traffic, request by request.
    fn traffic(&mut self) -> Traffic<'_> {
        match self {
            Source::Trace(reader) => Traffic::Trace(reader),
            Source::Synthetic(synthetic) => Traffic::Synthetic(Box::new(synthetic.requests())),
        }
    }
}

/// The traffic being replayed.
enum Traffic<'s> {
    Trace(&'s mut TraceReader<BufReader<File>>),
    // Boxed: the generators' state is large, a trace reader's reference small.
    Synthetic(Box<Requests<'s>>),
}

fn source(args: &SimulateArgs) -> Result<Source, String> {
    if let Some(path) = &args.trace {
        let file = File::open(path)
            .map_err(|error| format!("cannot read the trace {}: {error}", path.display()))?;
        let reader = TraceReader::new(BufReader::new(file), args.format)
            .map_err(|error| format!("{}: {error}", path.display()))?;
        return Ok(Source::Trace(reader));
    }
    Ok(synthetic_source(args))
}

/// The synthetic traffic the arguments describe (unchecked); without a pattern (clap
/// requires a trace or a pattern), steady traffic by default.
fn synthetic_source(args: &SimulateArgs) -> Source {
    Source::Synthetic(Synthetic {
        pattern: args.synthetic.unwrap_or(Pattern::Steady),
        rate: args.rate,
        seconds: args.seconds,
        clients: args.clients,
        period: args.period,
        exponent: args.exponent,
        seed: args.seed,
        start: SYNTHETIC_START,
        target: args.path.clone(),
        method: args.method.clone(),
    })
}

impl Traffic<'_> {
    /// The next request; an unreadable line is reported on standard error and skipped,
    /// unless `strict`.
    fn next_request(
        &mut self,
        strict: bool,
        report: &mut Report,
    ) -> Result<Option<TraceRequest>, String> {
        let reader = match self {
            Traffic::Synthetic(requests) => return Ok(requests.next()),
            Traffic::Trace(reader) => reader,
        };
        loop {
            match reader.next() {
                None => return Ok(None),
                Some(Ok(request)) => return Ok(Some(request)),
                Some(Err(error @ TraceError::Unreadable { .. })) if !strict => {
                    eprintln!("{error} (skipped)");
                    report.skipped();
                }
                Some(Err(error)) => return Err(error.to_string()),
            }
        }
    }
}
