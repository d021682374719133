//! envoyproxy/ratelimit's integration tests (`test/integration/integration_test.go`),
//! ported: `tollgate serve` started as upstream's container is, from upstream's settings in
//! the environment alone, on upstream's runtime directory (vendored under `upstream/`, at
//! commit f2fb157) and a real Redis, called as those tests call it. Each asserts upstream's
//! answer (`upstream/CATALOGUE.md`, section 2); where tollgate differs by design (a refused
//! call charges none of its descriptors), the assertion says so. With them, the one case of
//! `test/config/config_test.go` that needs a call: a descriptor's own limit.
#![cfg(feature = "server")]

#[path = "common/calls.rs"]
mod calls;
mod common;
#[path = "../src/serve/proto.rs"]
mod proto;
#[path = "../../tests/common/redis_server.rs"]
#[allow(dead_code)]
mod redis_server;
#[path = "common/statsd.rs"]
mod statsd;
#[path = "../../tests/common/tls_certs.rs"]
#[allow(dead_code)]
mod tls_certs;

use calls::{ask, descriptor};
use common::Served;
use proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use proto::envoy::r#type::v3::RateLimitUnit;
use proto::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use proto::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use proto::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use redis_server::RedisServer;
use statsd::StatsdServer;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tls_certs::TestCertificates;
use tonic::transport::Channel;

/// Upstream's runtime directory: `current/ratelimit/config/` holds `basic.yaml`,
/// `another.yaml` and `share_threshold.yaml`; `current/ratelimit/reload.yaml` waits to be
/// copied in.
fn runtime() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/upstream/test/integration/runtime")
}

/// `tollgate serve` as upstream's tests configure their service (`defaultSettings` and
/// `makeSimpleRedisSettings`): the runtime at `root`, Redis `redis` over TCP, statsd off;
/// listening on free loopback ports. And a client of it.
async fn serve(root: &Path, redis: &RedisServer) -> (Served, RateLimitServiceClient<Channel>) {
    serve_with(root, redis, &[]).await
}

/// [`serve`], with `extra` settings.
async fn serve_with(
    root: &Path,
    redis: &RedisServer,
    extra: &[(&str, &str)],
) -> (Served, RateLimitServiceClient<Channel>) {
    let root = root.join("current");
    let redis_url = format!("127.0.0.1:{}", redis.port());
    let mut settings = vec![
        ("RUNTIME_ROOT", root.to_str().expect("a UTF-8 path")),
        ("RUNTIME_SUBDIRECTORY", "ratelimit"),
        ("RUNTIME_APPDIRECTORY", "config"),
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("REDIS_URL", &redis_url),
        ("BACKEND_TYPE", "redis"),
        ("USE_STATSD", "false"),
        ("GRPC_HOST", "127.0.0.1"),
        ("GRPC_PORT", "0"),
        ("HOST", "127.0.0.1"),
        ("PORT", "0"),
    ];
    settings.extend_from_slice(extra);
    let served = Served::start_from_env(&settings, &[]);
    let client = calls::client(&served.grpc).await;
    (served, client)
}

/// Upstream's `common.NewRateLimitRequest`: `domain`, a descriptor of each entry list,
/// `hits_addend` 1.
fn request(domain: &str, descriptors: &[&[(&str, &str)]]) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_owned(),
        descriptors: descriptors
            .iter()
            .map(|entries| descriptor(entries))
            .collect(),
        hits_addend: 1,
    }
}

/// Upstream's `newDescriptorStatus`, its `duration_until_reset` taken from the answer (as
/// upstream's tests take it), after checking it is whole seconds.
fn status(
    code: Code,
    limit: Option<(u32, Unit)>,
    remaining: u32,
    answered: &DescriptorStatus,
) -> DescriptorStatus {
    let duration_until_reset = limit.and(answered.duration_until_reset);
    if let Some(duration) = &duration_until_reset {
        assert_eq!(duration.nanos, 0, "whole seconds: {answered:?}");
        assert!(duration.seconds > 0, "{answered:?}");
    }
    DescriptorStatus {
        code: code.into(),
        current_limit: limit.map(|(requests_per_unit, unit)| RateLimit {
            requests_per_unit,
            unit: unit.into(),
            ..RateLimit::default()
        }),
        limit_remaining: remaining,
        duration_until_reset,
        ..DescriptorStatus::default()
    }
}

/// Asserts `answer` is `overall` with `expected` statuses, and nothing else (upstream
/// compares whole answers: no headers, no metadata).
fn assert_answer(
    answer: &RateLimitResponse,
    overall: Code,
    expected: &[DescriptorStatus],
    what: &str,
) {
    let expected = RateLimitResponse {
        overall_code: overall.into(),
        statuses: expected.to_vec(),
        ..RateLimitResponse::default()
    };
    assert_eq!(answer, &expected, "{what}");
}

/// Waits, if need be, until the hour has more than a minute left, and the minute more
/// than 20 s: the limits count in fixed windows, and a test's calls must fall in one.
async fn within_windows() {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    let (into_hour, into_minute) = (now % 3_600_000, now % 60_000);
    let wait = if into_hour > 3_540_000 {
        3_600_000 - into_hour
    } else if into_minute > 40_000 {
        60_000 - into_minute
    } else {
        return;
    };
    let wait = u64::try_from(wait).expect("under an hour") + 100;
    tokio::time::sleep(Duration::from_millis(wait)).await;
}

/// testBasicBaseConfig's variants (upstream's subtests of TestBasicConfig).
#[derive(Clone, Copy)]
struct Variant {
    /// `LOCAL_CACHE_SIZE_IN_BYTES=1000`: the calls name the `*_local` descriptors.
    local_cache: bool,
    /// `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true`.
    stop_when_over: bool,
    /// `CACHE_KEY_PREFIX`, if set.
    prefix: Option<&'static str>,
}

const PLAIN: Variant = Variant {
    local_cache: false,
    stop_when_over: false,
    prefix: None,
};

/// WithoutPerSecondRedis.
#[tokio::test]
async fn basic_config() {
    basic_base_config(PLAIN).await;
}

/// WithoutPerSecondRedisWithLocalCache: the over-limit cache variant.
#[tokio::test]
async fn basic_config_with_local_cache() {
    let variant = Variant {
        local_cache: true,
        ..PLAIN
    };
    basic_base_config(variant).await;
}

/// WithoutPerSecondRedisWithstopCacheKeyIncrementWhenOverlimitConfig.
#[tokio::test]
async fn basic_config_stopping_increments_when_over() {
    let variant = Variant {
        stop_when_over: true,
        ..PLAIN
    };
    basic_base_config(variant).await;
}

/// WithoutPerSecondRedisWithLocalCacheAndstopCacheKeyIncrementWhenOverlimitConfig.
#[tokio::test]
async fn basic_config_with_local_cache_stopping_increments_when_over() {
    let variant = Variant {
        local_cache: true,
        stop_when_over: true,
        ..PLAIN
    };
    basic_base_config(variant).await;
}

/// WithoutPerSecondRedisWithCachePrefix: every key in Redis starts with the prefix.
#[tokio::test]
async fn basic_config_with_cache_prefix() {
    let variant = Variant {
        prefix: Some("prefix:"),
        ..PLAIN
    };
    let redis = basic_base_config(variant).await;
    let keys = redis.cli(&["--scan"]).expect("redis-cli answers");
    assert!(!keys.trim().is_empty(), "no key in Redis");
    for key in keys.lines() {
        assert!(key.starts_with("prefix:"), "{key} in {keys}");
    }
}

/// testBasicBaseConfig, without the per-second Redis (a setting tollgate does not take), in
/// `variant`: an unknown domain, a limit per second, one per minute counted past its limit,
/// two in one call, and a day's reset counting down; and statsd's counts of them. Returns
/// the Redis it ran on.
async fn basic_base_config(variant: Variant) -> RedisServer {
    let redis = RedisServer::start();
    let mut statsd = StatsdServer::start();
    let mut settings = statsd.upstream_settings().to_vec();
    if variant.local_cache {
        settings.push(("LOCAL_CACHE_SIZE_IN_BYTES", "1000"));
    }
    if variant.stop_when_over {
        settings.push(("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true"));
    }
    if let Some(prefix) = variant.prefix {
        settings.push(("CACHE_KEY_PREFIX", prefix));
    }
    // Upstream's getCacheKey.
    let key = |name: &str| {
        if variant.local_cache {
            format!("{name}_local")
        } else {
            name.to_owned()
        }
    };
    within_windows().await;
    let (_served, mut client) = serve_with(&runtime(), &redis, &settings).await;

    let answer = ask(&mut client, request("foo", &[&[("hello", "world")]])).await;
    let unknown = status(Code::Ok, None, 0, &answer.statuses[0]);
    assert_answer(&answer, Code::Ok, &[unknown], "an unknown domain");

    let answer = ask(&mut client, request("basic", &[&[(&key("key1"), "foo")]])).await;
    let first = status(Code::Ok, Some((50, Unit::Second)), 49, &answer.statuses[0]);
    assert_answer(&answer, Code::Ok, &[first], "basic key1");

    let random = format!(
        "{}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let (key2, key3, key4) = (key("key2"), key("key3"), key("key4"));
    for i in 0..25u32 {
        let answer = ask(&mut client, request("another", &[&[(&key2, &random)]])).await;
        let (code, remaining) = if i < 20 {
            (Code::Ok, 20 - (i + 1))
        } else {
            (Code::OverLimit, 0)
        };
        let expected = status(
            code,
            Some((20, Unit::Minute)),
            remaining,
            &answer.statuses[0],
        );
        assert_answer(&answer, code, &[expected], &format!("key2, call {i}"));
    }

    let random = format!("{}-{}", random, 2);
    for i in 0..15u32 {
        let call = request("another", &[&[(&key2, &random)], &[(&key3, &random)]]);
        let answer = ask(&mut client, call).await;
        let over = i >= 10;
        // Upstream charges key2 on every call (its remaining 20 - (i + 1)) unless told to
        // stop when over; tollgate, all or nothing, charges none of a refused call's
        // descriptors: key2 stays at 10 from the eleventh call, upstream's answer when it
        // stops.
        let key2_remaining = if over { 10 } else { 20 - (i + 1) };
        let (code, key3_remaining) = if over {
            (Code::OverLimit, 0)
        } else {
            (Code::Ok, 10 - (i + 1))
        };
        let expected = [
            status(
                Code::Ok,
                Some((20, Unit::Minute)),
                key2_remaining,
                &answer.statuses[0],
            ),
            status(
                code,
                Some((10, Unit::Hour)),
                key3_remaining,
                &answer.statuses[1],
            ),
        ];
        assert_answer(
            &answer,
            code,
            &expected,
            &format!("key2 and key3, call {i}"),
        );
    }

    let day = |answer: &RateLimitResponse| {
        answer.statuses[0]
            .duration_until_reset
            .as_ref()
            .expect("a reset")
            .seconds
    };
    let first = ask(&mut client, request("another", &[&[(&key4, "durTest")]])).await;
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let second = ask(&mut client, request("another", &[&[(&key4, "durTest")]])).await;
    assert!(
        day(&second) < day(&first),
        "{} then {}",
        day(&first),
        day(&second)
    );

    // Upstream's counters after the last call, each hit counted as upstream counts it.
    let counters = [
        (format!("basic.{}.total_hits", key("key1")), 1),
        (format!("another.{key2}.total_hits"), 40),
        (format!("another.{key2}.over_limit"), 5),
        (format!("another.{key3}.total_hits"), 15),
        (format!("another.{key3}.over_limit"), 5),
        (format!("another.{key4}.total_hits"), 2),
    ];
    for (counter, count) in counters {
        let name = format!("ratelimit.service.rate_limit.{counter}");
        assert_eq!(statsd.wait_for(&name, count), count, "{name}");
    }
    redis
}

/// TestBasicTLSConfig's settings: Redis over mutual TLS (`REDIS_TLS`, its CA, a client
/// certificate), a `redis-server` serving TLS only and asking for the client's certificate.
#[tokio::test]
async fn redis_over_mutual_tls() {
    let certificates = TestCertificates::new();
    let redis = RedisServer::start_tls(certificates.server(true));
    let path = |path: &Path| path.to_str().expect("a UTF-8 path").to_owned();
    let (ca, cert, key) = (
        path(&certificates.ca),
        path(&certificates.client_cert),
        path(&certificates.client_key),
    );
    let tls = [
        ("REDIS_TLS", "true"),
        ("REDIS_TLS_CACERT", ca.as_str()),
        ("REDIS_TLS_CLIENT_CERT", cert.as_str()),
        ("REDIS_TLS_CLIENT_KEY", key.as_str()),
    ];
    within_windows().await;
    let (_served, mut client) = serve_with(&runtime(), &redis, &tls).await;
    let call = || request("basic", &[&[("one_per_minute", "x")]]);
    for (code, what) in [(Code::Ok, "the first"), (Code::OverLimit, "the second")] {
        let answer = ask(&mut client, call()).await;
        let expected = status(code, Some((1, Unit::Minute)), 0, &answer.statuses[0]);
        assert_answer(&answer, code, &[expected], what);
    }
    assert!(redis.calls("fcall") >= 1, "decided by Redis, over TLS");
}

/// config_test.go's TestConfigLimitOverride, served (it needs a call): basic_config.yaml,
/// a descriptor bringing its own limit is limited by it, counted under its key whatever
/// the limit; a domain not served limits nothing, its own limit or not.
#[tokio::test]
async fn config_limit_override() {
    let root = tempfile::tempdir().expect("a temporary directory");
    let config = root.path().join("ratelimit/config");
    std::fs::create_dir_all(&config).expect("created");
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/upstream/test/config/basic_config.yaml");
    std::fs::copy(file, config.join("basic_config.yaml")).expect("copied");
    let mut statsd = StatsdServer::start();
    let mut settings = vec![
        ("RUNTIME_ROOT", root.path().to_str().expect("a UTF-8 path")),
        ("RUNTIME_SUBDIRECTORY", "ratelimit"),
        ("BACKEND_TYPE", "memory"),
        ("GRPC_HOST", "127.0.0.1"),
        ("GRPC_PORT", "0"),
        ("HOST", "127.0.0.1"),
        ("PORT", "0"),
    ];
    settings.extend(statsd.upstream_settings());
    let served = Served::start_from_env(&settings, &[]);
    let mut client = calls::client(&served.grpc).await;
    let own = |domain: &str, value: &str, requests_per_unit: u32, unit: RateLimitUnit| {
        let entries = [("key1", "value1"), ("subkey1", value)];
        let limit = RateLimitOverride {
            requests_per_unit,
            unit: unit.into(),
        };
        let descriptor = RateLimitDescriptor {
            limit: Some(limit),
            ..descriptor(&entries)
        };
        RateLimitRequest {
            domain: domain.to_owned(),
            descriptors: vec![descriptor],
            hits_addend: 1,
        }
    };

    let answer = ask(
        &mut client,
        own("foo_domain", "something", 10, RateLimitUnit::Day),
    )
    .await;
    let nothing = status(Code::Ok, None, 0, &answer.statuses[0]);
    assert_answer(&answer, Code::Ok, &[nothing], "a domain not served");

    let cases = [
        ("something", (10, RateLimitUnit::Day), (10, Unit::Day), 9),
        ("something", (42, RateLimitUnit::Hour), (42, Unit::Hour), 41),
        (
            "something_else",
            (42, RateLimitUnit::Hour),
            (42, Unit::Hour),
            41,
        ),
    ];
    for (value, (requests, unit), limit, remaining) in cases {
        let answer = ask(&mut client, own("test-domain", value, requests, unit)).await;
        let expected = status(Code::Ok, Some(limit), remaining, &answer.statuses[0]);
        assert_answer(
            &answer,
            Code::Ok,
            &[expected],
            &format!("{value}, {limit:?}"),
        );
    }
    let key = "ratelimit.service.rate_limit.test-domain.key1_value1.subkey1";
    for (value, hits) in [("something", 2), ("something_else", 1)] {
        let name = format!("{key}_{value}.total_hits");
        assert_eq!(statsd.wait_for(&name, hits), hits, "{}", statsd.heard());
    }
}

/// TestBasicConfig_ExtraTags: `EXTRA_TAGS` tags every statistic, in the names as upstream's
/// statsd client writes them.
#[tokio::test]
async fn basic_config_extra_tags() {
    let redis = RedisServer::start();
    let mut statsd = StatsdServer::start();
    let mut settings = statsd.upstream_settings().to_vec();
    settings.push(("EXTRA_TAGS", "foo:bar,a:b"));
    let (_served, mut client) = serve_with(&runtime(), &redis, &settings).await;
    let answer = ask(&mut client, request("basic", &[&[("key1", "foo")]])).await;
    assert_eq!(answer.overall_code(), Code::Ok);
    for name in [
        "ratelimit.service.rate_limit.basic.key1.total_hits.__a=b.__foo=bar",
        "ratelimit.service.config_load_success.__a=b.__foo=bar",
    ] {
        assert_eq!(statsd.wait_for(name, 1), 1, "{name}");
    }
}

/// TestShareThreshold: every file under `files/` shares one count of 10 an hour; the
/// files under `files_no_share/` each have their own.
#[tokio::test]
async fn share_threshold() {
    let redis = RedisServer::start();
    within_windows().await;
    let (_served, mut client) = serve(&runtime(), &redis).await;
    let domain = "share-threshold-test";
    for _ in 0..10 {
        ask(&mut client, request(domain, &[&[("files", "files/a.pdf")]])).await;
    }
    let answer = ask(&mut client, request(domain, &[&[("files", "files/b.csv")]])).await;
    let over = status(
        Code::OverLimit,
        Some((10, Unit::Hour)),
        0,
        &answer.statuses[0],
    );
    assert_answer(
        &answer,
        Code::OverLimit,
        &[over],
        "files/b.csv shares files/a.pdf's count",
    );
    for i in 0..10 {
        let own = format!("files_no_share/{i}-{}", std::process::id());
        let answer = ask(&mut client, request(domain, &[&[("files_no_share", &own)]])).await;
        let fresh = status(Code::Ok, Some((10, Unit::Hour)), 9, &answer.statuses[0]);
        assert_answer(&answer, Code::Ok, &[fresh], &own);
    }
}

/// Copies the directory `from` into `to`, recursively.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a directory");
    for entry in std::fs::read_dir(from).expect("readable") {
        let entry = entry.expect("an entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copied");
        }
    }
}

/// Asks `attempt` every 100 ms until it holds, for at most 20 s.
async fn poll(what: &str, mut attempt: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !attempt().await {
        assert!(Instant::now() < deadline, "after 20 s: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// testConfigReload: a file copied into the config directory puts its domain in force,
/// and removed, takes it out; the other domains serve throughout. Each load is counted
/// to statsd, as upstream counts it (`config_load_success`, `config_load_error`).
#[tokio::test]
async fn config_reload() {
    let redis = RedisServer::start();
    let mut statsd = StatsdServer::start();
    let root = tempfile::tempdir().expect("a temporary directory");
    copy_dir(&runtime(), root.path());
    let ratelimit = root.path().join("current/ratelimit");
    let counted = statsd.upstream_settings();
    let (_served, mut client) = serve_with(root.path(), &redis, &counted).await;
    let success = "ratelimit.service.config_load_success";
    let error = "ratelimit.service.config_load_error";
    assert_eq!(statsd.wait_for(success, 1), 1, "loaded at start");

    let answer = ask(&mut client, request("reload", &[&[("block", "foo")]])).await;
    let nothing = status(Code::Ok, None, 0, &answer.statuses[0]);
    assert_answer(&answer, Code::Ok, &[nothing], "reload is not loaded yet");

    std::fs::copy(
        ratelimit.join("reload.yaml"),
        ratelimit.join("config/reload.yaml"),
    )
    .expect("copied");
    assert_eq!(statsd.wait_for(success, 2), 2, "loaded again");
    poll("the reload domain is in force", async || {
        let answer = ask(&mut client, request("reload", &[&[("key1", "foo")]])).await;
        answer.statuses[0].current_limit.is_some()
    })
    .await;
    let answer = ask(&mut client, request("reload", &[&[("key1", "fresh")]])).await;
    let first = status(Code::Ok, Some((50, Unit::Second)), 49, &answer.statuses[0]);
    assert_answer(&answer, Code::Ok, &[first], "reload's key1");

    // A file broken keeps its domain's rules, and leaves the others alone.
    std::fs::write(
        ratelimit.join("config/basic.yaml"),
        "domain: basic\ndescriptors: [oops\n",
    )
    .expect("written");
    assert_eq!(statsd.wait_for(error, 1), 1, "a file failed");
    let answer = ask(&mut client, request("basic", &[&[("key1", "kept")]])).await;
    let kept = status(Code::Ok, Some((50, Unit::Second)), 49, &answer.statuses[0]);
    assert_answer(&answer, Code::Ok, &[kept], "basic keeps its rules");

    std::fs::remove_file(ratelimit.join("config/reload.yaml")).expect("removed");
    // basic.yaml still fails.
    assert_eq!(statsd.wait_for(error, 2), 2, "loaded again, a file failing");
    poll("the reload domain is gone", async || {
        let answer = ask(&mut client, request("reload", &[&[("key1", "foo")]])).await;
        answer.statuses[0].current_limit.is_none()
    })
    .await;
    let answer = ask(&mut client, request("basic", &[&[("key1", "bar")]])).await;
    assert_eq!(answer.overall_code(), Code::Ok, "basic served throughout");
    assert_eq!(statsd.sum(success), 2, "{}", statsd.heard());
}

/// Two files of one domain: refused, as upstream refuses them, unless
/// `MERGE_DOMAIN_CONFIG=true`, which merges them (TestDomainMerge's files).
#[tokio::test]
async fn files_of_one_domain_merge_only_when_asked() {
    let redis = RedisServer::start();
    let root = tempfile::tempdir().expect("a temporary directory");
    let config = root.path().join("current/ratelimit/config");
    std::fs::create_dir_all(&config).expect("a directory");
    let upstream_config =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/upstream/test/config");
    for name in ["merge_domain_key1.yaml", "merge_domain_key2.yaml"] {
        std::fs::copy(upstream_config.join(name), config.join(name)).expect("copied");
    }
    let (code, _, errors) = tollgate_from_env(root.path(), &redis, &[]);
    assert_ne!(code, Some(0));
    assert!(
        errors.contains("duplicate domain `test-domain`"),
        "{errors}"
    );
    assert!(errors.contains("MERGE_DOMAIN_CONFIG"), "{errors}");

    let merging = [("MERGE_DOMAIN_CONFIG", "true")];
    let (_served, mut client) = serve_with(root.path(), &redis, &merging).await;
    for (key, requests) in [("key1", 10), ("key2", 20)] {
        let answer = ask(
            &mut client,
            request("test-domain", &[&[(key, &format!("value{}", &key[3..]))]]),
        )
        .await;
        let limit = answer.statuses[0]
            .current_limit
            .as_ref()
            .map(|l| l.requests_per_unit);
        assert_eq!(limit, Some(requests), "{key}: {answer:?}");
    }
}

/// The `tollgate serve` of [`serve`], with `extra` settings, run until it exits (within
/// 30 s, or it is killed and the test fails): its exit code, output and errors.
fn tollgate_from_env(
    root: &Path,
    redis: &RedisServer,
    extra: &[(&str, &str)],
) -> (Option<i32>, String, String) {
    use std::io::Read;
    let redis_url = format!("127.0.0.1:{}", redis.port());
    let root = root.join("current");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .arg("serve")
        .envs([
            ("RUNTIME_ROOT", root.to_str().expect("a UTF-8 path")),
            ("RUNTIME_SUBDIRECTORY", "ratelimit"),
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", &redis_url),
            ("GRPC_HOST", "127.0.0.1"),
            ("GRPC_PORT", "0"),
            ("HOST", "127.0.0.1"),
            ("PORT", "0"),
        ])
        .envs(extra.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the tollgate binary runs");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("its status") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tollgate serve still runs after 30 s with {extra:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut output = (String::new(), String::new());
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut output.0).expect("its output");
    }
    if let Some(mut err) = child.stderr.take() {
        err.read_to_string(&mut output.1).expect("its errors");
    }
    (status.code(), output.0, output.1)
}

/// A setting of upstream's that tollgate does not honour stops the start, naming it.
#[test]
fn a_setting_tollgate_does_not_honour_stops_the_start() {
    let redis = RedisServer::start();
    for (setting, value) in [
        ("USE_DOG_STATSD", "true"),
        ("BACKEND_TYPE", "memcache"),
        ("REDIS_PERSECOND", "true"),
    ] {
        let (code, _, errors) = tollgate_from_env(&runtime(), &redis, &[(setting, value)]);
        assert_ne!(code, Some(0), "{setting}");
        assert!(errors.contains(setting), "{setting}: {errors}");
    }
}

/// What no retry fixes stops the start, saying why, rather than retrying for ever: a
/// Redis CA file that is not there.
#[test]
fn a_redis_tls_file_missing_stops_the_start() {
    let redis = RedisServer::start();
    let missing = [
        ("REDIS_TLS", "true"),
        ("REDIS_TLS_CACERT", "/nonexistent/ca.pem"),
    ];
    let (code, _, errors) = tollgate_from_env(&runtime(), &redis, &missing);
    assert_ne!(code, Some(0));
    assert!(
        errors.contains("cannot use Redis at rediss://") && errors.contains("/nonexistent/ca.pem"),
        "{errors}"
    );
}

/// `REDIS_TYPE=sentinel`, upstream's form (`REDIS_URL=mymaster,host:port`): the service
/// finds the master through the sentinel; the master killed under calls, every call is
/// answered (its limit's `on_store_error` decides while there is no master), and once the
/// replica is promoted, limits are exact again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_failover_keeps_every_call_answered() {
    let mut sentinel = redis_server::RedisSentinel::start();
    let sentinel_url = sentinel.sentinel_urls()[0].clone();
    let sentinel_address = sentinel_url.trim_start_matches("redis://").to_owned();
    let redis_url = format!("{},{sentinel_address}", redis_server::SENTINEL_MASTER);
    let root = runtime().join("current");
    let served = Served::start_from_env(
        &[
            ("RUNTIME_ROOT", root.to_str().expect("a UTF-8 path")),
            ("RUNTIME_SUBDIRECTORY", "ratelimit"),
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_TYPE", "sentinel"),
            ("REDIS_URL", &redis_url),
            ("USE_STATSD", "false"),
            ("GRPC_HOST", "127.0.0.1"),
            ("GRPC_PORT", "0"),
            ("HOST", "127.0.0.1"),
            ("PORT", "0"),
        ],
        &[],
    );
    let mut client = calls::client(&served.grpc).await;
    within_windows().await;
    let exact = async |client: &mut RateLimitServiceClient<Channel>, value: &str| {
        let key3 = || request("another", &[&[("key3", value)]]);
        for call in 0..10 {
            let answer = ask(client, key3()).await;
            assert_eq!(answer.overall_code(), Code::Ok, "{value}: call {call}");
        }
        assert_eq!(
            ask(client, key3()).await.overall_code(),
            Code::OverLimit,
            "{value}"
        );
    };
    exact(&mut client, "before").await;
    let killed = sentinel.kill_master();
    let started = Instant::now();
    // Every call is answered meanwhile, `OK` with no limit by the default `on_store_error:
    // allow`, until Redis decides again: a fresh client's status has its limit.
    let mut probe = 0;
    poll("Redis decides again after the failover", async || {
        probe += 1;
        let fresh = format!("probe-{probe}");
        let answer = ask(&mut client, request("another", &[&[("key3", &fresh)]])).await;
        assert_eq!(answer.overall_code(), Code::Ok, "answered");
        answer.statuses[0].current_limit.is_some()
    })
    .await;
    println!(
        "decided again {:?} after the master was killed",
        started.elapsed()
    );
    sentinel.wait_for_failover(killed);
    exact(&mut client, "after").await;
}
