//! The answer when the server records no peer address but the rules need one.

use super::grpc;
use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Response, StatusCode};

/// A loud `500` (gRPC: `INTERNAL`) whose message `fix` says how to fix the server.
pub(crate) fn missing_peer_addr(grpc: bool, fix: &str) -> Response<Bytes> {
    if grpc {
        return grpc::status(grpc::INTERNAL, fix, 0);
    }
    let mut response = Response::new(Bytes::from(fix.to_owned()));
    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
