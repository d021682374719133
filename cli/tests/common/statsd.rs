//! A statsd server for the tests of `tollgate serve`: a UDP socket on loopback that keeps
//! what it hears. Include it with `#[path = "common/statsd.rs"] mod statsd;`.
#![allow(dead_code)] // Each test file uses its own part.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

/// How long a test waits for a count to arrive.
const DEADLINE: Duration = Duration::from_secs(20);

/// Listens for statsd's lines (`name:value|c`), one datagram each or several.
pub struct StatsdServer {
    socket: UdpSocket,
    /// Its port, as a setting's value.
    port: String,
    heard: Vec<String>,
}

impl StatsdServer {
    /// Listening on a free loopback port.
    pub fn start() -> StatsdServer {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("a UDP socket");
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .expect("a timeout");
        let port = socket.local_addr().expect("its address").port().to_string();
        StatsdServer {
            socket,
            port,
            heard: Vec::new(),
        }
    }

    /// Its `host:port`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// envoyproxy/ratelimit's settings that send its statistics here.
    pub fn upstream_settings(&self) -> [(&'static str, &str); 3] {
        [
            ("USE_STATSD", "true"),
            ("STATSD_HOST", "127.0.0.1"),
            ("STATSD_PORT", &self.port),
        ]
    }

    /// The sum of the counter `name`, once it reaches `at_least` (waiting for what is on
    /// its way, up to 20 s); panics with what was heard if it does not.
    pub fn wait_for(&mut self, name: &str, at_least: u64) -> u64 {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let sum = self.sum(name);
            if sum >= at_least {
                return sum;
            }
            assert!(
                Instant::now() < deadline,
                "{name} reached {sum}, not {at_least}; heard:\n{}",
                self.heard.join("\n")
            );
            self.receive();
        }
    }

    /// The sum of the counter `name` heard so far.
    pub fn sum(&self, name: &str) -> u64 {
        let prefix = format!("{name}:");
        self.heard
            .iter()
            .filter_map(|line| line.strip_prefix(&prefix)?.strip_suffix("|c"))
            .map(|value| value.parse::<u64>().expect("a counter's value"))
            .sum()
    }

    /// Everything heard so far, a line each.
    pub fn heard(&self) -> String {
        self.heard.join("\n")
    }

    /// Keeps the lines of the next datagram, if one comes within 100 ms.
    pub fn receive(&mut self) {
        let mut datagram = [0; 4096];
        if let Ok(read) = self.socket.recv(&mut datagram) {
            let text = String::from_utf8_lossy(&datagram[..read]);
            self.heard.extend(text.lines().map(str::to_owned));
        }
    }
}
