//! What the `tollgate` command's tests (and benches) share: files to hand it, and the
//! binary run as a user runs it, once or as a `tollgate serve` process.
#![allow(dead_code)] // Each test file uses its own part.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tempfile::NamedTempFile;

/// A temporary file holding `text`, named with `suffix` (e.g. `.yaml`); removed when dropped.
pub fn temp_file(text: &str, suffix: &str) -> NamedTempFile {
    let mut file = tempfile::Builder::new()
        .prefix("tollgate-cli-")
        .suffix(suffix)
        .tempfile()
        .expect("a writable temporary directory");
    file.write_all(text.as_bytes())
        .expect("the file is written");
    file
}

/// The path of `file`, as an argument.
pub fn path(file: &NamedTempFile) -> &str {
    file.path().to_str().expect("a UTF-8 temporary path")
}

/// Runs the binary with `args`: its exit code, standard output and standard error.
pub fn tollgate(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(args)
        .output()
        .expect("the tollgate binary runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A `tollgate serve` process on free loopback ports, killed when dropped.
pub struct Served {
    child: Child,
    /// Its gRPC address.
    pub grpc: String,
    /// Its HTTP address.
    pub http: String,
    /// Its admin address, when started with `--admin`.
    pub admin: Option<String>,
}

impl Served {
    /// Starts `tollgate serve` on the rules at `rules` with `extra` arguments, and waits
    /// until it is ready.
    pub fn start(rules: &Path, extra: &[&str]) -> Served {
        Served::spawn(rules, extra, |line| {
            line.starts_with("tollgate serve: domain ")
        })
    }

    /// Starts `tollgate serve` like [`Served::start`], but waits only until it listens: it
    /// may not be ready yet.
    pub fn start_listening(rules: &Path, extra: &[&str]) -> Served {
        Served::spawn(rules, extra, |_| true)
    }

    /// Starts `tollgate serve`, and reads its output until a line saying where it listens
    /// for which `until` holds.
    fn spawn(rules: &Path, extra: &[&str], until: fn(&str) -> bool) -> Served {
        let rules = rules.to_str().expect("a UTF-8 path");
        let ports = ["--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"];
        let args = [&["serve", "--rules", rules][..], &ports, extra].concat();
        let mut command = Command::new(env!("CARGO_BIN_EXE_tollgate"));
        command.args(args);
        Served::spawn_command(command, until)
    }

    /// Runs `command`, a `tollgate serve`, and reads its output until a line saying where
    /// it listens for which `until` holds.
    fn spawn_command(mut command: Command, until: fn(&str) -> bool) -> Served {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the tollgate binary runs");
        let stdout = child.stdout.take().expect("its standard output");
        let mut lines = BufReader::new(stdout).lines();
        // It says where it listens once its listeners are bound, and again once ready:
        // `gRPC on A and HTTP on B`, or `gRPC on A, HTTP on B and admin on C`.
        let (grpc, http, admin) = loop {
            let Some(Ok(line)) = lines.next() else {
                panic!("tollgate serve stopped before it listened");
            };
            let after = |marker: &str| {
                let (_, rest) = line.split_once(marker)?;
                let addr = rest.split_whitespace().next()?;
                Some(addr.trim_end_matches(',').to_owned())
            };
            if let (Some(grpc), Some(http)) = (after("gRPC on "), after("HTTP on ")) {
                if until(&line) {
                    break (grpc, http, after("admin on "));
                }
            }
        };
        // Keep reading its output, so that it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Served {
            child,
            grpc,
            http,
            admin,
        }
    }

    /// Sends it SIGTERM, and waits (at most `deadline`) until it exits: its exit status.
    ///
    /// # Panics
    ///
    /// When it is still running after `deadline`.
    pub fn terminate(&mut self, deadline: Duration) -> ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -TERM {pid}");
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("its status") {
                return status;
            }
            assert!(
                started.elapsed() < deadline,
                "tollgate serve still runs {deadline:?} after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 exchange with `addr`: the status and the body.
pub fn http_call(addr: &str, request_line: &str, body: &str) -> (u16, String) {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(addr).expect("connected");
    let request = format!(
        "{request_line}\r\nhost: {addr}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("sent");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("an answer");
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, body)| body)
        .to_owned();
    (status, body)
}

impl Served {
    /// Starts `tollgate serve` configured as envoyproxy/ratelimit is, from `env` alone (no
    /// `--rules`), with `extra` arguments, and waits until it is ready.
    pub fn start_from_env(env: &[(&str, &str)], extra: &[&str]) -> Served {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tollgate"));
        command.arg("serve").args(extra).envs(env.iter().copied());
        Served::spawn_command(command, |line| line.starts_with("tollgate serve: domain "))
    }
}
