//! The Redis store over TLS (`rediss://`), against real `redis-server` processes serving TLS
//! only, with certificates made at test time.
#![cfg(feature = "redis")]

mod common;

use common::demo::DemoServer;
use common::redis_server::{RedisCluster, RedisServer};
use common::runtime;
use common::tls_certs::TestCertificates;
use std::time::Duration;
use tollgate::rules::Rules;
use tollgate::store::{RedisStore, RedisStoreBuilder, StoreError};
use tollgate::Limiter;

/// One limit of 5 an hour per `user`, failing closed: only Redis admits.
const FIVE_AN_HOUR: &str = "domain: tls\ndefaults: { on_store_error: deny }\nsources: { user: { header: x-user } }\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n";

fn five_an_hour() -> Rules {
    Rules::from_yaml(FIVE_AN_HOUR).expect("valid rules")
}

/// `builder`, with a generous timeout (a TLS handshake on a loaded test machine), connected.
async fn connect(builder: RedisStoreBuilder) -> Result<RedisStore, StoreError> {
    builder.timeout(Duration::from_secs(2)).connect().await
}

/// Asserts that 5 checks for `user` are admitted and the 6th refused, each decided by Redis
/// (the default `on_store_error: allow` would admit without a decision).
async fn five_then_refused(limiter: &Limiter<RedisStore>, user: &str) {
    let mut admitted = Vec::new();
    for _ in 0..6 {
        let verdict = limiter.check(&[("user", user)], 1).await;
        assert!(
            verdict.decision().is_some(),
            "decided by Redis: {verdict:?}"
        );
        admitted.push(verdict.is_allowed());
    }
    assert_eq!(admitted, [true, true, true, true, true, false], "{user}");
}

#[test]
fn decisions_over_tls_are_exact() {
    let certificates = TestCertificates::new();
    let server = RedisServer::start_tls(certificates.server(false));
    assert!(server.url().starts_with("rediss://"));
    runtime().block_on(async {
        let store = connect(RedisStore::builder(server.url()).tls_ca(&certificates.ca))
            .await
            .expect("connects over TLS");
        let limiter = Limiter::with_store(five_an_hour(), store);
        five_then_refused(&limiter, "alice").await;
        five_then_refused(&limiter, "bob").await;
    });
    assert!(server.calls("fcall") >= 12, "Redis decided over TLS");
}

#[test]
fn mutual_tls_needs_the_client_certificate() {
    let certificates = TestCertificates::new();
    let server = RedisServer::start_tls(certificates.server(true));
    runtime().block_on(async {
        let without = connect(RedisStore::builder(server.url()).tls_ca(&certificates.ca))
            .await
            .expect_err("the server asks for a client certificate");
        let message = without.to_string();
        assert!(
            message.contains("cannot connect to Redis at `rediss://127.0.0.1")
                && message.to_lowercase().contains("certificate"),
            "says the connection failed for want of a certificate: {message}"
        );

        let store = connect(
            RedisStore::builder(server.url())
                .tls_ca(&certificates.ca)
                .tls_client_cert(&certificates.client_cert, &certificates.client_key),
        )
        .await
        .expect("connects with the client certificate");
        five_then_refused(&Limiter::with_store(five_an_hour(), store), "carol").await;
    });
}

#[test]
fn a_server_certificate_from_another_ca_is_refused() {
    let certificates = TestCertificates::new();
    let server = RedisServer::start_tls(certificates.server(false));
    runtime().block_on(async {
        let error = connect(RedisStore::builder(server.url()).tls_ca(&certificates.other_ca))
            .await
            .expect_err("the server's certificate is not signed by the trusted CA");
        let message = error.to_string();
        assert!(
            message.contains("UnknownIssuer") || message.contains("unknown issuer"),
            "says whom it did not trust: {message}"
        );
    });
}

#[test]
fn tls_files_that_cannot_be_used_fail_connect_with_their_names() {
    let certificates = TestCertificates::new();
    let missing = certificates.dir().join("missing-ca.pem");
    runtime().block_on(async {
        // Files are read before anything connects: no server is needed.
        let url = "rediss://127.0.0.1:1";
        let error = connect(RedisStore::builder(url).tls_ca(&missing))
            .await
            .expect_err("no such file")
            .to_string();
        assert!(
            error.contains(&format!("CA certificate `{}`", missing.display())),
            "{error}"
        );

        let error = connect(
            RedisStore::builder(url)
                .tls_ca(&certificates.ca)
                // A certificate where the key should be.
                .tls_client_cert(&certificates.client_cert, &certificates.client_cert),
        )
        .await
        .expect_err("not a key")
        .to_string();
        assert!(
            error.contains(&format!(
                "client key `{}` is not a PEM client key",
                certificates.client_cert.display()
            )),
            "{error}"
        );

        let error = connect(RedisStore::builder("redis://127.0.0.1:1").tls_ca(&certificates.ca))
            .await
            .expect_err("TLS files for a plain URL")
            .to_string();
        assert!(
            error.contains("`redis://127.0.0.1:1` is not a `rediss://` URL"),
            "{error}"
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_reaches_redis_over_mutual_tls_from_its_environment() {
    let certificates = TestCertificates::new();
    let server = RedisServer::start_tls(certificates.server(true));
    let path = |path: &std::path::Path| path.display().to_string();
    let (ca, cert, key) = (
        path(&certificates.ca),
        path(&certificates.client_cert),
        path(&certificates.client_key),
    );
    let demo = DemoServer::start_with(
        FIVE_AN_HOUR,
        &[
            ("TOLLGATE_REDIS_URL", &server.url()),
            ("TOLLGATE_REDIS_CA", &ca),
            ("TOLLGATE_REDIS_CERT", &cert),
            ("TOLLGATE_REDIS_KEY", &key),
        ],
    );
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let reply = common::server::get(demo.addr, "/", &[("x-user", "erin")]).await;
        statuses.push(reply.status.as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429], "{}", demo.log());
    assert!(server.calls("fcall") >= 6, "Redis decided, over TLS");
}

#[test]
fn decisions_on_a_cluster_over_mutual_tls_are_exact() {
    let certificates = TestCertificates::new();
    let cluster = RedisCluster::start_tls(3, &certificates.server(true));
    let urls = cluster.urls();
    assert!(urls.iter().all(|url| url.starts_with("rediss://")));
    runtime().block_on(async {
        let store = connect(
            RedisStore::cluster_builder(urls)
                .tls_ca(&certificates.ca)
                .tls_client_cert(&certificates.client_cert, &certificates.client_key),
        )
        .await
        .expect("connects to every node over TLS");
        let limiter = Limiter::with_store(five_an_hour(), store);
        // Users spread over the three masters.
        for user in 0..12 {
            five_then_refused(&limiter, &format!("user-{user}")).await;
        }
    });
    let deciding = cluster
        .nodes
        .iter()
        .filter(|node| node.calls("fcall") > 0)
        .count();
    assert_eq!(deciding, 3, "every master decided some users, over TLS");
}
