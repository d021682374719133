//! What a simulation replays: requests at instants, from a trace file or a synthetic
//! pattern.

use http::Method;
use std::net::IpAddr;

/// One request of the traffic a simulation replays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TraceRequest {
    /// When it arrived, in nanoseconds since the Unix epoch.
    pub(crate) at: u64,
    pub(crate) method: Method,
    /// The request target: the path and the query, as in `/search?q=rust`.
    pub(crate) target: String,
    /// The client's address: the socket peer the server saw.
    pub(crate) ip: IpAddr,
    /// The request's headers, in order: (name, value).
    pub(crate) headers: Vec<(String, String)>,
    /// How long it ran, from its arrival to the end of its response, in nanoseconds, when
    /// the trace says (`duration_ms`, nginx's `$request_time`): what the slots of its
    /// concurrency limits are held for.
    pub(crate) duration: Option<u64>,
    /// The response's status, when the trace says: what `count_when` limits count by.
    pub(crate) status: Option<u16>,
    /// The response's headers the trace gives: what `settle` limits settle from.
    pub(crate) response_headers: Vec<(String, String)>,
}
