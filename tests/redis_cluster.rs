//! The Redis store on a real Redis Cluster that each test starts: a fleet sharing it, requests
//! whose limits are in several slots (all or nothing), a master that dies and a slot that
//! moves under load.
//!
//! The tests run one at a time ([`one_at_a_time`]): each starts three to six `redis-server`
//! processes, and the failover test measures latencies.
#![cfg(feature = "redis")]

mod common;

use common::redis_server::RedisCluster;
use common::runtime;
use common::windows::away_from_hour_edge;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;
use tollgate::rules::Rules;
use tollgate::store::RedisStore;
use tollgate::{Denial, Limiter, Verdict};
use tracing::instrument::WithSubscriber;
use tracing_subscriber::layer::SubscriberExt;

/// Serializes the tests of this file.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Held for a whole test: the next one starts its cluster when this one is done (a test that
/// failed does not stop the others).
fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner)
}

fn rules(yaml: &str) -> Rules {
    Rules::from_yaml(yaml).expect("valid rules")
}

/// One limit per `user`, `rate_limit` being the YAML flow mapping's inside.
fn per_user(domain: &str, rate_limit: &str) -> Rules {
    rules(&format!(
        "domain: {domain}\nsources: {{ user: {{ header: x-user }} }}\ndescriptors:\n  - key: user\n    rate_limit: {{ {rate_limit} }}\n"
    ))
}

/// A limit per `user` and one per `tenant`: the two limits of a request of a user of a
/// tenant are in different slots (each is tagged by its own value).
fn per_user_and_tenant(domain: &str, per_user: &str, per_tenant: &str) -> Rules {
    rules(&format!(
        "domain: {domain}\nsources: {{ user: {{ header: x-user }}, tenant: {{ header: x-tenant }} }}\ndescriptors:\n  - key: user\n    rate_limit: {{ {per_user} }}\n  - key: tenant\n    rate_limit: {{ {per_tenant} }}\n"
    ))
}

/// A store on every node of `cluster`, whose calls give up after `timeout`.
async fn cluster_store(cluster: &RedisCluster, timeout: Duration) -> RedisStore {
    RedisStore::cluster_builder(cluster.urls())
        .timeout(timeout)
        .connect()
        .await
        .expect("connects to the cluster")
}

/// The hash tag of the Redis keys of a client whose tag value is `value`: 16 hex digits of
/// its SHA-256 (as `src/store/redis/keys.rs` makes it; the tests check it against the keys
/// they find on the masters).
fn tag_of(value: &str) -> String {
    Sha256::digest(value.as_bytes())[..8]
        .iter()
        .fold(String::with_capacity(16), |mut hex, byte| {
            write!(hex, "{byte:02x}").expect("writes to a string");
            hex
        })
}

/// The Redis Cluster slot of the keys of a client whose tag value is `value`.
fn slot_of(value: &str) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(tag_of(value).as_bytes()) % 16_384
}

/// Who owns each slot, as one master sees it (one `CLUSTER NODES` for many lookups).
struct SlotOwners(Vec<Option<usize>>);

impl SlotOwners {
    fn of(cluster: &RedisCluster) -> SlotOwners {
        let asked = cluster.masters()[0];
        SlotOwners(
            cluster
                .slot_owners_seen_by(asked)
                .unwrap_or_else(|| panic!("node {asked} answers CLUSTER NODES")),
        )
    }

    /// The master of the keys of client `value`.
    fn of_value(&self, value: &str) -> usize {
        self.0[usize::from(slot_of(value))]
            .unwrap_or_else(|| panic!("the slot of {value:?} has an owner"))
    }
}

/// The keys of `domain` on node `node` (`KEYS`, fine for a test's few keys).
fn keys_of_domain(cluster: &RedisCluster, node: usize, domain: &str) -> Vec<String> {
    cluster.nodes[node]
        .cli(&["KEYS", &format!("*}}:{domain}:*")])
        .unwrap_or_else(|| panic!("KEYS answers on node {node}"))
        .lines()
        .filter(|key| !key.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The masters holding the keys of client `value` in `domain`, checked against the slot
/// that [`slot_of`] predicts.
fn masters_holding(cluster: &RedisCluster, domain: &str, value: &str) -> Vec<usize> {
    let tag = format!("{{{}}}", tag_of(value));
    let mut holding = Vec::new();
    for master in cluster.masters() {
        let keys: Vec<String> = keys_of_domain(cluster, master, domain)
            .into_iter()
            .filter(|key| key.contains(&tag))
            .collect();
        // The keys of one hash tag share a slot: one is checked.
        if let Some(key) = keys.first() {
            assert_eq!(
                cluster.key_slot(key),
                slot_of(value),
                "the key {key} of {value:?} is in the slot its tag says"
            );
            holding.push(master);
        }
    }
    holding
}

/// The store's log (events of `tollgate` targets, with their fields), for what went wrong.
#[derive(Clone, Default)]
struct StoreLog(Arc<Mutex<Vec<String>>>);

impl StoreLog {
    /// A subscriber that records into this log.
    fn dispatch(&self) -> tracing::Dispatch {
        tracing::Dispatch::new(tracing_subscriber::registry().with(self.clone()))
    }

    fn events(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many requests the store failed with each distinct error (numbers masked, so that
    /// ports and addresses do not make each one distinct).
    fn errors(&self) -> BTreeMap<String, usize> {
        let mut errors = BTreeMap::new();
        for event in self.events() {
            // The limiter's event, one per request the store failed.
            if !event.contains("on_store_error decides") {
                continue;
            }
            if let Some((_, error)) = event.split_once("error=") {
                let masked: String = error
                    .chars()
                    .map(|c| if c.is_ascii_digit() { '#' } else { c })
                    .collect();
                *errors.entry(masked).or_insert(0) += 1;
            }
        }
        errors
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for StoreLog {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if !event.metadata().target().starts_with("tollgate") {
            return;
        }
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(format!(
                "{} {}",
                event.metadata().level(),
                fields.0.trim_end()
            ));
    }
}

/// An event's fields as `name=value`; the error last, so that it ends the line.
struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "error" {
            let _ = write!(self.0, "error={value:?}");
        } else {
            self.0
                .insert_str(0, &format!("{}={value:?} ", field.name()));
        }
    }
}

#[test]
fn two_servers_sharing_a_cluster_admit_exactly_the_limit_for_every_algorithm() {
    let _serial = one_at_a_time();
    let cluster = RedisCluster::start_with_replicas(3, 1);
    let users: Vec<String> = (0..30).map(|i| format!("user-{i}")).collect();
    runtime().block_on(async {
        let variants = [
            ("fw", "algorithm: fixed_window"),
            ("tb", "algorithm: token_bucket"),
            ("swl", "algorithm: sliding_window_log"),
            ("swc", "algorithm: sliding_window_counter"),
            ("gcra", "algorithm: gcra"),
            ("lb", "algorithm: leaky_bucket, queue: 99, mode: police"),
        ];
        for (domain, variant) in variants {
            let rate_limit = format!("unit: hour, requests_per_unit: 100, {variant}");
            // Two servers of a fleet: two limiters, each with its own connection.
            let fleet = [
                Limiter::with_store(
                    per_user(domain, &rate_limit),
                    cluster_store(&cluster, Duration::from_secs(2)).await,
                ),
                Limiter::with_store(
                    per_user(domain, &rate_limit),
                    cluster_store(&cluster, Duration::from_secs(2)).await,
                ),
            ];
            away_from_hour_edge(Duration::from_secs(30)).await;
            // Each user: 8 tasks on each server, 8 requests each (128 for 100 places), all
            // users at once.
            let mut tasks = JoinSet::new();
            for user in &users {
                for limiter in &fleet {
                    for _ in 0..8 {
                        let (limiter, user) = (limiter.clone(), user.clone());
                        tasks.spawn(async move {
                            let (mut admitted, mut undecided) = (0, 0);
                            for _ in 0..8 {
                                let verdict = limiter.check(&[("user", &user)], 1).await;
                                if verdict.decision().is_none() {
                                    undecided += 1;
                                } else if verdict.is_allowed() {
                                    admitted += 1;
                                }
                            }
                            (user, admitted, undecided)
                        });
                    }
                }
            }
            let mut admitted: BTreeMap<String, u32> = BTreeMap::new();
            let mut undecided = 0;
            for (user, count, failed) in tasks.join_all().await {
                *admitted.entry(user).or_insert(0) += count;
                undecided += failed;
            }
            assert_eq!(undecided, 0, "{variant}: Redis decided every request");
            let wrong: Vec<(&String, &u32)> = admitted.iter().filter(|(_, n)| **n != 100).collect();
            assert!(
                wrong.is_empty() && admitted.len() == users.len(),
                "{variant}: each user admitted exactly 100 of 128, not {wrong:?}"
            );
            for limiter in &fleet {
                for user in &users {
                    assert!(
                        !limiter.check(&[("user", user)], 1).await.is_allowed(),
                        "{variant}: {user} is full for both servers"
                    );
                }
            }
            // One key per user, on the master that owns its slot; the users on all three.
            let owners = SlotOwners::of(&cluster);
            let mut per_master: BTreeMap<usize, usize> =
                cluster.masters().into_iter().map(|m| (m, 0)).collect();
            for (&master, count) in &mut per_master {
                for key in keys_of_domain(&cluster, master, domain) {
                    let user = users
                        .iter()
                        .find(|user| key.contains(&format!("{{{}}}", tag_of(user))))
                        .unwrap_or_else(|| panic!("{variant}: {key} is a user's"));
                    assert_eq!(
                        owners.of_value(user),
                        master,
                        "{variant}: {user}'s key {key} is on the owner of its slot"
                    );
                    if domain == "fw" {
                        assert_eq!(cluster.key_slot(&key), slot_of(user), "{key}'s slot");
                    }
                    *count += 1;
                }
            }
            assert_eq!(
                per_master.values().sum::<usize>(),
                users.len(),
                "{variant}: one key per user, keys per master {per_master:?}"
            );
            assert!(
                per_master.len() == 3 && per_master.values().all(|&keys| keys > 0),
                "{variant}: the users' keys are on all three masters: {per_master:?}"
            );
        }
        let keys = cluster.keys_per_master();
        assert_eq!(keys.len(), 3, "three masters: {keys:?}");
        assert!(
            keys.iter().all(|&(_, count)| count > 0),
            "keys on every master: {keys:?}"
        );
    });
}

/// A user and a tenant whose keys are on different masters (so in different slots).
fn user_and_tenant_apart(cluster: &RedisCluster) -> (String, String) {
    let owners = SlotOwners::of(cluster);
    let tenant = "t1".to_owned();
    let tenant_master = owners.of_value(&tenant);
    (1..)
        .map(|i| format!("u{i}"))
        .find(|user| owners.of_value(user) != tenant_master)
        .map(|user| (user, tenant))
        .expect("a user on another master")
}

/// Sends `requests` in rounds of 16 at once (each round answered before the next); whether
/// each was admitted (each must be decided by Redis).
async fn in_rounds_of_16(
    limiter: &Limiter<RedisStore>,
    requests: Vec<Vec<(&'static str, String)>>,
    log: &StoreLog,
) -> Vec<bool> {
    let mut admitted = Vec::with_capacity(requests.len());
    for round in requests.chunks(16) {
        let mut tasks = JoinSet::new();
        for (i, request) in round.iter().enumerate() {
            let (limiter, request) = (limiter.clone(), request.clone());
            tasks.spawn(
                async move {
                    let values: Vec<(&str, &str)> =
                        request.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    (i, limiter.check(&values, 1).await)
                }
                .with_subscriber(log.dispatch()),
            );
        }
        let mut verdicts: Vec<(usize, Verdict)> = tasks.join_all().await;
        verdicts.sort_by_key(|(i, _)| *i);
        for (_, verdict) in verdicts {
            assert!(
                verdict.decision().is_some(),
                "Redis decided: {verdict:?}; log {:?}",
                log.events()
            );
            admitted.push(verdict.is_allowed());
        }
    }
    admitted
}

/// The `remaining` that Redis reports for a request with `values` (one limit applies).
async fn remaining(limiter: &Limiter<RedisStore>, values: &[(&str, &str)]) -> (bool, u64) {
    let verdict = limiter.check(values, 1).await;
    let decision = verdict
        .decision()
        .unwrap_or_else(|| panic!("Redis decided {values:?}: {verdict:?}"));
    (verdict.is_allowed(), decision.remaining)
}

#[test]
fn a_request_denied_in_one_slot_charges_no_other_slot_under_16_concurrent_requests() {
    let _serial = one_at_a_time();
    let cluster = RedisCluster::start_with_replicas(3, 1);
    let log = StoreLog::default();
    runtime().block_on(async {
        let (user, tenant) = user_and_tenant_apart(&cluster);
        // The large limits are per day, so that a token bucket refills nothing while the test
        // runs: a count off by one is a charge kept or given back twice.
        for algorithm in [
            "fixed_window",
            "sliding_window_counter",
            "sliding_window_log",
            "token_bucket",
        ] {
            // The user's limit denies; the tenant's, in another slot, must not keep charges.
            let domain = format!("user-denies-{algorithm}");
            let limiter = Limiter::with_store(
                per_user_and_tenant(
                    &domain,
                    "unit: hour, requests_per_unit: 5, algorithm: token_bucket",
                    &format!("unit: day, requests_per_unit: 1000, algorithm: {algorithm}"),
                ),
                // Every request goes to Redis (no local denials): each denied one charges and
                // refunds the tenant.
                RedisStore::cluster_builder(cluster.urls())
                    .timeout(Duration::from_secs(2))
                    .over_limit_cache(false)
                    .connect()
                    .await
                    .expect("connects to the cluster"),
            );
            away_from_hour_edge(Duration::from_secs(30)).await;
            let request = vec![("user", user.clone()), ("tenant", tenant.clone())];
            let first = in_rounds_of_16(&limiter, vec![request.clone()], &log).await;
            assert_eq!(first, [true], "{algorithm}: the first request is admitted");
            let user_masters = masters_holding(&cluster, &domain, &user);
            let tenant_masters = masters_holding(&cluster, &domain, &tenant);
            assert_eq!(
                user_masters,
                [cluster.owner(slot_of(&user))],
                "{algorithm}: the user's key is on its slot's owner"
            );
            assert_eq!(
                tenant_masters,
                [cluster.owner(slot_of(&tenant))],
                "{algorithm}: the tenant's key is on its slot's owner"
            );
            assert_ne!(
                user_masters, tenant_masters,
                "{algorithm}: the two limits of the request are on different masters"
            );
            // 64 requests in all, 16 at a time after the first.
            let admitted = in_rounds_of_16(&limiter, vec![request; 63], &log).await;
            assert_eq!(
                admitted.iter().filter(|a| **a).count(),
                4,
                "{algorithm}: 5 per user in all, the first included: {admitted:?}"
            );
            // A request of the tenant alone reports the tenant's limit: 5 charged, then this.
            assert_eq!(
                remaining(&limiter, &[("tenant", tenant.as_str())]).await,
                (true, 1000 - 5 - 1),
                "{algorithm}: the tenant was charged for the 5 admitted requests only"
            );
        }
        for algorithm in [
            "fixed_window",
            "sliding_window_counter",
            "sliding_window_log",
            "token_bucket",
        ] {
            // The tenant's limit denies; the users' limits, in other slots, keep no charges.
            let domain = format!("tenant-denies-{algorithm}");
            let limiter = Limiter::with_store(
                per_user_and_tenant(
                    &domain,
                    &format!("unit: day, requests_per_unit: 1000, algorithm: {algorithm}"),
                    "unit: hour, requests_per_unit: 5, algorithm: token_bucket",
                ),
                RedisStore::cluster_builder(cluster.urls())
                    .timeout(Duration::from_secs(2))
                    .over_limit_cache(false)
                    .connect()
                    .await
                    .expect("connects to the cluster"),
            );
            away_from_hour_edge(Duration::from_secs(30)).await;
            let users: Vec<String> = (0..64).map(|i| format!("member-{i}")).collect();
            let owners = SlotOwners::of(&cluster);
            let tenant_master = owners.of_value(&tenant);
            let apart = users
                .iter()
                .filter(|user| owners.of_value(user) != tenant_master)
                .count();
            assert!(
                apart >= 16,
                "most users' keys are on other masters: {apart}"
            );
            let requests = users
                .iter()
                .map(|user| vec![("user", user.clone()), ("tenant", tenant.clone())])
                .collect();
            let admitted = in_rounds_of_16(&limiter, requests, &log).await;
            assert_eq!(
                admitted.iter().filter(|a| **a).count(),
                5,
                "{algorithm}: 5 per tenant: {admitted:?}"
            );
            for (user, admitted) in users.iter().zip(&admitted) {
                let charged = u64::from(*admitted);
                assert_eq!(
                    remaining(&limiter, &[("user", user.as_str())]).await,
                    (true, 1000 - charged - 1),
                    "{algorithm}: {user} (admitted: {admitted}) is charged for what was admitted"
                );
            }
            assert!(
                !limiter
                    .check(&[("tenant", tenant.as_str())], 1)
                    .await
                    .is_allowed(),
                "{algorithm}: the tenant is full"
            );
        }
    });
    let refund_failures: Vec<String> = log
        .events()
        .into_iter()
        .filter(|event| event.contains("could not give back"))
        .collect();
    assert!(
        refund_failures.is_empty(),
        "every refund succeeded: {refund_failures:?}"
    );
}

#[test]
fn a_cluster_with_replicas_fails_over_when_a_master_dies() {
    let _serial = one_at_a_time();
    let mut cluster = RedisCluster::start_with_replicas(3, 1);
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3, "three masters: {masters:?}");
    assert_eq!(cluster.live().len(), 6, "three masters and three replicas");

    // Binary, as the store's keys are.
    let key: &[u8] = b"tollgate:failover:\xff\x00smoke";
    let mut connection = redis::cluster::ClusterClient::new(cluster.urls())
        .and_then(|client| client.get_connection())
        .expect("connects to the cluster");
    let () = redis::cmd("SET")
        .arg(key)
        .arg("survives")
        .query(&mut connection)
        .expect("SET through the cluster");
    // WAIT goes to every master (the one that took the write on the connection that wrote
    // it); the reply is the fewest replicas that acknowledged.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let acknowledged: i64 = redis::cmd("WAIT")
            .arg(1)
            .arg(1_000)
            .query(&mut connection)
            .expect("WAIT through the cluster");
        if acknowledged >= 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no replica acknowledged the write within 10 s"
        );
    }

    let owner = cluster.owner_of_key(key);
    assert!(masters.contains(&owner), "node {owner} is a master");
    let replica = cluster.replica_of(owner);
    let keys = cluster.keys_per_master();
    assert_eq!(
        keys.iter().map(|(_, count)| count).sum::<u64>(),
        1,
        "one key in the cluster: {keys:?}"
    );
    assert!(
        keys.contains(&(owner, 1)),
        "node {owner} holds it: {keys:?}"
    );

    let slot = cluster.key_slot_bytes(key);
    cluster.kill_node(owner);
    let promoted = cluster.wait_for_failover(owner);
    assert_eq!(promoted, replica, "the dead master's replica took over");
    assert!(
        cluster.masters().contains(&promoted),
        "node {promoted} reports itself master"
    );
    for asked in cluster.live() {
        assert_eq!(
            cluster.owner_seen_by(asked, slot),
            Some(promoted),
            "node {asked} sees the promoted node own slot {slot}"
        );
    }
    assert_eq!(cluster.owner(slot), promoted);

    let value: Option<String> = redis::cmd("GET")
        .arg(key)
        .query(&mut cluster.nodes[promoted].connection())
        .expect("GET on the promoted node");
    assert_eq!(
        value.as_deref(),
        Some("survives"),
        "the replica had the key"
    );
    let keys = cluster.keys_per_master();
    assert_eq!(keys.len(), 3, "three live masters again: {keys:?}");
    assert!(
        keys.contains(&(promoted, 1)),
        "the promoted node holds the key: {keys:?}"
    );

    // A new cluster client, given only the live nodes, finds the key on its new owner.
    let value: Option<String> = redis::cluster::ClusterClient::new(cluster.live_urls())
        .and_then(|client| client.get_connection())
        .and_then(|mut connection| redis::cmd("GET").arg(key).query(&mut connection))
        .expect("GET through the cluster after the failover");
    assert_eq!(value.as_deref(), Some("survives"));
}

/// What the requests of a load task saw.
#[derive(Debug, Default)]
struct LoadStats {
    requests: u64,
    /// Requests that Redis did not decide (the store failed; `on_store_error` decided).
    undecided: u64,
    max_latency: Duration,
    /// When the first and the last undecided requests were sent.
    first_undecided: Option<Instant>,
    last_undecided: Option<Instant>,
}

impl LoadStats {
    fn record(&mut self, sent: Instant, took: Duration, decided: bool) {
        self.requests += 1;
        self.max_latency = self.max_latency.max(took);
        if !decided {
            self.undecided += 1;
            self.first_undecided.get_or_insert(sent);
            self.last_undecided = Some(sent);
        }
    }

    /// What the requests saw, times from `origin`.
    fn summary(&self, origin: Instant) -> String {
        let since = |at: Option<Instant>| at.map(|at| at.saturating_duration_since(origin));
        format!(
            "{} requests, {} undecided (sent from {:?} to {:?}), max latency {:?}",
            self.requests,
            self.undecided,
            since(self.first_undecided),
            since(self.last_undecided),
            self.max_latency
        )
    }

    fn merge(mut self, other: LoadStats) -> LoadStats {
        self.requests += other.requests;
        self.undecided += other.undecided;
        self.max_latency = self.max_latency.max(other.max_latency);
        self.first_undecided = match (self.first_undecided, other.first_undecided) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_undecided = self.last_undecided.max(other.last_undecided);
        self
    }
}

const FAILOVER_RULES: &str = r#"
domain: failover
# While a master is down and its replica not yet promoted, the store fails for the keys of its
# slots: those requests are admitted.
defaults: { on_store_error: allow }
sources: { user: { header: x-user } }
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 10, algorithm: fixed_window }
"#;

#[test]
fn a_master_killed_mid_load_fails_over_and_limits_hold_again() {
    let _serial = one_at_a_time();
    let mut cluster = RedisCluster::start_with_replicas(3, 1);
    let log = StoreLog::default();
    let timeout = Duration::from_millis(200);
    let started = Instant::now();
    runtime().block_on(async {
        // No local denials: every request of a busy user, denied or not, goes to Redis.
        let store = RedisStore::cluster_builder(cluster.urls())
            .timeout(timeout)
            .over_limit_cache(false)
            .connect()
            .await
            .expect("connects to the cluster");
        let limiter = Limiter::with_store(rules(FAILOVER_RULES), store);
        let busy: Vec<String> = (0..40).map(|i| format!("busy-{i}")).collect();
        let victim = cluster.owner(slot_of(&busy[0]));
        // Each busy user, and whether its keys are on the master that dies.
        let owners = SlotOwners::of(&cluster);
        let busy: Vec<(String, bool)> = busy
            .into_iter()
            .map(|user| {
                let on_victim = owners.of_value(&user) == victim;
                (user, on_victim)
            })
            .collect();
        assert!(
            busy.iter().any(|(_, on_victim)| !on_victim),
            "some busy users' keys are on the masters that live"
        );
        let stop = Arc::new(AtomicBool::new(false));
        let decided = Arc::new(AtomicU64::new(0));
        let mut load = JoinSet::new();
        for task in 0..4 {
            let (limiter, busy, stop, decided) =
                (limiter.clone(), busy.clone(), stop.clone(), decided.clone());
            load.spawn(
                async move {
                    // Users on the master that dies, and the others.
                    let mut stats = [LoadStats::default(), LoadStats::default()];
                    for (user, on_victim) in busy.iter().cycle().skip(task * 10) {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let sent = Instant::now();
                        let verdict = limiter.check(&[("user", user)], 1).await;
                        let is_decided = verdict.decision().is_some();
                        stats[usize::from(!on_victim)].record(sent, sent.elapsed(), is_decided);
                        if is_decided {
                            decided.fetch_add(1, Ordering::Relaxed);
                        }
                        // A request the breaker fails at once awaits nothing: let the others run.
                        tokio::task::yield_now().await;
                    }
                    stats
                }
                .with_subscriber(log.dispatch()),
            );
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while decided.load(Ordering::Relaxed) < 500 {
            assert!(
                Instant::now() < deadline,
                "the load is decided by Redis: {:?}",
                log.errors()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }

        // The master of busy-0's key dies; its replica takes over (the load keeps going on
        // the runtime's workers while this thread waits).
        let killed_at = Instant::now();
        cluster.kill_node(victim);
        let promoted = cluster.wait_for_failover(victim);
        let failed_over = killed_at.elapsed();
        let promoted_calls = cluster.nodes[promoted].calls("fcall");

        // Redis decides again, for a user whose key is on the promoted master.
        let owners = SlotOwners::of(&cluster);
        let mut probes = (0..)
            .map(|i| format!("probe-{i}"))
            .filter(|user| owners.of_value(user) == promoted);
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let user = probes.next().expect("endless probes");
            let verdict = limiter
                .check(&[("user", &user)], 1)
                .with_subscriber(log.dispatch())
                .await;
            if verdict.is_allowed() && verdict.decision().is_some() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "Redis decides again within 15 s of the failover: {:?}",
                log.errors()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let recovered = killed_at.elapsed();

        // A fresh user on the promoted master gets exactly its limit.
        away_from_hour_edge(Duration::from_secs(30)).await;
        let fresh = (0..)
            .map(|i| format!("fresh-{i}"))
            .find(|user| owners.of_value(user) == promoted)
            .expect("a fresh user on the promoted master");
        let mut verdicts = Vec::new();
        for _ in 0..11 {
            verdicts.push(limiter.check(&[("user", &fresh)], 1).await);
        }
        assert!(
            verdicts.iter().all(|v| v.decision().is_some()),
            "Redis decided every request of {fresh}: {verdicts:?}"
        );
        let allowed: Vec<bool> = verdicts.iter().map(Verdict::is_allowed).collect();
        let mut expected = vec![true; 10];
        expected.push(false);
        assert_eq!(allowed, expected, "10 per hour for {fresh}, exactly");
        assert_eq!(
            masters_holding(&cluster, "failover", &fresh),
            [promoted],
            "{fresh}'s key is on the promoted master"
        );
        assert!(
            cluster.nodes[promoted].calls("fcall") > promoted_calls,
            "the promoted master decides"
        );

        stop.store(true, Ordering::Relaxed);
        let [on_victim, elsewhere] = load.join_all().await.into_iter().fold(
            [LoadStats::default(), LoadStats::default()],
            |[a, b], [c, d]| [a.merge(c), b.merge(d)],
        );
        println!(
            "failover: promoted after {failed_over:?}, Redis decides again after {recovered:?}; \
             users on the dead master: {}; users on the others: {}; errors {:?}; test took {:?}",
            on_victim.summary(killed_at),
            elsewhere.summary(killed_at),
            log.errors(),
            started.elapsed()
        );
        assert!(
            on_victim.undecided > 0,
            "requests for the dead master's keys failed while it was down"
        );
        let stats = on_victim.merge(elsewhere);
        assert!(
            stats.max_latency < Duration::from_secs(1),
            "every request answered within about the timeout ({timeout:?}): max {:?}",
            stats.max_latency
        );
    });
}

const MIGRATION_RULES: &str = r#"
domain: migration
# A request the store cannot decide is denied: no admission escapes the count.
defaults: { on_store_error: deny }
sources: { user: { header: x-user }, action: { header: x-action } }
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 2000, algorithm: fixed_window }
    descriptors:
      # Also per action, in the user's slot: a user's first request of an action creates a
      # key next to the user's (Redis answers TRYAGAIN to that while the slot moves).
      - key: action
        rate_limit: { unit: hour, requests_per_unit: 1000, algorithm: sliding_window_counter }
"#;

/// What the requests of the hot user saw.
#[derive(Default)]
struct HotCounts {
    admitted: AtomicU64,
    failed: AtomicU64,
}

impl HotCounts {
    fn count(&self, verdict: &Verdict) {
        match verdict.denial() {
            None => self.admitted.fetch_add(1, Ordering::Relaxed),
            Some(Denial::OverLimit) => 0,
            Some(_) => self.failed.fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// How many times `node` answered an error `code` (`INFO errorstats`).
fn errors_answered(cluster: &RedisCluster, node: usize, code: &str) -> u64 {
    let info = cluster.nodes[node]
        .cli(&["INFO", "errorstats"])
        .unwrap_or_default();
    let prefix = format!("errorstat_{code}:count=");
    info.lines()
        .find_map(|line| line.trim().strip_prefix(&prefix))
        .and_then(|count| count.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_slot_migrated_mid_load_keeps_counting() {
    const LIMIT: u64 = 2_000;
    let _serial = one_at_a_time();
    let cluster = Arc::new(RedisCluster::start_with_replicas(3, 1));
    let log = StoreLog::default();
    runtime().block_on(async {
        let store = RedisStore::cluster_builder(cluster.urls())
            .timeout(Duration::from_millis(500))
            .connect()
            .await
            .expect("connects to the cluster");
        let limiter = Limiter::with_store(rules(MIGRATION_RULES), store);
        away_from_hour_edge(Duration::from_secs(60)).await;
        let hot = "hot".to_owned();
        let slot = slot_of(&hot);
        let from = cluster.owner(slot);
        let to = cluster
            .masters()
            .into_iter()
            .find(|master| *master != from)
            .expect("another master");
        let to_calls = cluster.nodes[to].calls("fcall");

        // Four tasks on the hot user, each request an action of its own (a key created in
        // the slot), and two on 20 other users, until the slot has moved.
        let stop = Arc::new(AtomicBool::new(false));
        let hot_counts = Arc::new(HotCounts::default());
        let others_failed = Arc::new(AtomicU64::new(0));
        let mut load = JoinSet::new();
        for task in 0..6 {
            let (limiter, stop, hot_counts, others_failed, hot) = (
                limiter.clone(),
                stop.clone(),
                hot_counts.clone(),
                others_failed.clone(),
                hot.clone(),
            );
            load.spawn(
                async move {
                    for i in 0.. {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        if task < 4 {
                            let action = format!("{task}-{i}");
                            let request = [("user", hot.as_str()), ("action", &action)];
                            hot_counts.count(&limiter.check(&request, 1).await);
                        } else {
                            let user = format!("other-{}", i % 20);
                            let verdict = limiter.check(&[("user", &user)], 1).await;
                            if verdict.denial() == Some(Denial::StoreError) {
                                others_failed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        // A request denied locally awaits nothing: let the others run.
                        tokio::task::yield_now().await;
                    }
                }
                .with_subscriber(log.dispatch()),
            );
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while hot_counts.admitted.load(Ordering::Relaxed) < 100 {
            assert!(
                Instant::now() < deadline,
                "the hot user is admitted: {:?}",
                log.errors()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let tryagain_before =
            errors_answered(&cluster, from, "TRYAGAIN") + errors_answered(&cluster, to, "TRYAGAIN");
        let moved_before = errors_answered(&cluster, to, "MOVED");
        let before_move = hot_counts.admitted.load(Ordering::Relaxed);
        let moving = {
            let cluster = cluster.clone();
            tokio::task::spawn_blocking(move || {
                let started = Instant::now();
                cluster.move_slot(slot, to);
                started.elapsed()
            })
        };
        let moved_in = moving.await.expect("the slot moved");
        let after_move = hot_counts.admitted.load(Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        load.join_all().await;
        let under_load = hot_counts.admitted.load(Ordering::Relaxed);
        let tryagain = errors_answered(&cluster, from, "TRYAGAIN")
            + errors_answered(&cluster, to, "TRYAGAIN")
            - tryagain_before;
        // The new master answers MOVED to a call for the slot it imports that came without
        // ASKING (redis-rs sends ASKING apart from the call: another call can take it).
        let moved = errors_answered(&cluster, to, "MOVED") - moved_before;
        assert!(
            under_load <= LIMIT,
            "at most {LIMIT} admitted under load: {under_load}"
        );

        // Then the hot user goes on until its limit denies: the count carried over.
        let finishing = Instant::now();
        let mut rest = JoinSet::new();
        for task in 0..8 {
            let (limiter, hot_counts, hot) = (limiter.clone(), hot_counts.clone(), hot.clone());
            rest.spawn(
                async move {
                    let deadline = Instant::now() + Duration::from_secs(30);
                    for i in 0.. {
                        let action = format!("after-{task}-{i}");
                        let verdict = limiter
                            .check(&[("user", hot.as_str()), ("action", &action)], 1)
                            .await;
                        if verdict.denial() == Some(Denial::OverLimit) {
                            break;
                        }
                        hot_counts.count(&verdict);
                        assert!(
                            Instant::now() < deadline,
                            "the hot user reaches its limit within 30 s: {:?} admitted",
                            hot_counts.admitted
                        );
                    }
                }
                .with_subscriber(log.dispatch()),
            );
        }
        rest.join_all().await;
        let finished_in = finishing.elapsed();
        let total = hot_counts.admitted.load(Ordering::Relaxed);
        let failed = hot_counts.failed.load(Ordering::Relaxed);
        let others_failed = others_failed.load(Ordering::Relaxed);
        println!(
            "migration: slot {slot} from node {from} to node {to} in {moved_in:?}; hot user \
             admitted {before_move} before the move, {after_move} when it was done, \
             {under_load} under load, {total} in all; failed requests: {failed} of the hot \
             user's, {others_failed} of the others'; TRYAGAIN answered {tryagain}; the new \
             master answered ASKING {} times, MOVED {moved} times; errors {:?}; the rest \
             admitted in {finished_in:?}",
            cluster.nodes[to].calls("asking"),
            log.errors()
        );
        assert!(
            after_move > before_move,
            "the hot user was admitted while its slot moved"
        );
        // A failed request is denied, and may have been charged (it ran, its answer came too
        // late): only failures can make the count fall short.
        assert!(
            total <= LIMIT && total + failed >= LIMIT,
            "{LIMIT} admitted, less at most the {failed} failed requests: {total}"
        );
        assert_eq!(
            (failed, others_failed),
            (0, 0),
            "no request failed for the migration (TRYAGAIN is retried within the timeout): {:?}",
            log.errors()
        );
        assert_eq!(total, LIMIT, "the count carried over: exactly the limit");
        assert_eq!(
            masters_holding(&cluster, "migration", &hot),
            [to],
            "the hot user's state moved with its slot"
        );
        assert!(
            cluster.nodes[to].calls("fcall") > to_calls,
            "the slot's new master decides"
        );
    });
}
