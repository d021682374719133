//! `tollgate serve`: Envoy's rate limit service (RLS) API over gRPC.

pub(crate) mod proto;
