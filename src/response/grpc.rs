//! gRPC's answers: a Trailers-Only response, its status in the headers.

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Response};
use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};

pub(crate) const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
pub(crate) const GRPC_RETRY_PUSHBACK_MS: HeaderName =
    HeaderName::from_static("grpc-retry-pushback-ms");
/// RESOURCE_EXHAUSTED.
pub(super) const RESOURCE_EXHAUSTED: HeaderValue = HeaderValue::from_static("8");
/// UNAVAILABLE: the server is busy, retry later (load shedding).
pub(super) const UNAVAILABLE: HeaderValue = HeaderValue::from_static("14");
/// INTERNAL.
pub(super) const INTERNAL: HeaderValue = HeaderValue::from_static("13");
const GRPC_CONTENT_TYPE: HeaderValue = HeaderValue::from_static("application/grpc");

/// The bytes gRPC percent-encodes in `grpc-message`: all but printable ASCII (0x20 to 0x7E),
/// and `%` itself.
const MESSAGE_ESCAPES: &AsciiSet = &CONTROLS.add(b'%');

/// Whether a request is a gRPC call (`content-type: application/grpc*`).
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// A Trailers-Only gRPC response: HTTP 200, the status and `message` in the headers, no
/// body. Its headers have room for `more` added after them.
pub(super) fn status(status: HeaderValue, message: &str, more: usize) -> Response<Bytes> {
    let mut response = Response::new(Bytes::new());
    let headers = response.headers_mut();
    headers.reserve(3 + more);
    headers.insert(CONTENT_TYPE, GRPC_CONTENT_TYPE);
    headers.insert(GRPC_STATUS, status);
    let encoded = utf8_percent_encode(message, MESSAGE_ESCAPES).to_string();
    if let Ok(message) = HeaderValue::try_from(encoded) {
        headers.insert(GRPC_MESSAGE, message);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `grpc-message` of `message`.
    fn percent_encode(message: &str) -> String {
        let response = status(INTERNAL, message, 0);
        let encoded = response.headers()[GRPC_MESSAGE].to_str().expect("ASCII");
        encoded.to_owned()
    }

    #[test]
    fn grpc_messages_are_percent_encoded() {
        assert_eq!(percent_encode("50% off, née"), "50%25 off, n%C3%A9e");
        assert_eq!(percent_encode("plain (api)"), "plain (api)");
        assert_eq!(percent_encode("tab\there~\u{7f}"), "tab%09here~%7F");
    }
}
