//! Requests that wait for a busy connection go to Redis together, in one call that decides
//! each as its own call would, against real `redis-server` processes.
#![cfg(feature = "redis")]

mod common;

use common::redis_server::RedisServer;
use common::runtime;
use common::windows::away_from_hour_edge;
use redis::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::task::JoinSet;
use tollgate::clock::ManualClock;
use tollgate::rules::Rules;
use tollgate::store::RedisStore;
use tollgate::Limiter;

/// Every shape of request the library decides on its own: a lone fixed window (one
/// integer), a lone token bucket, a lone log (a sorted set), a lone GCRA (the generic
/// function), and two limits at once.
const SHAPES: &str = r#"
domain: batches
defaults:
  on_store_error: deny
sources:
  user: { header: x-user }
  tenant: { header: x-tenant }
  plan: { header: x-plan }
  session: { header: x-session }
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 25 }
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: 25, algorithm: token_bucket }
  - key: plan
    rate_limit: { unit: hour, requests_per_unit: 25, algorithm: gcra }
  - key: session
    rate_limit: { unit: hour, requests_per_unit: 25, algorithm: sliding_window_log }
"#;

const LIMIT: usize = 25;
const ATTEMPTS_PER_CLIENT: usize = 60;
const CLIENTS_PER_SHAPE: usize = 6;
const TASKS: usize = 64;

/// The requests of the run: for each client of each shape, 60 attempts, in an order that
/// mixes the shapes.
fn requests() -> Vec<Vec<(&'static str, String)>> {
    let mut requests = Vec::new();
    for _ in 0..ATTEMPTS_PER_CLIENT {
        for client in 0..CLIENTS_PER_SHAPE {
            requests.push(vec![("user", format!("u{client}"))]);
            requests.push(vec![("tenant", format!("t{client}"))]);
            requests.push(vec![("plan", format!("p{client}"))]);
            requests.push(vec![("session", format!("s{client}"))]);
            // Two limits: a user of its own, so that each of its limits admits 25.
            requests.push(vec![
                ("user", format!("pair-u{client}")),
                ("plan", format!("pair-p{client}")),
            ]);
        }
    }
    requests
}

/// Sends every request of [`requests`] from 64 tasks at once; how many each request's
/// descriptors (joined) saw admitted.
async fn admitted_per_client(limiter: &Limiter<RedisStore>) -> BTreeMap<String, usize> {
    let requests = requests();
    let mut tasks = JoinSet::new();
    for task in 0..TASKS {
        let limiter = limiter.clone();
        let mine: Vec<_> = requests.iter().skip(task).step_by(TASKS).cloned().collect();
        tasks.spawn(async move {
            let mut admitted = Vec::new();
            for request in mine {
                let descriptors: Vec<(&str, &str)> =
                    request.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let name: Vec<&str> = request.iter().map(|(_, v)| v.as_str()).collect();
                let verdict = limiter.check(&descriptors, 1).await;
                admitted.push((name.join("+"), verdict.is_allowed()));
            }
            admitted
        });
    }
    let mut counts = BTreeMap::new();
    for (name, allowed) in tasks.join_all().await.into_iter().flatten() {
        *counts.entry(name).or_insert(0) += usize::from(allowed);
    }
    counts
}

/// Runs every shape from 64 tasks on `store`: each client is admitted exactly its limit
/// (a store error is a denial here, so a failed batch shows), in fewer calls than requests.
fn each_request_is_decided_as_alone(server: &RedisServer, store: RedisStore) {
    runtime().block_on(async {
        let limiter = Limiter::with_store(Rules::from_yaml(SHAPES).expect("rules"), store);
        away_from_hour_edge(Duration::from_secs(30)).await;
        let calls_before = server.calls("fcall");
        let counts = admitted_per_client(&limiter).await;
        let calls = server.calls("fcall") - calls_before;
        let requests = requests().len();
        assert_eq!(counts.len(), 5 * CLIENTS_PER_SHAPE);
        for (client, admitted) in &counts {
            assert_eq!(*admitted, LIMIT, "{client}: {ATTEMPTS_PER_CLIENT} attempts");
        }
        assert!(
            calls < requests as u64,
            "requests waiting for the connection went together: {calls} calls for {requests}"
        );
    });
}

#[test]
fn requests_that_wait_for_a_busy_connection_are_decided_together_each_as_alone() {
    let server = RedisServer::start();
    let store = runtime()
        .block_on(
            RedisStore::builder(server.url())
                .timeout(Duration::from_secs(5))
                .over_limit_cache(false)
                .connect(),
        )
        .expect("connects");
    each_request_is_decided_as_alone(&server, store);
}

#[test]
fn batches_take_each_requests_time_from_a_test_clock() {
    let server = RedisServer::start();
    let store = runtime()
        .block_on(
            RedisStore::builder(server.url())
                .clock(ManualClock::new())
                .timeout(Duration::from_secs(5))
                .over_limit_cache(false)
                .connect(),
        )
        .expect("connects");
    each_request_is_decided_as_alone(&server, store);
}

/// The name Redis knows the store's `acquire_batch` function by (its library's name carries
/// a hash of its code).
fn batch_function(server: &RedisServer) -> String {
    let listing = server.cli(&["FUNCTION", "LIST"]).expect("FUNCTION LIST");
    listing
        .lines()
        .map(str::trim)
        .find(|line| line.starts_with("tollgate_") && line.ends_with("_acquire_batch"))
        .unwrap_or_else(|| panic!("the store's batch function in {listing}"))
        .to_owned()
}

#[test]
fn a_request_that_fails_in_a_batch_fails_no_other() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = RedisStore::builder(server.url())
            .connect()
            .await
            .expect("connects: the library is loaded");
        drop(store);
    });
    let function = batch_function(&server);
    let mut connection = server.connection();
    // Requests as the store sends them, each its function, its numbers of keys and of
    // arguments after now, now and those arguments: a lone fixed window (function 2: period,
    // limit, cost, ticks per ms), a token bucket whose limit is not a number (function 3:
    // period, limit, burst, cost, ticks per ms), a function the library does not have, a
    // fixed window short of an argument, a log (function 4: period, limit, cost, ticks per
    // ms), and the fixed window again.
    let answers: Vec<Value> = redis::cmd("FCALL")
        .arg(&function)
        .arg(6)
        .arg(&["window", "bucket", "other", "window", "log", "window"])
        .arg(&["2", "1", "4", "", "3600000000", "10", "1", "1000"])
        .arg(&["3", "1", "5", "", "3600000000", "ten", "10", "1", "1000"])
        .arg(&["9", "1", "1", "", "1"])
        .arg(&["2", "1", "3", "", "3600000000", "10", "1"])
        .arg(&["4", "1", "4", "", "3600000000", "10", "3", "1000"])
        .arg(&["2", "1", "4", "", "3600000000", "10", "1", "1000"])
        .query(&mut connection)
        .expect("the batch answers");
    assert_eq!(answers.len(), 6, "{answers:?}");
    let error = |answer: &Value| match answer {
        Value::BulkString(text) => String::from_utf8_lossy(text).into_owned(),
        other => panic!("an error's text: {other:?}"),
    };
    // A fixed window answers `until_next * scale + count`, scale = 2 * limit + 2.
    let count = |answer: &Value| match answer {
        Value::Int(n) => n % 22,
        other => panic!("a fixed window's answer: {other:?}"),
    };
    assert_eq!(count(&answers[0]), 1);
    assert!(
        error(&answers[1]).contains("arithmetic"),
        "the failed request answers its error: {:?}",
        answers[1]
    );
    assert!(
        error(&answers[2]).contains("no function 9"),
        "{:?}",
        answers[2]
    );
    assert!(
        error(&answers[3]).contains("3 arguments"),
        "{:?}",
        answers[3]
    );
    assert_eq!(
        answers[4],
        Value::Array(vec![
            Value::Int(7),
            Value::Int(3_600_000_000),
            Value::Int(0)
        ]),
        "a log of 3 requests: 7 left, the oldest leaves in an hour"
    );
    assert_eq!(
        count(&answers[5]),
        2,
        "decided after the failures, on its state, the short request not charged"
    );
}
