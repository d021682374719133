//! envoyproxy/ratelimit's integration-test scripts (`integration-test/scripts/`, vendored
//! under `upstream/` at commit f2fb157), ported: `tollgate serve` on upstream's
//! `examples/ratelimit/config/example.yaml` as it is, called with the descriptors Envoy
//! sends for each request of each script (from upstream's `examples/envoy/proxy.yaml`: a
//! descriptor whose header is missing is not sent), each answered as upstream answers it
//! (`upstream/CATALOGUE.md`, section 3). Where tollgate differs by design, a refused call
//! charging none of its descriptors (see the guide's rate limit service chapter), the
//! assertion says so.
#![cfg(feature = "server")]

#[path = "common/calls.rs"]
mod calls;
mod common;
#[path = "../src/serve/proto.rs"]
mod proto;
#[path = "common/statsd.rs"]
mod statsd;

use common::{temp_file, Served};
use proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use proto::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use statsd::StatsdServer;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tonic::transport::Channel;

/// Upstream's example configuration, as it is.
fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/upstream/examples/ratelimit/config/example.yaml")
}

/// `tollgate serve` on upstream's example with `extra` arguments, and a client of it, once
/// the minute has room for a test's calls: the example counts in fixed windows of a
/// minute, as upstream does, and a test's calls must fall in one.
async fn serve(
    rules: &std::path::Path,
    extra: &[&str],
) -> (Served, RateLimitServiceClient<Channel>) {
    let into_minute = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis()
        % 60_000;
    if into_minute > 45_000 {
        let left = u64::try_from(60_000 - into_minute).expect("under a minute");
        tokio::time::sleep(Duration::from_millis(left + 100)).await;
    }
    let served = Served::start(rules, extra);
    let client = calls::client(&served.grpc).await;
    (served, client)
}

/// A descriptor of `entries`, its weight `hits` when given.
fn descriptor(entries: &[(&str, &str)], hits: Option<u64>) -> RateLimitDescriptor {
    RateLimitDescriptor {
        hits_addend: hits.map(Into::into),
        ..calls::descriptor(entries)
    }
}

/// Envoy's call for domain `rl` with `descriptors`.
async fn ask(
    client: &mut RateLimitServiceClient<Channel>,
    descriptors: Vec<RateLimitDescriptor>,
) -> RateLimitResponse {
    let request = RateLimitRequest {
        domain: "rl".to_owned(),
        descriptors,
        hits_addend: 0,
    };
    calls::ask(client, request).await
}

/// The headers of a request to the example proxy, as `(name, value)`.
type Headers<'a> = &'a [(&'a str, &'a str)];

/// The descriptors Envoy sends for a request with `headers` to `route` of upstream's
/// `examples/envoy/proxy.yaml`: one per `rate_limits` entry whose headers are all there.
fn route_descriptors(route: &str, headers: Headers<'_>) -> Vec<RateLimitDescriptor> {
    let actions: &[&[&str]] = match route {
        "/header" => &[&["foo"]],
        "/twoheader" => &[&["foo", "bar"], &["foo", "baz"]],
        "/fourheader" => &[&["foo", "bar"], &["source_cluster", "destination_cluster"]],
        "/fiveheader" => &[
            &["foo", "bar"],
            &["source_cluster", "destination_cluster"],
            &["category"],
        ],
        "/unspec" => &[&["unspec"]],
        other => panic!("no route {other} in the example proxy"),
    };
    let header = |name: &str| {
        headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, v)| *v)
    };
    actions
        .iter()
        .filter_map(|names| {
            let entries: Option<Vec<(&str, &str)>> = names
                .iter()
                .map(|&name| Some((name, header(name)?)))
                .collect();
            Some(descriptor(&entries?, None))
        })
        .collect()
}

/// The HTTP status Envoy answers a request to `route` with `headers`: 429 when the rate
/// limit service says `OVER_LIMIT`.
async fn curl(
    client: &mut RateLimitServiceClient<Channel>,
    route: &str,
    headers: Headers<'_>,
) -> u16 {
    let descriptors = route_descriptors(route, headers);
    if descriptors.is_empty() {
        return 200;
    }
    match ask(client, descriptors).await.overall_code() {
        Code::OverLimit => 429,
        _ => 200,
    }
}

/// simple-get.sh: `/twoheader` with `foo` and `baz` (no `bar`): only the shadow-mode
/// `foo`/`baz=shady`, which never refuses.
#[tokio::test]
async fn simple_get() {
    let (_served, mut client) = serve(&example(), &[]).await;
    let shady = [("foo", "test"), ("baz", "shady")];
    assert_eq!(curl(&mut client, "/twoheader", &shady).await, 200);
}

/// trigger-ratelimit.sh: `foo`/`baz=not-so-shady`, 3 a minute: the fourth and fifth are
/// refused.
#[tokio::test]
async fn trigger_ratelimit() {
    let (_served, mut client) = serve(&example(), &[]).await;
    let headers = [("foo", "pelle"), ("baz", "not-so-shady")];
    for expected in [200, 200, 200, 429, 429] {
        assert_eq!(curl(&mut client, "/twoheader", &headers).await, expected);
    }
}

/// trigger-shadow-mode-key.sh: `foo`/`baz=shady`, 3 a minute in shadow mode: never refused,
/// and the sixth says nothing remains.
#[tokio::test]
async fn trigger_shadow_mode_key() {
    let (_served, mut client) = serve(&example(), &[]).await;
    let headers = [("foo", "pelle"), ("baz", "shady")];
    for _ in 0..5 {
        assert_eq!(curl(&mut client, "/twoheader", &headers).await, 200);
    }
    let sixth = ask(&mut client, route_descriptors("/twoheader", &headers)).await;
    assert_eq!(sixth.overall_code(), Code::Ok);
    assert_eq!(sixth.statuses[0].code(), Code::Ok);
    assert_eq!(sixth.statuses[0].limit_remaining, 0);
}

/// value-included-in-stats-key-when-unspecified.sh: `unspec`, 2 a minute, per value, and
/// `detailed_metric`: the statsd server hears `over_limit` under a key naming the value.
#[tokio::test]
async fn value_included_in_stats_key_when_unspecified() {
    let mut statsd = StatsdServer::start();
    let (_served, mut client) = serve(&example(), &["--statsd", &statsd.address()]).await;
    let headers = [("unspec", "unspecified_value")];
    for expected in [200, 200, 429] {
        assert_eq!(curl(&mut client, "/unspec", &headers).await, expected);
    }
    let key = "ratelimit.service.rate_limit.rl.unspec_unspecified_value";
    for (counter, count) in [("total_hits", 3), ("within_limit", 2), ("over_limit", 1)] {
        let name = format!("{key}.{counter}");
        assert_eq!(statsd.wait_for(&name, count), count, "{}", statsd.heard());
    }
}

/// replaces.sh, its 22 requests in order: a limit replaced by another's `replaces` is
/// neither charged nor checked, and several can be replaced at once.
#[tokio::test]
async fn replaces() {
    let (_served, mut client) = serve(&example(), &[]).await;
    let banned = [("foo", "bkthomps"), ("bar", "banned")];
    let with = |extra: &[(&'static str, &'static str)], base: &[(&'static str, &'static str)]| {
        let mut headers = base.to_vec();
        headers.extend_from_slice(extra);
        headers
    };
    let mock = with(
        &[("source_cluster", "proxy"), ("destination_cluster", "mock")],
        &banned,
    );
    let overriding = with(
        &[
            ("source_cluster", "proxy"),
            ("destination_cluster", "override"),
        ],
        &banned,
    );
    let my_foo = [("foo", "my_foo"), ("bar", "bkthomps")];
    let bkthomps = with(
        &[
            ("source_cluster", "proxy"),
            ("destination_cluster", "bkthomps"),
        ],
        &my_foo,
    );
    let not_bkthomps = with(
        &[
            ("source_cluster", "proxy"),
            ("destination_cluster", "not_bkthomps"),
        ],
        &my_foo,
    );
    let five = with(
        &[
            ("source_cluster", "proxy"),
            ("destination_cluster", "fake"),
            ("category", "account"),
        ],
        &my_foo,
    );
    let foo_2 = [("foo", "foo_2"), ("bar", "bkthomps")];
    let foo_3 = [
        ("foo", "foo_3"),
        ("bar", "bar_3"),
        ("source_cluster", "proxy"),
        ("destination_cluster", "fake"),
    ];
    let steps: [(&str, Headers, u16); 22] = [
        ("/twoheader", &banned, 429),
        ("/fourheader", &mock, 429),
        ("/fourheader", &overriding, 200),
        ("/fourheader", &overriding, 200),
        ("/fourheader", &overriding, 429),
        ("/fourheader", &bkthomps, 200),
        ("/fourheader", &bkthomps, 200),
        ("/fourheader", &bkthomps, 429),
        ("/fourheader", &not_bkthomps, 200),
        ("/fourheader", &not_bkthomps, 429),
        ("/fourheader", &bkthomps, 429),
        ("/fiveheader", &five, 200),
        ("/fiveheader", &five, 200),
        ("/fiveheader", &five, 200),
        ("/fiveheader", &five, 200),
        ("/fiveheader", &five, 429),
        ("/twoheader", &foo_2, 200),
        ("/twoheader", &foo_2, 429),
        ("/fourheader", &foo_3, 200),
        ("/fourheader", &foo_3, 200),
        ("/fourheader", &foo_3, 429),
        ("/fiveheader", &five, 429),
    ];
    for (step, (route, headers, expected)) in steps.into_iter().enumerate() {
        let status = curl(&mut client, route, headers).await;
        assert_eq!(status, expected, "request {} to {route}", step + 1);
    }
}

/// quota.sh: `/quota` sends `service_1` (1 a minute) and `service_2` (2 a minute), both
/// quotas: a call is refused only once both are over, and a quota over its limit says so
/// in a call admitted.
#[tokio::test]
async fn quota() {
    let (_served, mut client) = serve(&example(), &[]).await;
    let services = || {
        vec![
            descriptor(&[("service", "service_1")], None),
            descriptor(&[("service", "service_2")], None),
        ]
    };
    let first = ask(&mut client, services()).await;
    assert_eq!(first.overall_code(), Code::Ok);
    let second = ask(&mut client, services()).await;
    assert_eq!(second.overall_code(), Code::Ok, "service_2 has quota left");
    assert_eq!(
        second.statuses[0].code(),
        Code::OverLimit,
        "service_1 is over"
    );
    assert_eq!(second.statuses[1].code(), Code::Ok);
    let third = ask(&mut client, services()).await;
    assert_eq!(third.overall_code(), Code::OverLimit, "both are over");
}

/// Upstream's example with `settle: { stream_done: true }` on its two services: their
/// charges, sent after the fact, are kept past the limit, as upstream keeps every charge.
fn example_with_charges_kept() -> tempfile::NamedTempFile {
    let example = std::fs::read_to_string(example()).expect("upstream's example");
    let kept = example.replace(
        "      requests_per_unit: 1\n    metadata:",
        "      requests_per_unit: 1\n      settle: { stream_done: true }\n    metadata:",
    );
    let kept = kept.replace(
        "      requests_per_unit: 2\n    metadata:",
        "      requests_per_unit: 2\n      settle: { stream_done: true }\n    metadata:",
    );
    assert_eq!(kept.matches("stream_done").count(), 2, "both services");
    temp_file(&kept, ".yaml")
}

/// token-quota.sh: `/tokenquota` checks `service_2` (2 a minute) before the request
/// (`hits_addend: 0`) and charges it 1 when the stream is done. Upstream: three requests
/// pass, the fourth is refused.
#[tokio::test]
async fn token_quota() {
    let check = || vec![descriptor(&[("service", "service_2")], Some(0))];
    let charge = || vec![descriptor(&[("service", "service_2")], Some(1))];
    // With the charges kept, as upstream keeps them: upstream's answers.
    let rules = example_with_charges_kept();
    let (_served, mut client) = serve(rules.path(), &[]).await;
    for request in 1..=4 {
        let checked = ask(&mut client, check()).await.overall_code();
        let expected = if request < 4 {
            Code::Ok
        } else {
            Code::OverLimit
        };
        assert_eq!(checked, expected, "request {request}");
        ask(&mut client, charge()).await;
    }
    // The example as it is: the third request's charge goes past the limit, so it is
    // refused and, all or nothing, counts nothing (the guide's rate limit service chapter,
    // "A check, then a charge"): the fourth passes its check.
    let (_served, mut client) = serve(&example(), &[]).await;
    for request in 1..=4 {
        let checked = ask(&mut client, check()).await.overall_code();
        assert_eq!(checked, Code::Ok, "request {request}");
        ask(&mut client, charge()).await;
    }
}

/// multiservice-tokenquota.sh: `/multiservice-tokenquota` checks both services, and Envoy
/// routes to the one the answer's dynamic metadata names (the first service whose quota
/// passed), then charges that one when the stream is done. Upstream: twice service 1, three
/// times service 2, then refused.
#[tokio::test]
async fn multiservice_token_quota() {
    let rules = example_with_charges_kept();
    let (_served, mut client) = serve(rules.path(), &["--response-dynamic-metadata"]).await;
    let checks = || {
        vec![
            descriptor(&[("service", "service_1")], Some(0)),
            descriptor(&[("service", "service_2")], Some(0)),
        ]
    };
    let expected = [
        Some("service_1"),
        Some("service_1"),
        Some("service_2"),
        Some("service_2"),
        Some("service_2"),
        None,
    ];
    for (request, expected) in expected.into_iter().enumerate() {
        let answer = ask(&mut client, checks()).await;
        let Some(service) = expected else {
            assert_eq!(answer.overall_code(), Code::OverLimit, "both over");
            break;
        };
        assert_eq!(answer.overall_code(), Code::Ok, "request {}", request + 1);
        let metadata =
            serde_json::to_value(answer.dynamic_metadata.expect("asked for")).expect("JSON");
        assert_eq!(
            metadata["metadata"]["service_with_quota"]["name"],
            service,
            "request {}: {metadata}",
            request + 1
        );
        assert_eq!(metadata["domain"], "rl");
        let charge = vec![descriptor(&[("service", service)], Some(1))];
        ask(&mut client, charge).await;
    }
}
