use http::Extensions;
use std::net::{IpAddr, SocketAddr};

/// The socket peer of a request, as servers record it in the request extensions.
///
/// tollgate reads axum's `ConnectInfo<SocketAddr>` (feature `axum`), tonic's
/// `TcpConnectInfo` (feature `tonic`), or this type, which any server can insert itself.
///
/// ```
/// use tollgate::source::PeerAddr;
///
/// let mut request = http::Request::new(());
/// request.extensions_mut().insert(PeerAddr("192.0.2.7:50000".parse().unwrap()));
/// let peer = PeerAddr::from_extensions(request.extensions()).unwrap();
/// assert_eq!(peer.ip().to_string(), "192.0.2.7");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

impl PeerAddr {
    /// The peer recorded in `extensions` by the server, if any.
    pub fn from_extensions(extensions: &Extensions) -> Option<PeerAddr> {
        if let Some(peer) = extensions.get::<PeerAddr>() {
            return Some(*peer);
        }
        #[cfg(feature = "axum")]
        if let Some(info) = extensions.get::<axum::extract::ConnectInfo<SocketAddr>>() {
            return Some(PeerAddr(info.0));
        }
        #[cfg(feature = "tonic")]
        if let Some(addr) = extensions
            .get::<tonic::transport::server::TcpConnectInfo>()
            .and_then(|info| info.remote_addr())
        {
            return Some(PeerAddr(addr));
        }
        None
    }

    /// The peer's IP address.
    pub fn ip(&self) -> IpAddr {
        self.0.ip()
    }
}
