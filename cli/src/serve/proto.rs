//! Envoy's rate limit service, `envoy.service.ratelimit.v3`: prost messages, a tonic server
//! and a tonic client, generated from `proto/envoy/service/ratelimit/v3/rls.proto`.
//!
//! `build.rs` generates the code at build time, with no `protoc`: `protox` compiles the
//! vendored protos (`proto/`, see its README for their sources) and `tonic-prost-build` writes
//! the Rust code to `OUT_DIR`. Only the types that the service reaches are generated: the
//! request and response, `RateLimitDescriptor`, `RateLimitUnit` and `HeaderValue`. The
//! well-known types are `prost-types`; the `validate` and `udpa` annotations are options, which
//! the generated code does not read.
//!
//! The modules follow the proto packages:
//!
//! - `envoy::service::ratelimit::v3`: `RateLimitRequest`, `RateLimitResponse` (its nested
//!   types in `rate_limit_response`: `Code`, `DescriptorStatus`, `RateLimit`, `Quota`), the
//!   server (`rate_limit_service_server::{RateLimitService, RateLimitServiceServer}`) and the
//!   client (`rate_limit_service_client::RateLimitServiceClient`, generic over its transport:
//!   give it a `tonic::transport::Channel`).
//! - `envoy::extensions::common::ratelimit::v3`: `RateLimitDescriptor` and, in
//!   `rate_limit_descriptor`, its `Entry` and `RateLimitOverride`.
//! - `envoy::r#type::v3::RateLimitUnit` and `envoy::config::core::v3::HeaderValue`.
//!
//! The file has no path into the rest of the crate, so integration tests and benches include
//! it with `#[path = "../src/serve/proto.rs"] mod proto;` (`tests/serve.rs` calls the
//! service with the generated client).

// The protos' comments are reStructuredText, which clippy reads as badly indented Markdown.
#![allow(clippy::doc_overindented_list_items, clippy::doc_lazy_continuation)]

include!(concat!(env!("OUT_DIR"), "/proto.rs"));
