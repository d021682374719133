//! `tollgate`: checks a rules file, explains which limits apply to a request, and simulates
//! what the rules do to a trace of traffic.
//!
//! ```text
//! tollgate check rules.yaml
//! tollgate explain rules.yaml --method POST --path /auth/login --ip 203.0.113.9
//! tollgate simulate rules.yaml --trace access.log --plot what-happened.svg
//! ```
//!
//! Exit codes: 0 when the rules are valid, 1 when they are not (every error is printed with
//! its line and column) or a trace cannot be read, 2 for a mistake on the command line.
//!
//! From the repository root: `cargo install --path cli`, or
//! `cargo run -p tollgate-cli -- check rules.example.yaml`.

#![forbid(unsafe_code)]

mod describe;
mod request;
#[cfg(feature = "server")]
mod serve;
mod simulate;
mod table;

use clap::{Parser, Subcommand};
use http::{HeaderMap, Request};
use request::RequestArgs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use table::Table;
use tollgate::rules::{AppliedLimit, KeySources, Rules};
use tollgate::source::{MissingPeerAddr, PeerAddr};

/// Checks tollgate rate-limit rules, explains which limits apply to a request, and
/// simulates what they do to traffic.
#[derive(Debug, Parser)]
#[command(name = "tollgate", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validates a rules file and lists its limits.
    Check {
        /// The rules file (YAML).
        file: PathBuf,
        /// Check it for `tollgate serve`, where every descriptor value comes with each call,
        /// so that any key is accepted (an envoyproxy/ratelimit file as it is).
        #[arg(long)]
        service: bool,
    },
    /// Shows which limits apply to a request, with their state keys.
    Explain {
        /// The rules file (YAML).
        file: PathBuf,
        #[command(flatten)]
        request: Box<RequestArgs>,
    },
    /// Serves Envoy's rate limit service (gRPC `ShouldRateLimit`) from the rules.
    #[cfg(feature = "server")]
    Serve {
        #[command(flatten)]
        args: Box<serve::ServeArgs>,
    },
    /// Replays traffic (a trace, or a synthetic pattern) through the rules on a simulated
    /// clock, and shows what each limit admits, denies and delays.
    Simulate {
        /// The rules file (YAML).
        file: PathBuf,
        #[command(flatten)]
        args: Box<simulate::SimulateArgs>,
    },
}

/// The rules are invalid.
const INVALID_RULES: u8 = 1;
/// The command line is wrong (clap exits with the same code for its own errors).
const USAGE: u8 = 2;

/// Printed when a file that fails for the layer compiles for the service.
const SERVICE_HINT: &str = "hint: if the file is for `tollgate serve`, where descriptor values \
come with each call and any key is accepted, check it with `tollgate check --service`";

/// How `tollgate serve` reads a file, against envoyproxy/ratelimit.
const SERVICE_DIFFERENCES: &str = "\
As envoyproxy/ratelimit, the service applies the limit that a descriptor's last entry reaches,
and a limit without `algorithm` is a fixed window (unless `defaults` says otherwise). Unlike it:
  - a call over one limit charges none of the others (all or nothing);
  - a weight that does not fit is refused and counts nothing, unless its limit says
    `settle: { stream_done: true }` (a charge sent after the fact, Envoy's
    `apply_on_stream_done`: counted past the limit, as there);
  - a descriptor's own `limit` override is decided by `defaults.algorithm` when the file
    sets one (envoyproxy/ratelimit: a fixed window);
  - answers carry the rate-limit headers that `response` chooses (`response: { headers: none }`
    for none, as envoyproxy/ratelimit without LIMIT_RESPONSE_HEADERS_ENABLED);
  - `detailed_metric` and `value_to_metric` change nothing: tollgate's metrics are per limit.";

/// Printed for rules with the top-level `shadow_mode: true`.
const SHADOW_MODE: &str =
    "shadow_mode: true: every limit only counts and reports; nothing is denied or delayed";

fn main() -> ExitCode {
    // Each command that reads a rules file stops with its errors when it does not compile.
    match Cli::parse().command {
        Command::Check { file, service } => check_file(&file, service),
        Command::Explain { file, request } => {
            load(&file).map_or_else(|code| code, |rules| explain(&rules, &request))
        }
        Command::Simulate { file, args } => {
            load(&file).map_or_else(|code| code, |rules| simulate::run(&file, rules, &args))
        }
        #[cfg(feature = "server")]
        Command::Serve { args } => serve::run(&args),
    }
}

/// Checks the rules in `file` for the layer, or for `tollgate serve` when `service`.
fn check_file(file: &Path, service: bool) -> ExitCode {
    if !service {
        return match Rules::from_file(file) {
            Ok(rules) => check(file, &rules),
            Err(errors) => {
                eprint!("{errors}");
                if Rules::from_file_with(file, KeySources::Given).is_ok() {
                    eprintln!("{SERVICE_HINT}");
                }
                ExitCode::from(INVALID_RULES)
            }
        };
    }
    let rules = match Rules::from_file_with(file, KeySources::Given) {
        Ok(rules) => rules,
        Err(errors) => {
            eprint!("{errors}");
            return ExitCode::from(INVALID_RULES);
        }
    };
    let code = check(file, &rules);
    let keys: Vec<String> = rules.given_keys().map(|key| format!("`{key}`")).collect();
    if !keys.is_empty() {
        println!(
            "\nThe layer cannot read {}: declare {} under `sources` to use the file in an HTTP server.",
            keys.join(", "),
            if keys.len() == 1 { "it" } else { "them" },
        );
    }
    println!("\n{SERVICE_DIFFERENCES}");
    code
}

fn check(file: &Path, rules: &Rules) -> ExitCode {
    let count = rules.limits().len();
    println!(
        "{}: valid, domain `{}`, {count} limit(s)",
        file.display(),
        rules.domain()
    );
    if rules.shadow_mode() {
        println!("{SHADOW_MODE}");
    }
    println!();
    let mut table = Table::new([
        "NAME",
        "DESCRIPTOR",
        "ALGORITHM",
        "QUOTA",
        "SHADOW",
        "ON STORE ERROR",
        "SYNC EVERY",
        "APPROXIMATE",
        "REPLACES",
    ]);
    for limit in rules.limits() {
        table.row([
            limit.name().unwrap_or("-").to_owned(),
            limit.descriptor().to_owned(),
            describe::algorithm(limit).to_owned(),
            describe::quota(limit),
            describe::shadow(limit, rules.shadow_mode()).to_owned(),
            limit.on_store_error().name().to_owned(),
            describe::sync_every(limit),
            describe::approximate(limit),
            describe::list(limit.replaces()),
        ]);
    }
    print!("{table}");
    if rules
        .limits()
        .iter()
        .any(|limit| limit.approximate().is_some())
    {
        println!(
            "\nAPPROXIMATE: the sketch's memory, and by how much an estimate may exceed a client's true count (with probability 98 % for a fixed window, 95 % for a sliding window counter) at {} keys sending one request each a window",
            describe::BOUND_AT_KEYS_TEXT
        );
    }
    ExitCode::SUCCESS
}

fn explain(rules: &Rules, args: &RequestArgs) -> ExitCode {
    let request = match args.request() {
        Ok(request) => request,
        Err(message) => return usage_error(&message),
    };
    let explanation = match rules.explain(&request) {
        Ok(explanation) => explanation,
        Err(MissingPeerAddr) => {
            return usage_error(
                "the rules key on remote_address: give the client's address with --ip",
            )
        }
    };
    println!("request: {} {}", request.method(), request.uri());
    println!("client:  {}", client(rules, &request));
    if let Some(exemption) = explanation.exemption() {
        println!(
            "result:  exempt (unlimited): {} matches the unlimited entry `{}`; no limit applies",
            exemption.state_key(),
            exemption.limit().descriptor()
        );
        return ExitCode::SUCCESS;
    }
    match explanation.applied().len() {
        0 => println!("result:  no limit applies"),
        1 => println!("result:  1 limit applies"),
        count => println!("result:  {count} limits apply; the request must fit all of them"),
    }
    if rules.shadow_mode() {
        println!("{SHADOW_MODE}");
    }
    if !explanation.applied().is_empty() {
        println!();
        print!("{}", limits_table(explanation.applied()));
    }
    if !explanation.replaced().is_empty() {
        println!();
        println!("Matched but replaced by a limit above (`replaces`):");
        print!("{}", limits_table(explanation.replaced()));
    }
    ExitCode::SUCCESS
}

/// The client address the rules see, and how it was found.
fn client(rules: &Rules, request: &Request<()>) -> String {
    let Some(peer) = PeerAddr::from_extensions(request.extensions()) else {
        return "unknown (no --ip)".to_owned();
    };
    let resolver = rules.client_ip();
    let client = resolver.resolve(peer.ip(), request.headers());
    if client == resolver.resolve(peer.ip(), &HeaderMap::new()) {
        client.to_string()
    } else {
        format!("{client} (forwarded by the trusted proxy {})", peer.ip())
    }
}

/// The limits a request met, with its state key for each.
fn limits_table(limits: &[AppliedLimit<'_>]) -> Table<5> {
    let mut table = Table::new(["LIMIT", "STATE KEY", "ALGORITHM", "QUOTA", "NOTE"]);
    for applied in limits {
        let limit = applied.limit();
        let note = if limit.is_shadow() {
            "shadow: counted, never denies"
        } else {
            ""
        };
        table.row([
            limit.label().to_owned(),
            applied.state_key(),
            describe::algorithm(limit).to_owned(),
            describe::quota(limit),
            note.to_owned(),
        ]);
    }
    table
}

/// The rules in `file`, or the exit code after printing every error in it.
fn load(file: &Path) -> Result<Rules, ExitCode> {
    Rules::from_file(file).map_err(|errors| {
        eprint!("{errors}");
        ExitCode::from(INVALID_RULES)
    })
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(USAGE)
}
