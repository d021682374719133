//! The files of a TLS connection to Redis (`rediss://`): whom to trust, and who the store is.

use crate::store::{StoreError, StoreErrorKind};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};

/// What the store was given for TLS: a CA to trust instead of the system's, and a client
/// certificate with its key (mutual TLS). Read when the store connects.
#[derive(Debug, Clone, Default)]
pub(super) struct TlsFiles {
    pub(super) ca: Option<PathBuf>,
    pub(super) client: Option<(PathBuf, PathBuf)>,
}

impl TlsFiles {
    /// Whether any file was given.
    pub(super) fn is_set(&self) -> bool {
        self.ca.is_some() || self.client.is_some()
    }

    /// The certificates as redis-rs takes them, each file read and checked: a CA file and a
    /// client certificate hold at least one certificate, a key file a private key.
    ///
    /// # Errors
    ///
    /// A file that cannot be read, or holds no PEM of its kind; the message names it.
    pub(super) fn certificates(&self) -> Result<redis::TlsCertificates, StoreError> {
        let root_cert = match &self.ca {
            Some(path) => Some(read_certificates(path, "CA certificate")?),
            None => None,
        };
        let client_tls = match &self.client {
            Some((cert, key)) => Some(redis::ClientTlsConfig {
                client_cert: read_certificates(cert, "client certificate")?,
                client_key: read_key(key)?,
            }),
            None => None,
        };
        Ok(redis::TlsCertificates {
            client_tls,
            root_cert,
        })
    }
}

/// Makes `ring` the process's rustls crypto provider, unless one is installed already: redis-rs
/// builds its TLS configurations on the process's provider, and a process that has none, or
/// whose dependencies compiled in two, has no default.
pub(super) fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may install one first: then that one is used, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// The contents of `path`, a PEM file of at least one certificate (a `what`).
fn read_certificates(path: &Path, what: &str) -> Result<Vec<u8>, StoreError> {
    let pem = read(path, what)?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| unreadable(path, what, "").with_source(error))?;
    if certificates.is_empty() {
        let why = ": no `-----BEGIN CERTIFICATE-----` block in the file";
        return Err(unreadable(path, what, why));
    }
    Ok(pem)
}

/// The contents of `path`, a PEM file holding a private key (PKCS #8, PKCS #1 or SEC 1).
fn read_key(path: &Path) -> Result<Vec<u8>, StoreError> {
    let what = "client key";
    let pem = read(path, what)?;
    PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|error| unreadable(path, what, "").with_source(error))?;
    Ok(pem)
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, StoreError> {
    std::fs::read(path).map_err(|error| {
        let message = format!("cannot read the Redis TLS {what} `{}`", path.display());
        StoreError::new(StoreErrorKind::Configuration, message).with_source(error)
    })
}

/// The error of `path`, a `what` file that holds no PEM of its kind, `why` if the PEM
/// parser did not say.
fn unreadable(path: &Path, what: &str, why: &str) -> StoreError {
    let message = format!(
        "the Redis TLS {what} `{}` is not a PEM {what}{why}",
        path.display()
    );
    StoreError::new(StoreErrorKind::Configuration, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_ca_file_is_named_in_the_error() {
        let files = TlsFiles {
            ca: Some("/nonexistent/ca.pem".into()),
            client: None,
        };
        let error = files.certificates().expect_err("no such file").to_string();
        assert!(
            error.contains("CA certificate `/nonexistent/ca.pem`"),
            "{error}"
        );
    }

    #[test]
    fn a_file_without_a_certificate_is_refused() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate\n").expect("written");
        let files = TlsFiles {
            ca: Some(path),
            client: None,
        };
        let error = files.certificates().expect_err("no PEM").to_string();
        assert!(error.contains("is not a PEM CA certificate"), "{error}");
        assert!(error.contains("BEGIN CERTIFICATE"), "{error}");
    }

    #[test]
    fn a_key_file_without_a_key_is_refused() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let cert = dir.path().join("client.pem");
        let key = dir.path().join("client.key");
        let generated =
            rcgen::generate_simple_self_signed(["client".to_owned()]).expect("a certificate");
        std::fs::write(&cert, generated.cert.pem()).expect("written");
        // A certificate where the key should be.
        std::fs::write(&key, generated.cert.pem()).expect("written");
        let files = TlsFiles {
            ca: None,
            client: Some((cert, key)),
        };
        let error = files.certificates().expect_err("no key").to_string();
        assert!(error.contains("is not a PEM client key"), "{error}");
    }
}
