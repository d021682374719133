//! Certificates for the TLS tests, made at test time: a CA, a server certificate for
//! 127.0.0.1 and a client certificate, both signed by the CA, and a second CA that signed
//! neither; written as PEM files in a temporary directory, removed when dropped.

use super::redis_server::ServerTls;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

/// The PEM files of a test PKI.
pub struct TestCertificates {
    dir: tempfile::TempDir,
    /// The CA that signed the server's and the client's certificates.
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A CA that signed neither.
    pub other_ca: PathBuf,
}

impl TestCertificates {
    /// Makes and writes them.
    pub fn new() -> TestCertificates {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let write = |name: &str, pem: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).expect("a PEM file written");
            path
        };
        let (ca_pem, ca) = certificate_authority("tollgate test CA");
        let (other_ca_pem, _) = certificate_authority("another CA");

        let mut server = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        server
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        server
            .distinguished_name
            .push(DnType::CommonName, "redis-server");
        server.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            // Redis presents it to the other servers too (replication, sentinels).
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let server_key = KeyPair::generate().expect("a key");
        let server_cert = server.signed_by(&server_key, &ca).expect("signed");

        let mut client = CertificateParams::new(Vec::<String>::new()).expect("params");
        client
            .distinguished_name
            .push(DnType::CommonName, "tollgate test client");
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_key = KeyPair::generate().expect("a key");
        let client_cert = client.signed_by(&client_key, &ca).expect("signed");

        TestCertificates {
            ca: write("ca.pem", ca_pem),
            server_cert: write("server.pem", server_cert.pem()),
            server_key: write("server.key", server_key.serialize_pem()),
            client_cert: write("client.pem", client_cert.pem()),
            client_key: write("client.key", client_key.serialize_pem()),
            other_ca: write("other-ca.pem", other_ca_pem),
            dir,
        }
    }

    /// What a `redis-server` takes to serve TLS with these certificates, asking clients for
    /// one signed by the CA when `auth_clients`.
    pub fn server(&self, auth_clients: bool) -> ServerTls {
        ServerTls {
            cert: self.server_cert.clone(),
            key: self.server_key.clone(),
            ca: self.ca.clone(),
            auth_clients,
        }
    }

    /// The directory that holds the files.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// A self-signed CA named `name`: its PEM, and what signs with it.
fn certificate_authority(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().expect("a key");
    let pem = params.self_signed(&key).expect("self-signed").pem();
    (pem, Issuer::new(params, key))
}
