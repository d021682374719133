//! The gRPC listener over TLS, and mutual TLS: envoyproxy/ratelimit's
//! `GRPC_SERVER_USE_TLS`, `GRPC_SERVER_TLS_CERT`, `GRPC_SERVER_TLS_KEY`,
//! `GRPC_CLIENT_TLS_CACERT` and `GRPC_CLIENT_TLS_SAN` (rustls, through tonic).

use std::path::{Path, PathBuf};
use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use tonic::{Request, Status};

/// How the gRPC listener speaks TLS.
#[derive(Debug, Clone)]
pub(crate) struct GrpcTls {
    /// Its certificate chain (PEM).
    pub(crate) cert: PathBuf,
    /// Its private key (PEM).
    pub(crate) key: PathBuf,
    /// The CA a client's certificate must be signed by (PEM): with it, a client without
    /// one is refused (mutual TLS).
    pub(crate) client_ca: Option<PathBuf>,
    /// A name a client's certificate must hold among its subject alternative names.
    pub(crate) client_san: Option<String>,
}

impl GrpcTls {
    /// The listener's TLS configuration, its files read.
    ///
    /// # Errors
    ///
    /// A file that cannot be read, naming it.
    pub(crate) fn server_config(&self) -> Result<ServerTlsConfig, String> {
        let identity = Identity::from_pem(read(&self.cert)?, read(&self.key)?);
        let mut config = ServerTlsConfig::new().identity(identity);
        if let Some(ca) = &self.client_ca {
            config = config.client_ca_root(Certificate::from_pem(read(ca)?));
        }
        Ok(config)
    }
}

/// The bytes of `path`, or why not.
fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|error| format!("cannot read {}: {error}", path.display()))
}

/// Refuses a call whose client certificate does not name `san` among its subject
/// alternative names (DNS names, URIs, email addresses or IP addresses): a gRPC
/// interceptor.
///
/// # Errors
///
/// `UNAUTHENTICATED`, saying why.
pub(crate) fn require_san(request: Request<()>, san: &str) -> Result<Request<()>, Status> {
    let certs = request
        .peer_certs()
        .ok_or_else(|| Status::unauthenticated("a client certificate is required"))?;
    let first = certs
        .first()
        .ok_or_else(|| Status::unauthenticated("a client certificate is required"))?;
    if names(first.as_ref()).iter().any(|name| name == san) {
        Ok(request)
    } else {
        Err(Status::unauthenticated(format!(
            "the client certificate does not name {san}"
        )))
    }
}

/// The subject alternative names of the certificate `der`.
fn names(der: &[u8]) -> Vec<String> {
    use x509_parser::extensions::GeneralName;
    let Ok((_, certificate)) = x509_parser::parse_x509_certificate(der) else {
        return Vec::new();
    };
    let Ok(Some(alternatives)) = certificate.subject_alternative_name() else {
        return Vec::new();
    };
    alternatives
        .value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(name) | GeneralName::URI(name) | GeneralName::RFC822Name(name) => {
                Some((*name).to_owned())
            }
            GeneralName::IPAddress(bytes) => match bytes.len() {
                4 => <[u8; 4]>::try_from(*bytes)
                    .ok()
                    .map(|ip| std::net::IpAddr::from(ip).to_string()),
                16 => <[u8; 16]>::try_from(*bytes)
                    .ok()
                    .map(|ip| std::net::IpAddr::from(ip).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}
