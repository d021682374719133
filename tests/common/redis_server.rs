//! Real `redis-server` processes for tests, each on a free loopback port.

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
    /// Its TLS, when it serves TLS only.
    tls: Option<ServerTls>,
    /// Its configuration file's text, when it runs as a sentinel.
    sentinel_config: Option<String>,
    /// The password `redis-cli` gives it.
    password: Option<String>,
}

/// What a `redis-server` takes to serve TLS only (its plain port off), and to replicate and
/// be watched over TLS: its certificate and key, and the CA it trusts. The server's
/// certificate is also the one `redis-cli` presents to it.
#[derive(Clone, Debug)]
pub struct ServerTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
    /// Whether clients must present a certificate signed by `ca` (`tls-auth-clients`).
    pub auth_clients: bool,
}

// A file of its own, so that the tests without Redis pick their ports as these do; by path,
// so that the command's tests, which include this file by path, find it too.
#[path = "ports.rs"]
pub mod ports;
pub use ports::{free_port, free_ports};

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
        let mut server = Self::new(port, extra);
        server.spawn();
        server
    }

    /// Starts a server that serves TLS only, on a free port, and waits until it answers.
    pub fn start_tls(tls: ServerTls) -> RedisServer {
        let mut server = Self::new(free_port(), &[]);
        server.tls = Some(tls);
        server.spawn();
        server
    }

    /// Starts a server on `port`, with extra arguments, whose `redis-cli` gives `password`.
    pub fn start_with_password(port: u16, extra: &[&str], password: &str) -> RedisServer {
        let mut server = Self::new(port, extra);
        server.password = Some(password.to_owned());
        server.spawn();
        server
    }

    /// Starts a sentinel on a free port, configured by `config` (`sentinel monitor ...`),
    /// and waits until it answers.
    pub fn start_sentinel(config: &str) -> RedisServer {
        let mut server = Self::new(free_port(), &[]);
        server.sentinel_config = Some(config.to_owned());
        server.spawn();
        server
    }

    /// A server on `port`, not started, with its directory.
    fn new(port: u16, extra: &[&str]) -> RedisServer {
        let dir =
            std::env::temp_dir().join(format!("tollgate-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        RedisServer {
            child: None,
            port,
            dir,
            extra: extra.iter().map(|arg| (*arg).to_owned()).collect(),
            tls: None,
            sentinel_config: None,
            password: None,
        }
    }

    fn spawn(&mut self) {
        let port = self.port.to_string();
        let mut args: Vec<String> = Vec::new();
        if let Some(config) = &self.sentinel_config {
            // A sentinel rewrites its file (what it learnt): written once, kept on restart.
            let path = self.dir.join("sentinel.conf");
            if !path.exists() {
                std::fs::write(&path, config).expect("the sentinel's configuration file");
            }
            args.push(path.display().to_string());
            args.push("--sentinel".to_owned());
        }
        match &self.tls {
            None => args.extend(["--port".to_owned(), port]),
            Some(tls) => {
                let yes_no = if tls.auth_clients { "yes" } else { "no" };
                args.extend([
                    "--port".to_owned(),
                    "0".to_owned(),
                    "--tls-port".to_owned(),
                    port,
                ]);
                for (name, value) in [
                    ("--tls-cert-file", tls.cert.display().to_string()),
                    ("--tls-key-file", tls.key.display().to_string()),
                    ("--tls-ca-cert-file", tls.ca.display().to_string()),
                    ("--tls-auth-clients", yes_no.to_owned()),
                    ("--tls-replication", "yes".to_owned()),
                ] {
                    args.extend([name.to_owned(), value]);
                }
            }
        }
        for arg in ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"] {
            args.push(arg.to_owned());
        }
        args.extend(self.extra.iter().cloned());
        let log = std::fs::File::create(self.dir.join("redis-server.log"))
            .expect("a log file in the server's directory");
        let child = Command::new("redis-server")
            .args(&args)
            .current_dir(&self.dir)
            .stdout(log.try_clone().expect("a second handle on the log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| {
                panic!("cannot start redis-server ({error}): install it (scripts/test.sh does) to run the Redis tests")
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.answers() {
            let exited = self
                .child
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten());
            assert!(
                exited.is_none() && Instant::now() < deadline,
                "redis-server on port {} did not come up ({}); its log:\n{}",
                self.port,
                exited.map_or("no answer in 10 s".to_owned(), |status| status.to_string()),
                std::fs::read_to_string(self.dir.join("redis-server.log")).unwrap_or_default()
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
            .args(self.cli_options())
            .args(args)
            .output()
            .ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// How `redis-cli` reaches this server: over TLS (presenting the server's certificate),
    /// with its password.
    fn cli_options(&self) -> Vec<String> {
        let mut options = Vec::new();
        if let Some(tls) = &self.tls {
            options.push("--tls".to_owned());
            for (name, path) in [
                ("--cacert", &tls.ca),
                ("--cert", &tls.cert),
                ("--key", &tls.key),
            ] {
                options.extend([name.to_owned(), path.display().to_string()]);
            }
        }
        if let Some(password) = &self.password {
            options.extend([
                "--no-auth-warning".to_owned(),
                "-a".to_owned(),
                password.clone(),
            ]);
        }
        options
    }

    /// The server's URL (`rediss://` when it serves TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis-server.log")).unwrap_or_default()
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the server runs: started and not [killed](RedisServer::kill) since.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
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

/// How many hash slots a Redis Cluster has.
pub const SLOTS: usize = 16_384;

/// A Redis Cluster, each node a [`RedisServer`] on free ports; killed when dropped.
///
/// [`RedisCluster::start`] makes masters only; [`RedisCluster::start_with_replicas`] adds
/// replicas, whose roles [`RedisCluster::masters`] and [`RedisCluster::replica_of`] tell.
pub struct RedisCluster {
    /// Every node, masters and replicas, killed ones included ([`RedisServer::is_running`]).
    pub nodes: Vec<RedisServer>,
    /// What each master killed with [`RedisCluster::kill_node`] had, by its index.
    killed_masters: std::collections::BTreeMap<usize, KilledMaster>,
}

/// What a master had when [`RedisCluster::kill_node`] killed it: who may take over, and what.
struct KilledMaster {
    replicas: Vec<usize>,
    slots: Vec<u16>,
}

/// A node's role, from `INFO replication`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Master,
    Replica { master_port: u16, link_up: bool },
}

/// The value of `name:value` in an `INFO` reply.
fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|line| {
        line.trim()
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(':'))
    })
}

/// The client port in a `CLUSTER NODES` address (`ip:port@bus[,hostname]`).
fn port_of_address(address: &str) -> Option<u16> {
    address.split('@').next()?.rsplit(':').next()?.parse().ok()
}

/// The slots a `CLUSTER NODES` slot field names (`n` or `low-high`); `None` for a
/// migration mark (`[slot->-id]` / `[slot-<-id]`), which is not ownership.
fn slots_of_range(range: &str) -> Option<std::ops::RangeInclusive<usize>> {
    if range.starts_with('[') {
        return None;
    }
    let (low, high) = match range.split_once('-') {
        Some((low, high)) => (low.parse().ok()?, high.parse().ok()?),
        None => {
            let slot = range.parse().ok()?;
            (slot, slot)
        }
    };
    (low <= high && high < SLOTS).then_some(low..=high)
}

/// How long the cluster helpers wait for a state before panicking.
const CLUSTER_DEADLINE: Duration = Duration::from_secs(30);

/// How often the cluster helpers look again.
const CLUSTER_POLL: Duration = Duration::from_millis(50);

impl RedisCluster {
    /// Starts `masters` nodes in cluster mode (masters only, node timeout 2 s), joins them
    /// with `redis-cli --cluster create` and waits (at most 30 s) until every node reports
    /// `cluster_state:ok` and agrees on who owns every slot.
    pub fn start(masters: usize) -> RedisCluster {
        Self::create(masters, 0, &["--cluster-node-timeout", "2000"])
    }

    /// Starts `masters * (1 + replicas_per_master)` nodes in cluster mode, joins them with
    /// `redis-cli --cluster create --cluster-replicas replicas_per_master` and waits (at most
    /// 30 s) until every node reports `cluster_state:ok` and agrees on who owns every slot,
    /// there are `masters` masters with `replicas_per_master` replicas each, and every replica
    /// reports `master_link_status:up`.
    ///
    /// The node timeout is 1 s, so a replica takes over from a dead master within seconds;
    /// replicas never migrate to another master. Which nodes are masters is up to
    /// `redis-cli`: ask [`RedisCluster::masters`].
    pub fn start_with_replicas(masters: usize, replicas_per_master: usize) -> RedisCluster {
        Self::create(
            masters,
            replicas_per_master,
            &[
                "--cluster-node-timeout",
                "1000",
                "--cluster-allow-replica-migration",
                "no",
            ],
        )
    }

    /// As [`RedisCluster::start`], every node serving TLS only, its cluster bus too
    /// (`tls-cluster yes`).
    pub fn start_tls(masters: usize, tls: &ServerTls) -> RedisCluster {
        Self::create_with(
            masters,
            0,
            &["--cluster-node-timeout", "2000", "--tls-cluster", "yes"],
            Some(tls),
        )
    }

    fn create(masters: usize, replicas_per_master: usize, extra: &[&str]) -> RedisCluster {
        Self::create_with(masters, replicas_per_master, extra, None)
    }

    fn create_with(
        masters: usize,
        replicas_per_master: usize,
        extra: &[&str],
        tls: Option<&ServerTls>,
    ) -> RedisCluster {
        let count = masters * (1 + replicas_per_master);
        let ports = free_ports(2 * count);
        let nodes: Vec<RedisServer> = ports
            .chunks(2)
            .map(|pair| {
                let (port, bus) = (pair[0], pair[1].to_string());
                let config = format!("nodes-{port}.conf");
                // The bus port is given: the default (port + 10000) may be past 65535.
                let mut args = vec![
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    &config,
                    "--cluster-port",
                    &bus,
                ];
                args.extend_from_slice(extra);
                let mut node = RedisServer::new(port, &args);
                node.tls = tls.cloned();
                node.spawn();
                node
            })
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port()))
            .collect();
        let output = Command::new("redis-cli")
            .args(nodes[0].cli_options())
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", &replicas_per_master.to_string()])
            .arg("--cluster-yes")
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli runs");
        assert!(
            output.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let cluster = RedisCluster {
            nodes,
            killed_masters: std::collections::BTreeMap::new(),
        };
        cluster.wait_until_settled(masters, replicas_per_master);
        cluster
    }

    /// The nodes' URLs (killed nodes' included).
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The URLs of the nodes that run.
    pub fn live_urls(&self) -> Vec<String> {
        self.live()
            .into_iter()
            .map(|i| self.nodes[i].url())
            .collect()
    }

    /// The indices of the nodes that run (not [killed](RedisCluster::kill_node)).
    pub fn live(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].is_running())
            .collect()
    }

    /// A node that runs, to ask what any node can answer.
    fn any_live(&self) -> &RedisServer {
        self.nodes
            .iter()
            .find(|node| node.is_running())
            .expect("a node of the cluster runs")
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`).
    pub fn key_slot(&self, key: &str) -> u16 {
        self.any_live()
            .cli(&["CLUSTER", "KEYSLOT", key])
            .and_then(|out| out.trim().parse().ok())
            .expect("CLUSTER KEYSLOT answers a number")
    }

    /// The slot of a binary `key` (`CLUSTER KEYSLOT` through a real client).
    pub fn key_slot_bytes(&self, key: &[u8]) -> u16 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.any_live().connection())
            .expect("CLUSTER KEYSLOT answers a number")
    }

    /// Which node owns the slot of a binary `key`, once every live node agrees.
    pub fn owner_of_key(&self, key: &[u8]) -> usize {
        self.owner(self.key_slot_bytes(key))
    }

    /// Each slot's owner (index in `nodes`) as node `asked` sees it (`CLUSTER NODES`);
    /// `None` when `asked` does not run or answer.
    pub fn slot_owners_seen_by(&self, asked: usize) -> Option<Vec<Option<usize>>> {
        let node = &self.nodes[asked];
        if !node.is_running() {
            return None;
        }
        let table = node.cli(&["CLUSTER", "NODES"])?;
        let mut owners = vec![None; SLOTS];
        for line in table.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let Some(index) = fields
                .get(1)
                .and_then(|address| port_of_address(address))
                .and_then(|port| self.nodes.iter().position(|n| n.port() == port))
            else {
                continue;
            };
            for range in fields.iter().skip(8) {
                for slot in slots_of_range(range).into_iter().flatten() {
                    owners[slot] = Some(index);
                }
            }
        }
        Some(owners)
    }

    /// Which node (index in `nodes`) owns `slot`, as node `asked` sees it (`CLUSTER NODES`);
    /// `None` when `asked` does not run or answer, or knows no owner.
    pub fn owner_seen_by(&self, asked: usize, slot: u16) -> Option<usize> {
        self.slot_owners_seen_by(asked)?
            .get(usize::from(slot))
            .copied()
            .flatten()
    }

    /// Which node owns `slot`, once every live node agrees (waits at most 10 s).
    pub fn owner(&self, slot: u16) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let seen: Vec<(usize, Option<usize>)> = self
                .live()
                .into_iter()
                .map(|asked| (asked, self.owner_seen_by(asked, slot)))
                .collect();
            if let Some((_, Some(owner))) = seen.first() {
                if seen.iter().all(|(_, s)| *s == Some(*owner)) {
                    return *owner;
                }
            }
            assert!(
                Instant::now() < deadline,
                "the live nodes do not agree on who owns slot {slot} ((asked, owner)): {seen:?}"
            );
            std::thread::sleep(CLUSTER_POLL);
        }
    }

    /// Node `index`'s role from `INFO replication`; `None` when it does not run or answer.
    fn role(&self, index: usize) -> Option<Role> {
        let node = &self.nodes[index];
        if !node.is_running() {
            return None;
        }
        let info = node.cli(&["INFO", "replication"])?;
        match info_field(&info, "role")? {
            "master" => Some(Role::Master),
            "slave" => Some(Role::Replica {
                master_port: info_field(&info, "master_port")?.parse().ok()?,
                link_up: info_field(&info, "master_link_status") == Some("up"),
            }),
            _ => None,
        }
    }

    /// The indices of the live nodes that report themselves master (`INFO replication`).
    pub fn masters(&self) -> Vec<usize> {
        self.live()
            .into_iter()
            .filter(|&i| self.role(i) == Some(Role::Master))
            .collect()
    }

    /// The indices of the live nodes that report themselves replicas of node `master`.
    pub fn replicas_of(&self, master: usize) -> Vec<usize> {
        let master_port = self.nodes[master].port();
        self.live()
            .into_iter()
            .filter(|&i| {
                matches!(self.role(i), Some(Role::Replica { master_port: port, .. }) if port == master_port)
            })
            .collect()
    }

    /// The (first) live node that reports itself a replica of node `master`.
    ///
    /// # Panics
    ///
    /// When no live node replicates `master`.
    pub fn replica_of(&self, master: usize) -> usize {
        self.replicas_of(master)
            .first()
            .copied()
            .unwrap_or_else(|| {
                panic!(
                    "no live node replicates node {master} (port {})",
                    self.nodes[master].port()
                )
            })
    }

    /// Kills node `index` (as a crash would). A master's replicas and slots are noted first,
    /// for [`RedisCluster::wait_for_failover`].
    pub fn kill_node(&mut self, index: usize) {
        if self.role(index) == Some(Role::Master) {
            let replicas = self.replicas_of(index);
            let owners = self.slot_owners_seen_by(index).unwrap_or_else(|| {
                panic!("node {index} does not answer CLUSTER NODES before it is killed")
            });
            let slots = (0..SLOTS)
                .filter(|&slot| owners[slot] == Some(index))
                .filter_map(|slot| u16::try_from(slot).ok())
                .collect();
            self.killed_masters
                .insert(index, KilledMaster { replicas, slots });
        }
        self.nodes[index].kill();
    }

    /// Waits (polling every 50 ms, at most 30 s) until a replica of master `killed` (killed
    /// with [`RedisCluster::kill_node`]) reports itself master, every live node sees it own
    /// every slot `killed` owned, and every live master reports `cluster_state:ok`. Returns
    /// the promoted node's index.
    ///
    /// # Panics
    ///
    /// When `killed` was not a master killed with `kill_node`, or the failover is not done
    /// within 30 s (the message says which part is not).
    pub fn wait_for_failover(&self, killed: usize) -> usize {
        let Some(master) = self.killed_masters.get(&killed) else {
            panic!("node {killed} is not a master killed with RedisCluster::kill_node");
        };
        assert!(
            !master.replicas.is_empty(),
            "node {killed} had no replica when killed: no node can take over its slots"
        );
        let started = Instant::now();
        loop {
            let missing = match self.failover_done(master) {
                Ok(promoted) => return promoted,
                Err(missing) => missing,
            };
            assert!(
                started.elapsed() < CLUSTER_DEADLINE,
                "no failover of node {killed} (port {}) within {CLUSTER_DEADLINE:?}: {missing}",
                self.nodes[killed].port()
            );
            std::thread::sleep(CLUSTER_POLL);
        }
    }

    /// The promoted replica if the failover from `master` is done, else what is missing.
    fn failover_done(&self, master: &KilledMaster) -> Result<usize, String> {
        let promoted = master
            .replicas
            .iter()
            .copied()
            .find(|&replica| self.role(replica) == Some(Role::Master))
            .ok_or_else(|| {
                format!(
                    "none of its replicas (nodes {:?}) reports itself master",
                    master.replicas
                )
            })?;
        let disagreeing: Vec<usize> = self
            .live()
            .into_iter()
            .filter(|&asked| {
                self.slot_owners_seen_by(asked).is_none_or(|owners| {
                    master
                        .slots
                        .iter()
                        .any(|&slot| owners[usize::from(slot)] != Some(promoted))
                })
            })
            .collect();
        if !disagreeing.is_empty() {
            return Err(format!(
                "node {promoted} reports itself master, but nodes {disagreeing:?} do not see it \
                 own all {} slots of the killed master",
                master.slots.len()
            ));
        }
        let not_ok: Vec<usize> = self
            .masters()
            .into_iter()
            .filter(|&i| !self.state_ok(i))
            .collect();
        if !not_ok.is_empty() {
            return Err(format!(
                "node {promoted} took over, but masters {not_ok:?} do not report cluster_state:ok"
            ));
        }
        Ok(promoted)
    }

    /// How many keys each live master holds (`DBSIZE`), by index.
    pub fn keys_per_master(&self) -> Vec<(usize, u64)> {
        self.masters()
            .into_iter()
            .map(|i| {
                let keys = self.nodes[i]
                    .cli(&["DBSIZE"])
                    .and_then(|out| out.trim().parse().ok())
                    .unwrap_or_else(|| panic!("DBSIZE answers a number on node {i}"));
                (i, keys)
            })
            .collect()
    }

    /// Whether node `index` runs and reports `cluster_state:ok`.
    fn state_ok(&self, index: usize) -> bool {
        let node = &self.nodes[index];
        node.is_running()
            && node
                .cli(&["CLUSTER", "INFO"])
                .is_some_and(|info| info_field(&info, "cluster_state") == Some("ok"))
    }

    /// Moves `slot` with its keys from its owner to node `to`, as `redis-cli --cluster
    /// reshard` does for each slot: IMPORTING on the target, MIGRATING on the source,
    /// MIGRATE every key, then SETSLOT NODE on every live master. Waits until every live
    /// node agrees.
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
        // The target first, then the source, then the other masters (as redis-cli does:
        // replicas refuse SETSLOT and learn it from their masters).
        let mut order = vec![to, from];
        order.extend(
            self.masters()
                .into_iter()
                .filter(|i| *i != to && *i != from),
        );
        for i in order {
            ok(
                &self.nodes[i],
                &["CLUSTER", "SETSLOT", &slot_text, "NODE", &target_id],
            );
        }
        assert_eq!(self.owner(slot), to, "slot {slot} moved to node {to}");
    }

    /// Waits (at most 30 s) until every live node reports `cluster_state:ok` and they all
    /// see the same owner for every slot, there are `masters` masters with
    /// `replicas_per_master` replicas each, and every replica's link to its master is up.
    fn wait_until_settled(&self, masters: usize, replicas_per_master: usize) {
        let started = Instant::now();
        loop {
            let missing = match self.settled(masters, replicas_per_master) {
                Ok(()) => return,
                Err(missing) => missing,
            };
            assert!(
                started.elapsed() < CLUSTER_DEADLINE,
                "the cluster did not settle within {CLUSTER_DEADLINE:?}: {missing}"
            );
            std::thread::sleep(CLUSTER_POLL);
        }
    }

    /// `Ok` when the cluster is settled (see [`RedisCluster::wait_until_settled`]), else
    /// what is missing.
    fn settled(&self, masters: usize, replicas_per_master: usize) -> Result<(), String> {
        let live = self.live();
        let not_ok: Vec<usize> = live
            .iter()
            .copied()
            .filter(|&i| !self.state_ok(i))
            .collect();
        if !not_ok.is_empty() {
            return Err(format!("nodes {not_ok:?} do not report cluster_state:ok"));
        }
        let tables: Vec<Option<Vec<Option<usize>>>> = live
            .iter()
            .map(|&asked| self.slot_owners_seen_by(asked))
            .collect();
        let first = tables.first().cloned().flatten();
        let complete = first
            .as_ref()
            .is_some_and(|owners| owners.iter().all(Option::is_some));
        if !complete || tables.iter().any(|table| *table != first) {
            return Err(
                "the live nodes do not all see an owner for every slot, the same one".into(),
            );
        }
        let roles: Vec<(usize, Option<Role>)> = live.iter().map(|&i| (i, self.role(i))).collect();
        let master_count = roles
            .iter()
            .filter(|(_, role)| *role == Some(Role::Master))
            .count();
        let replicas: Vec<(usize, u16, bool)> = roles
            .iter()
            .filter_map(|(i, role)| match role {
                Some(Role::Replica {
                    master_port,
                    link_up,
                }) => Some((*i, *master_port, *link_up)),
                _ => None,
            })
            .collect();
        let per_master_ok = roles
            .iter()
            .filter(|(_, role)| *role == Some(Role::Master))
            .all(|(i, _)| {
                let port = self.nodes[*i].port();
                replicas
                    .iter()
                    .filter(|(_, master, _)| *master == port)
                    .count()
                    == replicas_per_master
            });
        if master_count != masters || !per_master_ok {
            return Err(format!(
                "want {masters} masters with {replicas_per_master} replicas each, roles are \
                 (node, role) {roles:?}"
            ));
        }
        let down: Vec<usize> = replicas
            .iter()
            .filter(|(_, _, up)| !up)
            .map(|(i, _, _)| *i)
            .collect();
        if !down.is_empty() {
            return Err(format!(
                "replicas {down:?} do not report master_link_status:up"
            ));
        }
        Ok(())
    }
}

/// Stores on the test servers: on Redis's clock, or on a manual clock with a timeout a busy
/// test machine keeps (2 s).
impl RedisServer {
    /// A store on this server.
    pub async fn store(&self) -> tollgate::store::RedisStore {
        tollgate::store::RedisStore::builder(self.url())
            .connect()
            .await
            .expect("connects to the test server")
    }

    /// A store on this server whose time is `clock`.
    pub async fn store_with_clock(
        &self,
        clock: tollgate::clock::ManualClock,
    ) -> tollgate::store::RedisStore {
        tollgate::store::RedisStore::builder(self.url())
            .clock(clock)
            .timeout(Duration::from_secs(2))
            .connect()
            .await
            .expect("connects to the test server")
    }
}

impl RedisCluster {
    /// A store on this cluster.
    pub async fn store_with_clock(
        &self,
        clock: tollgate::clock::ManualClock,
    ) -> tollgate::store::RedisStore {
        tollgate::store::RedisStore::cluster_builder(self.urls())
            .clock(clock)
            .timeout(Duration::from_secs(2))
            .connect()
            .await
            .expect("connects to the test cluster")
    }
}

/// The name the sentinels of a [`RedisSentinel`] know its master by.
pub const SENTINEL_MASTER: &str = "mymaster";

/// How long the sentinel helpers wait for a state before panicking.
const SENTINEL_DEADLINE: Duration = Duration::from_secs(60);

/// A master, its replica and one sentinel watching them, each a [`RedisServer`] on a free
/// port; killed when dropped.
///
/// The sentinel alone decides a failover (quorum 1): it marks a master down after 1 s without
/// an answer (`down-after-milliseconds 1000`, `failover-timeout 2000`), then promotes the
/// replica.
pub struct RedisSentinel {
    /// The master, then the replica (which of them is master now: [`RedisSentinel::master`]).
    pub servers: Vec<RedisServer>,
    pub sentinel: RedisServer,
}

impl RedisSentinel {
    /// Starts the master, its replica (waiting until its link to the master is up), then the
    /// sentinel, and waits (at most 60 s) until the sentinel names the master and knows the
    /// replica.
    pub fn start() -> RedisSentinel {
        Self::start_with(None)
    }

    /// As [`RedisSentinel::start`], the master and replica asking for `password`
    /// (`requirepass`; `masterauth` between them, `sentinel auth-pass` for the sentinel).
    pub fn start_with_password(password: &str) -> RedisSentinel {
        Self::start_with(Some(password))
    }

    fn start_with(password: Option<&str>) -> RedisSentinel {
        let [master_port, replica_port] = [0, 1].map(|_| free_port());
        let auth: Vec<&str> = password.map_or_else(Vec::new, |password| {
            vec!["--requirepass", password, "--masterauth", password]
        });
        let start = |port: u16, extra: &[&str]| {
            let args: Vec<&str> = extra.iter().chain(&auth).copied().collect();
            match password {
                Some(password) => RedisServer::start_with_password(port, &args, password),
                None => RedisServer::start_with(port, &args),
            }
        };
        let master = start(master_port, &[]);
        let master_port_text = master_port.to_string();
        let replica = start(
            replica_port,
            &["--replicaof", "127.0.0.1", &master_port_text],
        );
        wait_for("the replica's link to its master", || {
            replica
                .cli(&["INFO", "replication"])
                .is_some_and(|info| info_field(&info, "master_link_status") == Some("up"))
        });
        let mut config = format!(
            "sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {master_port} 1\n\
             sentinel down-after-milliseconds {SENTINEL_MASTER} 1000\n\
             sentinel failover-timeout {SENTINEL_MASTER} 2000\n\
             sentinel parallel-syncs {SENTINEL_MASTER} 1\n"
        );
        if let Some(password) = password {
            config.push_str(&format!(
                "sentinel auth-pass {SENTINEL_MASTER} {password}\n"
            ));
        }
        let sentinel = RedisServer::start_sentinel(&config);
        let setup = RedisSentinel {
            servers: vec![master, replica],
            sentinel,
        };
        // A replica the sentinel has not seen linked to its master cannot be promoted
        // (NOGOODSLAVE): wait for its view of the replica's link.
        let replica_port = replica_port.to_string();
        wait_for(
            "the sentinel to name the master and see its replica linked",
            || {
                setup.named_master_port() == Some(master_port)
                    && setup.replicas_seen().iter().any(|replica| {
                        replica.get("port") == Some(&replica_port)
                            && replica.get("master-link-status").map(String::as_str) == Some("ok")
                            && replica.get("flags").map(String::as_str) == Some("slave")
                    })
            },
        );
        setup
    }

    /// The replicas as the sentinel sees them (`SENTINEL REPLICAS`), each its fields.
    fn replicas_seen(&self) -> Vec<std::collections::BTreeMap<String, String>> {
        let out = self
            .sentinel
            .cli(&["SENTINEL", "REPLICAS", SENTINEL_MASTER])
            .unwrap_or_default();
        let lines: Vec<&str> = out.lines().map(str::trim).collect();
        let mut replicas: Vec<std::collections::BTreeMap<String, String>> = Vec::new();
        for pair in lines.chunks_exact(2) {
            if pair[0] == "name" {
                replicas.push(std::collections::BTreeMap::new());
            }
            if let Some(replica) = replicas.last_mut() {
                replica.insert(pair[0].to_owned(), pair[1].to_owned());
            }
        }
        replicas
    }

    /// The sentinel's URL, as a store takes it.
    pub fn sentinel_urls(&self) -> Vec<String> {
        vec![self.sentinel.url()]
    }

    /// The port of the master the sentinel names now (`SENTINEL GET-MASTER-ADDR-BY-NAME`).
    pub fn named_master_port(&self) -> Option<u16> {
        let out = self
            .sentinel
            .cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_MASTER])?;
        out.lines().nth(1)?.trim().parse().ok()
    }

    /// The index of the server that runs and reports itself master (`ROLE`).
    pub fn master(&self) -> Option<usize> {
        (0..self.servers.len()).find(|&i| {
            let server = &self.servers[i];
            server.is_running()
                && server
                    .cli(&["ROLE"])
                    .is_some_and(|role| role.lines().next() == Some("master"))
        })
    }

    /// Kills the master (as a crash would); its index.
    pub fn kill_master(&mut self) -> usize {
        let master = self.master().expect("a master runs");
        self.servers[master].kill();
        master
    }

    /// Waits (polling every 50 ms, at most 60 s) until a server other than `killed` reports
    /// itself master and the sentinel names it. Its index.
    pub fn wait_for_failover(&self, killed: usize) -> usize {
        let mut promoted = None;
        wait_for("the sentinel to promote the replica", || {
            promoted = self.master().filter(|&i| {
                i != killed && self.named_master_port() == Some(self.servers[i].port())
            });
            promoted.is_some()
        });
        promoted.expect("found by the wait")
    }
}

/// Polls `done` every 50 ms until it holds; panics after [`SENTINEL_DEADLINE`] naming `what`.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < SENTINEL_DEADLINE,
            "waited {SENTINEL_DEADLINE:?} for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
