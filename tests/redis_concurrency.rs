//! Concurrency limits across a fleet: servers on one Redis (or one Redis Cluster) share each
//! client's slots, held as leases that their servers renew and that expire when a server
//! dies. Real servers over HTTP, real Redis processes; the killed server is the demo, a
//! process of its own.

#![cfg(all(feature = "redis", feature = "axum"))]

mod common;

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use common::demo::DemoServer;
use common::redis_server::{RedisCluster, RedisServer};
use common::server::{self, serve, Reply};
use http::StatusCode;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tollgate::rules::Rules;
use tollgate::store::RedisStore;
use tollgate::{Limiter, RateLimitLayer};

/// Two requests of a client at once across the fleet, leases of a second.
const TWO_PER_CLIENT: &str = r#"
domain: fleet
sources: { client: { header: x-client } }
descriptors:
  - key: client
    concurrency: { max_in_flight: 2, lease: 1s }
"#;

/// A server of the fleet: `/hold` waits until let go, `/` answers at once.
struct Member {
    addr: SocketAddr,
    entered: Arc<AtomicUsize>,
    gate: Arc<Semaphore>,
}

impl Member {
    /// A server behind `yaml` with its state in `store`.
    async fn start(yaml: &str, store: RedisStore) -> Member {
        let limiter = Limiter::with_store(Rules::from_yaml(yaml).expect("valid rules"), store);
        let entered = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(Semaphore::new(0));
        let router = Router::new()
            .route("/", get(|| async { "ok" }))
            .route(
                "/hold",
                get(
                    |State((entered, gate)): State<(Arc<AtomicUsize>, Arc<Semaphore>)>| async move {
                        entered.fetch_add(1, Ordering::SeqCst);
                        gate.acquire().await.expect("open").forget();
                        "released"
                    },
                ),
            )
            .with_state((Arc::clone(&entered), Arc::clone(&gate)))
            .layer(RateLimitLayer::new(limiter));
        Member {
            addr: serve(router).await,
            entered,
            gate,
        }
    }

    /// Sends `GET /hold` as `client` and waits until the handler holds it.
    async fn hold(&self, client: &'static str) -> tokio::task::JoinHandle<Reply> {
        self.hold_with(vec![("x-client", client)]).await
    }

    /// Sends `GET /hold` with `headers` and waits until the handler holds it.
    async fn hold_with(
        &self,
        headers: Vec<(&'static str, &'static str)>,
    ) -> tokio::task::JoinHandle<Reply> {
        let before = self.entered.load(Ordering::SeqCst);
        let addr = self.addr;
        let held = tokio::spawn(async move { server::get(addr, "/hold", &headers).await });
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.entered.load(Ordering::SeqCst) == before {
            assert!(Instant::now() < deadline, "the held request entered");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        held
    }

    /// `GET /` as `client`: its status.
    async fn status(&self, client: &str) -> StatusCode {
        server::get(self.addr, "/", &[("x-client", client)])
            .await
            .status
    }

    /// Lets `count` held requests go.
    fn release(&self, count: usize) {
        self.gate.add_permits(count);
    }
}

/// Polls `GET /` as `client` on `member` until it answers `expected`, against a generous
/// deadline; how long that took.
async fn until_status(member: &Member, client: &str, expected: StatusCode) -> Duration {
    let started = Instant::now();
    loop {
        let status = member.status(client).await;
        if status == expected {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{client} still answered {status}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The leases in Redis, over every key of concurrency limits.
fn leases(redis: &RedisServer) -> usize {
    let keys = redis
        .cli(&["--scan", "--pattern", "*:c"])
        .unwrap_or_default();
    keys.lines()
        .filter(|key| !key.is_empty())
        .map(|key| {
            redis
                .cli(&["ZCARD", key])
                .and_then(|n| n.trim().parse::<usize>().ok())
                .unwrap_or(0)
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_redis_share_a_clients_slots_and_renew_them() {
    let redis = RedisServer::start();
    let a = Member::start(TWO_PER_CLIENT, redis.store().await).await;
    let b = Member::start(TWO_PER_CLIENT, redis.store().await).await;
    let on_a = a.hold("alice").await;
    let on_b = b.hold("alice").await;
    assert_eq!(a.status("alice").await, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(b.status("alice").await, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(a.status("bob").await, StatusCode::OK, "each client its own");
    assert_eq!(leases(&redis), 2);

    // Held three leases long: renewed, the slots stay taken.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let refused = server::get(b.addr, "/", &[("x-client", "alice")]).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.number("x-ratelimit-limit"), 2);
    assert_eq!(refused.number("retry-after"), 1);

    a.release(1);
    assert_eq!(on_a.await.expect("joined").body, "released");
    until_status(&b, "alice", StatusCode::OK).await;
    b.release(1);
    assert_eq!(on_b.await.expect("joined").status, StatusCode::OK);
    let deadline = Instant::now() + Duration::from_secs(10);
    while leases(&redis) > 0 {
        assert!(Instant::now() < deadline, "every lease given back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_is_given_back_when_its_response_ends_not_when_its_lease_does() {
    let redis = RedisServer::start();
    // The default lease, 30 s: only a slot given back frees the client within the test.
    let rules = TWO_PER_CLIENT.replace(", lease: 1s", "");
    let a = Member::start(&rules, redis.store().await).await;
    let b = Member::start(&rules, redis.store().await).await;
    let held: Vec<_> = vec![a.hold("alice").await, a.hold("alice").await];
    assert_eq!(b.status("alice").await, StatusCode::TOO_MANY_REQUESTS);
    a.release(2);
    for held in held {
        assert_eq!(held.await.expect("joined").status, StatusCode::OK);
    }
    let freed_after = until_status(&b, "alice", StatusCode::OK).await;
    assert!(
        freed_after < Duration::from_secs(10),
        "given back, not expired: {freed_after:?}"
    );
    assert_eq!(leases(&redis), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_frees_its_slots_when_their_leases_end() {
    let redis = RedisServer::start();
    let rules = TWO_PER_CLIENT.replace("max_in_flight: 2", "max_in_flight: 1");
    let mut demo = DemoServer::start_with(&rules, &[("TOLLGATE_REDIS_URL", &redis.url())]);
    let survivor = Member::start(&rules, redis.store().await).await;
    let demo_addr = demo.addr;
    let held = tokio::spawn(async move {
        server::get(demo_addr, "/?delay_ms=10000", &[("x-client", "alice")]).await
    });
    // The demo's request holds alice's one slot, renewed past its lease.
    let deadline = Instant::now() + Duration::from_secs(10);
    while leases(&redis) == 0 {
        assert!(Instant::now() < deadline, "the demo took a lease");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        survivor.status("alice").await,
        StatusCode::TOO_MANY_REQUESTS
    );

    demo.kill();
    let _ = held.await;
    let killed = Instant::now();
    assert_eq!(
        survivor.status("alice").await,
        StatusCode::TOO_MANY_REQUESTS,
        "a killed server gives nothing back: its lease runs on"
    );
    until_status(&survivor, "alice", StatusCode::OK).await;
    let freed_after = killed.elapsed();
    assert!(
        freed_after < Duration::from_secs(5),
        "freed within a lease or so, not {freed_after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_refused_in_one_cluster_slot_gives_back_what_it_took_in_another() {
    let cluster = RedisCluster::start(3);
    // A client's slot and a team's: two hash tags, two cluster slots.
    let rules = r#"
domain: fleet
sources:
  client: { header: x-client }
  team: { header: x-team }
descriptors:
  - key: client
    concurrency: { max_in_flight: 1, lease: 1s }
  - key: team
    concurrency: { max_in_flight: 1, lease: 1s }
"#;
    let connect = || async {
        RedisStore::cluster_builder(cluster.urls())
            .connect()
            .await
            .expect("connects to the test cluster")
    };
    assert_ne!(
        cluster.key_slot("bob"),
        cluster.key_slot("red"),
        "the test needs two slots"
    );
    let a = Member::start(rules, connect().await).await;
    let b = Member::start(rules, connect().await).await;
    let held = a
        .hold_with(vec![("x-client", "alice"), ("x-team", "red")])
        .await;
    // Bob of the red team is refused by his team's slot, on another node than his own.
    let bob_red = [("x-client", "bob"), ("x-team", "red")];
    let refused = server::get(b.addr, "/", &bob_red).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    // Bob's own slot was given back: as a member of another team he is admitted, and held.
    let bob_blue = b
        .hold_with(vec![("x-client", "bob"), ("x-team", "blue")])
        .await;
    let again = server::get(a.addr, "/", &[("x-client", "bob"), ("x-team", "green")]).await;
    assert_eq!(
        again.status,
        StatusCode::TOO_MANY_REQUESTS,
        "bob holds his one slot"
    );
    a.release(1);
    b.release(1);
    assert_eq!(held.await.expect("joined").status, StatusCode::OK);
    assert_eq!(bob_blue.await.expect("joined").status, StatusCode::OK);
    let deadline = Instant::now() + Duration::from_secs(10);
    while server::get(b.addr, "/", &bob_red).await.status != StatusCode::OK {
        assert!(
            Instant::now() < deadline,
            "bob and the red team are free again"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_down_each_policy_decides_the_slot() {
    let mut redis = RedisServer::start();
    let rules = |policy: &str| {
        format!(
            r#"
domain: fleet
defaults: {{ on_store_error: {policy} }}
sources: {{ client: {{ header: x-client }} }}
descriptors:
  - key: client
    concurrency: {{ max_in_flight: 1, lease: 1s }}
"#
        )
    };
    let local = Member::start(&rules("local"), redis.store().await).await;
    let deny = Member::start(&rules("deny"), redis.store().await).await;
    let allow = Member::start(&rules("allow"), redis.store().await).await;
    redis.kill();

    let held = local.hold("alice").await;
    assert_eq!(
        local.status("alice").await,
        StatusCode::TOO_MANY_REQUESTS,
        "local: counted in this process"
    );
    local.release(1);
    assert_eq!(held.await.expect("joined").status, StatusCode::OK);

    let denied = server::get(deny.addr, "/", &[("x-client", "alice")]).await;
    assert_ne!(denied.status, StatusCode::OK, "deny: refused");
    assert!(denied.header("retry-after").is_some());

    let held = allow.hold("alice").await;
    assert_eq!(
        allow.status("alice").await,
        StatusCode::OK,
        "allow: admitted"
    );
    allow.release(1);
    assert_eq!(held.await.expect("joined").status, StatusCode::OK);
}

/// Many requests over two servers, some held and let go, some abandoned midway, many at
/// once (so that takes and releases go in batches): after them, no lease is left in Redis
/// and each client has every slot again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_many_requests_that_end_every_way_no_lease_is_left() {
    let redis = RedisServer::start();
    let rules = TWO_PER_CLIENT.replace(", lease: 1s", "");
    let members = Arc::new([
        Member::start(&rules, redis.store().await).await,
        Member::start(&rules, redis.store().await).await,
    ]);
    let releasing = {
        let members = Arc::clone(&members);
        tokio::spawn(async move {
            loop {
                members.iter().for_each(|member| member.release(1));
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    const CLIENTS: usize = 8;
    const ROUNDS: usize = 150;
    let mut tasks = tokio::task::JoinSet::new();
    for round in 0..ROUNDS {
        for client in 0..CLIENTS {
            let name: &'static str = Box::leak(format!("c{client}").into_boxed_str());
            let addr = members[(round + client) % 2].addr;
            // A fixed mix by round and client: nothing random to reproduce.
            let way = (round * 7 + client * 3) % 3;
            tasks.spawn(async move {
                let headers = [("x-client", name)];
                match way {
                    0 => drop(server::get(addr, "/", &headers).await),
                    1 => {
                        let held =
                            tokio::spawn(async move { server::get(addr, "/hold", &headers).await });
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        held.abort();
                        let _ = held.await;
                    }
                    _ => drop(server::get(addr, "/hold", &headers).await),
                }
            });
        }
        while tasks.len() > 64 {
            tasks.join_next().await;
        }
    }
    while tasks.join_next().await.is_some() {}
    releasing.abort();
    members.iter().for_each(|member| member.release(10_000));
    let deadline = Instant::now() + Duration::from_secs(15);
    while leases(&redis) > 0 {
        assert!(
            Instant::now() < deadline,
            "{} leases left (the lease is 30 s: only giving back frees them)",
            leases(&redis)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for member in members.iter() {
        member.gate.forget_permits(usize::MAX);
    }
    let [a, b] = &*members;
    for client in 0..CLIENTS {
        let name: &'static str = Box::leak(format!("c{client}").into_boxed_str());
        let held = [a.hold(name).await, b.hold(name).await];
        assert_eq!(
            a.status(name).await,
            StatusCode::TOO_MANY_REQUESTS,
            "{name}: two slots free, then full"
        );
        a.release(1);
        b.release(1);
        for held in held {
            assert_eq!(held.await.expect("joined").status, StatusCode::OK, "{name}");
        }
    }
}
