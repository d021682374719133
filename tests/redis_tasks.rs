//! The Redis store's background tasks against a real `redis-server`: those a store starts
//! end when its last clone is dropped, and stop calling Redis.
#![cfg(feature = "redis")]

mod common;

use common::redis_server::RedisServer;
use common::runtime;
use std::time::{Duration, Instant};
use tollgate::algorithm::{Algorithm, Quota};
use tollgate::store::{Acquisition, LimitCheck, RedisStore, SlotCheck, Store};

const EVERY: Duration = Duration::from_millis(100);

/// A store with its local-first sync and its lease renewal running, dropped: both tasks end
/// (the runtime has no task left: not the store's, nor its connection's), and its
/// connection to Redis closes.
#[test]
fn a_dropped_store_ends_its_tasks() {
    let server = RedisServer::start();
    let runtime = runtime();
    let metrics = runtime.metrics();
    let store = runtime.block_on(async {
        let store = RedisStore::builder(server.url())
            .timeout(Duration::from_secs(2))
            .connect()
            .await
            .expect("connects");
        let quota = Quota::new(1_000_000, Duration::from_secs(3_600)).unwrap();
        let local_first = LimitCheck {
            sync_every: Some(EVERY),
            ..LimitCheck::new("tasks", b"client", Algorithm::FixedWindow, &quota)
        };
        let Acquisition::Ready(decided) = store.acquire(&[local_first]) else {
            panic!("a local-first limit is decided without waiting");
        };
        assert!(decided.expect("decided")[0].allowed);
        let slot = SlotCheck::new("tasks", b"client", b"client", 1, Duration::from_secs(1));
        let taking = store.take_slots(&[slot]).expect("the store keeps slots");
        let (_, leases) = taking.await.expect("Redis answers").into_parts();
        drop(leases);
        store
    });
    let syncing = server.calls("fcall");
    wait_until(|| server.calls("fcall") >= syncing + 3, "the store syncs");

    drop(store);
    wait_until(|| metrics.num_alive_tasks() == 0, "the store's tasks end");
    wait_until(|| clients(&server) == Some(1), "Redis sees only redis-cli");
}

/// How many clients `server` has connected, counting the `redis-cli` that asks.
fn clients(server: &RedisServer) -> Option<u64> {
    let info = server.cli(&["INFO", "clients"])?;
    info.lines()
        .find_map(|line| line.trim().strip_prefix("connected_clients:"))?
        .parse()
        .ok()
}

/// Polls `done` against a generous deadline.
fn wait_until(done: impl Fn() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}
