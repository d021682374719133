//! Real `redis-server` processes for tests, each on a free loopback port.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` the test started; killed when dropped.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    /// The extra arguments it was started with, kept for [`RedisServer::restart`].
    extra: Vec<String>,
}

/// A free TCP port on 127.0.0.1 (free when asked; the server binds it right after).
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `n` distinct free TCP ports on 127.0.0.1 (all held at once while chosen, so they differ).
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("a free port on 127.0.0.1"))
        .collect();
    listeners
        .iter()
        .map(|listener| listener.local_addr().expect("a bound address").port())
        .collect()
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers.
    ///
    /// # Panics
    ///
    /// When `redis-server` is not installed (run `scripts/test.sh`, which installs it) or
    /// does not come up: these tests never pass without a real server.
    pub fn start() -> RedisServer {
        Self::start_with(free_port(), &[])
    }

    /// Starts a server on `port` with extra arguments (e.g. cluster mode).
    pub fn start_with(port: u16, extra: &[&str]) -> RedisServer {
        let dir =
            std::env::temp_dir().join(format!("tollgate-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let mut server = RedisServer {
            child: None,
            port,
            dir,
            extra: extra.iter().map(|arg| (*arg).to_owned()).collect(),
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let port = self.port.to_string();
        let mut args = vec![
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ];
        args.extend(self.extra.iter().map(String::as_str));
        let child = Command::new("redis-server")
            .args(&args)
            .current_dir(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!("cannot start redis-server ({error}): install it (scripts/test.sh does) to run the Redis tests")
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.answers() {
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} did not come up",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the server answers PING.
    pub fn answers(&self) -> bool {
        self.cli(&["PING"]).is_some_and(|out| out.trim() == "PONG")
    }

    /// Runs `redis-cli` against this server; its output, if it ran.
    pub fn cli(&self, args: &[&str]) -> Option<String> {
        let output = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .output()
            .ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// The server's URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server (as a crash would).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing answers, as a hung or
    /// overloaded Redis.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a [paused](RedisServer::pause) server run again (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self
            .child
            .as_ref()
            .expect("the server runs")
            .id()
            .to_string();
        let status = Command::new("kill")
            .args([signal, &pid])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// Starts the server again on the same port (and with the same arguments), empty.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// How many times `command` ran (from `INFO commandstats`).
    pub fn calls(&self, command: &str) -> u64 {
        let info = self.cli(&["INFO", "commandstats"]).unwrap_or_default();
        let prefix = format!("cmdstat_{}:calls=", command.to_lowercase());
        info.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|rest| rest.split(',').next())
            .and_then(|calls| calls.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl RedisServer {
    /// Every command's call count from `INFO commandstats` (e.g. `evalsha`, `script|load`).
    pub fn command_stats(&self) -> std::collections::BTreeMap<String, u64> {
        let info = self.cli(&["INFO", "commandstats"]).unwrap_or_default();
        info.lines()
            .filter_map(|line| {
                let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(":calls=")?;
                let calls = rest.split(',').next()?.parse().ok()?;
                Some((name.to_owned(), calls))
            })
            .collect()
    }

    /// A plain (blocking) client connection, for commands with binary arguments.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|client| client.get_connection_with_timeout(Duration::from_secs(5)))
            .expect("connects to the test server")
    }

    /// This node's Redis Cluster id (`CLUSTER MYID`).
    pub fn node_id(&self) -> String {
        self.cli(&["CLUSTER", "MYID"])
            .map(|out| out.trim().to_owned())
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| panic!("no cluster id from the node on port {}", self.port))
    }
}

/// A Redis Cluster of masters only, each a [`RedisServer`] on free ports; killed when dropped.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts `masters` nodes in cluster mode, joins them with `redis-cli --cluster create`
    /// and waits (at most 30 s) until every node reports `cluster_state:ok` and agrees on
    /// who owns every slot.
    pub fn start(masters: usize) -> RedisCluster {
        let ports = free_ports(2 * masters);
        let nodes: Vec<RedisServer> = ports
            .chunks(2)
            .map(|pair| {
                let (port, bus) = (pair[0], pair[1].to_string());
                let config = format!("nodes-{port}.conf");
                // The bus port is given: the default (port + 10000) may be past 65535.
                RedisServer::start_with(
                    port,
                    &[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        &config,
                        "--cluster-node-timeout",
                        "2000",
                        "--cluster-port",
                        &bus,
                    ],
                )
            })
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port()))
            .collect();
        let output = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli runs");
        assert!(
            output.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let cluster = RedisCluster { nodes };
        cluster.wait_until_settled();
        cluster
    }

    /// The nodes' URLs.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`).
    pub fn key_slot(&self, key: &str) -> u16 {
        self.nodes[0]
            .cli(&["CLUSTER", "KEYSLOT", key])
            .and_then(|out| out.trim().parse().ok())
            .expect("CLUSTER KEYSLOT answers a number")
    }

    /// Which node (index in `nodes`) owns `slot`, as node `asked` sees it (`CLUSTER NODES`).
    pub fn owner_seen_by(&self, asked: usize, slot: u16) -> Option<usize> {
        let table = self.nodes[asked].cli(&["CLUSTER", "NODES"])?;
        let owner_port = table.lines().find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let owns = fields.iter().skip(8).any(|range| {
                // `[slot->-id]` / `[slot-<-id]` mark a migration, not ownership.
                if range.starts_with('[') {
                    return false;
                }
                match range.split_once('-') {
                    Some((low, high)) => {
                        low.parse().is_ok_and(|low: u16| low <= slot)
                            && high.parse().is_ok_and(|high: u16| slot <= high)
                    }
                    None => range.parse() == Ok(slot),
                }
            });
            let address = fields.get(1)?;
            let port: u16 = address
                .split('@')
                .next()?
                .rsplit(':')
                .next()?
                .parse()
                .ok()?;
            owns.then_some(port)
        })?;
        self.nodes.iter().position(|node| node.port() == owner_port)
    }

    /// Which node owns `slot`, once every node agrees (waits at most 10 s).
    pub fn owner(&self, slot: u16) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let seen: Vec<Option<usize>> = (0..self.nodes.len())
                .map(|asked| self.owner_seen_by(asked, slot))
                .collect();
            if let Some(Some(owner)) = seen.first() {
                if seen.iter().all(|s| *s == Some(*owner)) {
                    return *owner;
                }
            }
            assert!(
                Instant::now() < deadline,
                "the nodes do not agree on who owns slot {slot}: {seen:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Moves `slot` with its keys from its owner to node `to`, as `redis-cli --cluster
    /// reshard` does for each slot: IMPORTING on the target, MIGRATING on the source,
    /// MIGRATE every key, then SETSLOT NODE on every node. Waits until every node agrees.
    pub fn move_slot(&self, slot: u16, to: usize) {
        let from = self.owner(slot);
        assert_ne!(from, to, "slot {slot} is already on node {to}");
        let (source, target) = (&self.nodes[from], &self.nodes[to]);
        let slot_text = slot.to_string();
        let ok = |node: &RedisServer, args: &[&str]| {
            let reply = node.cli(args).unwrap_or_default();
            assert_eq!(reply.trim(), "OK", "{args:?} on port {}", node.port());
        };
        ok(
            target,
            &[
                "CLUSTER",
                "SETSLOT",
                &slot_text,
                "IMPORTING",
                &source.node_id(),
            ],
        );
        ok(
            source,
            &[
                "CLUSTER",
                "SETSLOT",
                &slot_text,
                "MIGRATING",
                &target.node_id(),
            ],
        );
        // Keys are binary (state ids, length-prefixed values): moved with a real client.
        let mut connection = source.connection();
        for _ in 0..1_000 {
            let keys: Vec<Vec<u8>> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(100)
                .query(&mut connection)
                .expect("CLUSTER GETKEYSINSLOT");
            if keys.is_empty() {
                break;
            }
            let () = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(target.port())
                .arg("")
                .arg(0)
                .arg(5_000)
                .arg("KEYS")
                .arg(&keys)
                .query(&mut connection)
                .expect("MIGRATE");
        }
        let target_id = target.node_id();
        // The target first, then the source, then the others (as redis-cli does).
        let mut order = vec![to, from];
        order.extend((0..self.nodes.len()).filter(|i| *i != to && *i != from));
        for i in order {
            ok(
                &self.nodes[i],
                &["CLUSTER", "SETSLOT", &slot_text, "NODE", &target_id],
            );
        }
        assert_eq!(self.owner(slot), to, "slot {slot} moved to node {to}");
    }

    fn wait_until_settled(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = self.nodes.iter().all(|node| {
                node.cli(&["CLUSTER", "INFO"])
                    .is_some_and(|info| info.lines().any(|l| l.trim() == "cluster_state:ok"))
            });
            // Every node knows every master's slots.
            let agreed = ok
                && (0..self.nodes.len()).all(|asked| {
                    [0, 8_000, 16_383]
                        .into_iter()
                        .all(|slot| self.owner_seen_by(asked, slot).is_some())
                });
            if agreed {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not reach cluster_state:ok within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
