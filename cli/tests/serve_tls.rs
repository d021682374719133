//! `tollgate serve`'s gRPC listener over TLS and mutual TLS, with certificates made for the
//! test, called by a real gRPC client over rustls: by flags, and from envoyproxy/ratelimit's
//! settings (`GRPC_SERVER_USE_TLS`, `GRPC_SERVER_TLS_CERT`, `GRPC_SERVER_TLS_KEY`,
//! `GRPC_CLIENT_TLS_CACERT`, `GRPC_CLIENT_TLS_SAN`).
#![cfg(feature = "server")]

mod common;
#[path = "../src/serve/proto.rs"]
mod proto;

use common::{temp_file, Served};
use proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use proto::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use proto::envoy::service::ratelimit::v3::RateLimitRequest;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use std::path::{Path, PathBuf};
use tempfile::TempDir;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

const RULES: &str = "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 2 }\n";

/// A CA, the server's certificate (for `localhost`), and two clients' (`client.example`,
/// and one naming something else), as PEM files in a directory of their own.
struct Pki {
    directory: TempDir,
}

impl Pki {
    fn new() -> Pki {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("a key"))
            .expect("a CA");
        let write = |name: &str, text: &str| {
            std::fs::write(directory.path().join(name), text).expect("written")
        };
        write("ca.pem", &ca.pem());
        for (name, san) in [
            ("server", "localhost"),
            ("client", "client.example"),
            ("stranger", "stranger.example"),
        ] {
            let key = KeyPair::generate().expect("a key");
            let params = CertificateParams::new(vec![san.to_owned()]).expect("parameters");
            let cert = params.signed_by(&key, &ca).expect("signed");
            write(&format!("{name}.pem"), &cert.pem());
            write(&format!("{name}.key"), &key.serialize_pem());
        }
        Pki { directory }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.directory.path().join(name)
    }

    fn text(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).expect("readable")
    }

    /// A client trusting the CA, showing `who`'s certificate when given.
    async fn client(
        &self,
        addr: &str,
        who: Option<&str>,
    ) -> Result<RateLimitServiceClient<Channel>, tonic::transport::Error> {
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(self.text("ca.pem")))
            .domain_name("localhost");
        if let Some(who) = who {
            tls = tls.identity(Identity::from_pem(
                self.text(&format!("{who}.pem")),
                self.text(&format!("{who}.key")),
            ));
        }
        let channel = Endpoint::from_shared(format!("https://{addr}"))
            .expect("an endpoint")
            .tls_config(tls)?
            .connect()
            .await?;
        Ok(RateLimitServiceClient::new(channel))
    }
}

fn call() -> RateLimitRequest {
    RateLimitRequest {
        domain: "edge".to_owned(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "user".to_owned(),
                value: "ann".to_owned(),
            }],
            ..RateLimitDescriptor::default()
        }],
        hits_addend: 0,
    }
}

/// Whether a call by `client` is answered.
async fn answered(
    client: Result<RateLimitServiceClient<Channel>, tonic::transport::Error>,
) -> Result<Code, String> {
    let mut client = client.map_err(|error| format!("connect: {error}"))?;
    let answer = client
        .should_rate_limit(call())
        .await
        .map_err(|status| format!("{status:?}"))?;
    Ok(answer.into_inner().overall_code())
}

fn arg(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

#[tokio::test]
async fn grpc_over_tls_answers_and_plaintext_does_not() {
    let pki = Pki::new();
    let rules = temp_file(RULES, ".yaml");
    let (cert, key) = (pki.path("server.pem"), pki.path("server.key"));
    let served = Served::start(
        rules.path(),
        &["--tls-cert", arg(&cert), "--tls-key", arg(&key)],
    );
    assert_eq!(
        answered(pki.client(&served.grpc, None).await).await,
        Ok(Code::Ok)
    );
    let plaintext = async {
        let channel = Endpoint::from_shared(format!("http://{}", served.grpc))
            .expect("an endpoint")
            .connect()
            .await?;
        Ok::<_, tonic::transport::Error>(RateLimitServiceClient::new(channel))
    };
    assert!(
        answered(plaintext.await).await.is_err(),
        "plaintext is refused"
    );
}

#[tokio::test]
async fn mutual_tls_asks_for_a_client_certificate_naming_the_client() {
    let pki = Pki::new();
    let rules = temp_file(RULES, ".yaml");
    let (cert, key, ca) = (
        pki.path("server.pem"),
        pki.path("server.key"),
        pki.path("ca.pem"),
    );
    let served = Served::start(
        rules.path(),
        &[
            "--tls-cert",
            arg(&cert),
            "--tls-key",
            arg(&key),
            "--tls-client-ca",
            arg(&ca),
            "--tls-client-san",
            "client.example",
        ],
    );
    assert_eq!(
        answered(pki.client(&served.grpc, Some("client")).await).await,
        Ok(Code::Ok)
    );
    assert!(
        answered(pki.client(&served.grpc, None).await)
            .await
            .is_err(),
        "no certificate"
    );
    let stranger = answered(pki.client(&served.grpc, Some("stranger")).await).await;
    let refused = stranger.expect_err("another name");
    assert!(
        refused.contains("Unauthenticated") && refused.contains("client.example"),
        "{refused}"
    );
}

/// As envoyproxy/ratelimit's container is told, from its settings alone.
#[tokio::test]
async fn upstream_settings_serve_grpc_over_mutual_tls() {
    let pki = Pki::new();
    let root = tempfile::tempdir().expect("a temporary directory");
    let config = root.path().join("ratelimit/config");
    std::fs::create_dir_all(&config).expect("a directory");
    std::fs::write(config.join("edge.yaml"), RULES).expect("written");
    let (cert, key, ca) = (
        pki.path("server.pem"),
        pki.path("server.key"),
        pki.path("ca.pem"),
    );
    let served = Served::start_from_env(
        &[
            ("RUNTIME_ROOT", arg(root.path())),
            ("RUNTIME_SUBDIRECTORY", "ratelimit"),
            ("BACKEND_TYPE", "memory"),
            ("USE_STATSD", "false"),
            ("GRPC_HOST", "127.0.0.1"),
            ("GRPC_PORT", "0"),
            ("HOST", "127.0.0.1"),
            ("PORT", "0"),
            ("GRPC_SERVER_USE_TLS", "true"),
            ("GRPC_SERVER_TLS_CERT", arg(&cert)),
            ("GRPC_SERVER_TLS_KEY", arg(&key)),
            ("GRPC_CLIENT_TLS_CACERT", arg(&ca)),
            ("GRPC_CLIENT_TLS_SAN", "client.example"),
        ],
        &[],
    );
    assert_eq!(
        answered(pki.client(&served.grpc, Some("client")).await).await,
        Ok(Code::Ok)
    );
    assert!(answered(pki.client(&served.grpc, None).await)
        .await
        .is_err());
}
