//! The demo server (`examples/server.rs`) as a process of its own, for the tests that need a
//! server they can kill or measure from outside.
//!
//! `cargo test` builds the examples; `cargo test --test <name>` does not: build the demo
//! first (`cargo build --example server`, with the same features).

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// The demo server, a process of its own; killed when dropped.
pub struct DemoServer {
    child: Child,
    pub addr: SocketAddr,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl DemoServer {
    /// Starts `examples/server` with `rules` on a free loopback port, its state in memory,
    /// and waits until it answers.
    pub fn start(rules: &str) -> DemoServer {
        DemoServer::start_with(rules, &[])
    }

    /// As [`DemoServer::start`], with the environment variables `env` (e.g.
    /// `TOLLGATE_REDIS_URL`).
    pub fn start_with(rules: &str, env: &[(&str, &str)]) -> DemoServer {
        let binary = demo_binary();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let rules_path = dir.path().join("rules.yaml");
        std::fs::write(&rules_path, rules).expect("the rules file");
        let log = dir.path().join("server.log");
        let out = std::fs::File::create(&log).expect("the server's log");
        let addr = SocketAddr::from(([127, 0, 0, 1], super::ports::free_port()));
        let child = Command::new(&binary)
            .env("TOLLGATE_RULES", &rules_path)
            .env("TOLLGATE_LISTEN", addr.to_string())
            .env_remove("TOLLGATE_REDIS_URL")
            .env_remove("TOLLGATE_REDIS_CLUSTER")
            .env_remove("TOLLGATE_REDIS_SENTINEL")
            .env_remove("TOLLGATE_REDIS_CA")
            .env_remove("TOLLGATE_REDIS_CERT")
            .env_remove("TOLLGATE_REDIS_KEY")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("the log, twice"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", binary.display()));
        let mut server = DemoServer {
            child,
            addr,
            log,
            _dir: dir,
        };
        server.wait_until_it_answers();
        server
    }

    fn wait_until_it_answers(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the demo server exited ({status}):\n{}", self.log());
            }
            if answers(self.addr) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the demo server did not answer on {} within 60 s:\n{}",
                self.addr,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Its resident memory (`VmRSS`), in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("/proc/<pid>/status of the demo server");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kib| kib.trim().parse().ok())
            .unwrap_or_else(|| panic!("no VmRSS in:\n{status}"))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl DemoServer {
    /// Kills the server (SIGKILL, as a crash would): it gives nothing back.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for DemoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `target/<profile>/examples/server`, next to the `deps` directory this test runs from.
fn demo_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test runs from target/<profile>/deps");
    let binary = profile.join("examples").join("server");
    assert!(
        binary.is_file(),
        "{} is missing: run `cargo build --example server` first (with the same \
         CARGO_TARGET_DIR and profile; `cargo test --test <name>` builds no examples)",
        binary.display()
    );
    // `cargo test` rebuilds this test when the library changes, but not the demo.
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let sources = Path::new(env!("CARGO_MANIFEST_DIR"));
    let newest = newest_modified(&sources.join("src"))
        .into_iter()
        .chain(modified(&sources.join("examples/server.rs")))
        .max();
    if let (Some(demo), Some(source)) = (modified(&binary), newest) {
        if demo < source {
            println!(
                "note: {} is older than the sources: run `cargo build --example server` to \
                 test the current library",
                binary.display()
            );
        }
    }
    binary
}

/// The latest modification time of a file under `dir`.
fn newest_modified(dir: &Path) -> Option<SystemTime> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let metadata = entry.metadata().ok()?;
            if metadata.is_dir() {
                newest_modified(&entry.path())
            } else {
                metadata.modified().ok()
            }
        })
        .max()
}

/// Whether an HTTP request to `addr` gets an answer (any status).
fn answers(addr: SocketAddr) -> bool {
    use std::io::Read;
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request = format!("GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 ")
}
