//! An axum server on a loopback port and a hyper client to talk to it.

use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::net::SocketAddr;

/// Serves `router` with connect info (the client address) on a fresh loopback port.
pub async fn serve(router: Router) -> SocketAddr {
    let listener = bind().await;
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });
    addr
}

/// Serves `router` on a fresh loopback port without connect info, as a server set up
/// without `into_make_service_with_connect_info` does.
pub async fn serve_without_connect_info(router: Router) -> SocketAddr {
    let listener = bind().await;
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

async fn bind() -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind")
}

/// A response, read whole.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    /// The header `name`, if present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The header `name` as a number; panics when it is missing or not a number.
    pub fn number(&self, name: &str) -> u64 {
        self.header(name)
            .unwrap_or_else(|| panic!("missing header {name}"))
            .parse()
            .unwrap_or_else(|_| panic!("header {name} is not a number"))
    }
}

/// Sends `GET path` with `headers` and reads the whole response.
pub async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Reply {
    request(addr, http::Method::GET, path, headers).await
}

/// Sends a body-less `method path` request with `headers` and reads the whole response.
pub async fn request(
    addr: SocketAddr,
    method: http::Method,
    path: &str,
    headers: &[(&str, &str)],
) -> Reply {
    let headers: Vec<(&str, &[u8])> = headers
        .iter()
        .map(|(name, value)| (*name, value.as_bytes()))
        .collect();
    send(addr, method, path, &headers).await
}

/// Sends a body-less `method path` request whose header values may be any bytes (not only
/// UTF-8, as a hostile client sends) and reads the whole response.
pub async fn send(
    addr: SocketAddr,
    method: http::Method,
    path: &str,
    headers: &[(&str, &[u8])],
) -> Reply {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut request = http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (name, value) in headers {
        request = request.header(*name, HeaderValue::from_bytes(value).expect("header value"));
    }
    let response = client
        .request(request.body(Empty::new()).expect("request"))
        .await
        .expect("response");
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}
