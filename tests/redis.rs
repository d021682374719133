//! The Redis store against real `redis-server` processes that the tests start on free ports.
#![cfg(feature = "redis")]

mod common;

use common::redis_server::RedisServer;
use std::time::Duration;
use tollgate::clock::ManualClock;
use tollgate::store::RedisStore;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

#[test]
fn reference_suite_passes_on_redis_with_the_same_decisions_as_memory() {
    let server = RedisServer::start();
    let runtime = runtime();
    common::reference::run_reference_suite(|clock: ManualClock| {
        runtime
            .block_on(
                RedisStore::builder(server.url())
                    .clock(clock)
                    .over_limit_cache(false)
                    .timeout(Duration::from_secs(2))
                    .connect(),
            )
            .expect("connects")
    });
    assert!(
        server.calls("evalsha") > 30,
        "the decisions came from Redis"
    );
}
