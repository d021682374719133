//! An axum server on a loopback port and a hyper client to talk to it.

use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::net::SocketAddr;

/// Serves `router` with connect info (the client address) on a fresh loopback port.
pub async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
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

/// A response, read whole.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
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
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut request = http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
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
