//! Envoy's rate limit service, `envoy.service.ratelimit.v3`: prost messages, a tonic server
//! and a tonic client, generated from `proto/envoy/service/ratelimit/v3/rls.proto`, with the
//! messages' serde impls in proto3 JSON (`POST /json`).
//!
//! `build.rs` generates the code at build time, with no `protoc`: `protox` compiles the
//! vendored protos (`proto/`, see its README for their sources), `tonic-prost-build` writes
//! the messages and the service and `pbjson-build` their `Serialize` and `Deserialize` impls,
//! each package in two files of `OUT_DIR`, `<package>.rs` and `<package>.serde.rs`, which the
//! module of that package includes. Only the types that the service reaches are generated:
//! the request and response, `RateLimitDescriptor`, `RateLimitUnit` and `HeaderValue`. The
//! well-known types (`Duration`, `Struct`, `UInt64Value`, ...) are `pbjson-types`, with their
//! own serde impls; the `validate` and `udpa` annotations are options, which the generated
//! code does not read.
//!
//! The file has no path into the rest of the crate, so integration tests and benches include
//! it with `#[path = "../src/serve/proto.rs"] mod proto;` (`tests/serve.rs` calls the
//! service with the generated client).

// The protos' comments are reStructuredText, which clippy reads as badly indented Markdown.
#![allow(clippy::doc_overindented_list_items, clippy::doc_lazy_continuation)]

/// The code generated for the proto package named `$package`: its messages, enums and
/// services, then their serde impls.
macro_rules! package {
    ($package:literal) => {
        include!(concat!(env!("OUT_DIR"), "/", $package, ".rs"));
        include!(concat!(env!("OUT_DIR"), "/", $package, ".serde.rs"));
    };
}

/// `envoy`: one module per proto package, as prost names them.
pub mod envoy {
    /// `envoy.config`.
    pub mod config {
        /// `envoy.config.core`.
        pub mod core {
            /// `envoy.config.core.v3`: `HeaderValue`.
            pub mod v3 {
                package!("envoy.config.core.v3");
            }
        }
    }

    /// `envoy.extensions`.
    pub mod extensions {
        /// `envoy.extensions.common`.
        pub mod common {
            /// `envoy.extensions.common.ratelimit`.
            pub mod ratelimit {
                /// `envoy.extensions.common.ratelimit.v3`: `RateLimitDescriptor` and, in
                /// `rate_limit_descriptor`, its `Entry` and `RateLimitOverride`.
                pub mod v3 {
                    package!("envoy.extensions.common.ratelimit.v3");
                }
            }
        }
    }

    /// `envoy.type`.
    pub mod r#type {
        /// `envoy.type.v3`: `RateLimitUnit`.
        pub mod v3 {
            package!("envoy.r#type.v3");
        }
    }

    /// `envoy.service`.
    pub mod service {
        /// `envoy.service.ratelimit`.
        pub mod ratelimit {
            /// `envoy.service.ratelimit.v3`: `RateLimitRequest`, `RateLimitResponse` (its nested
            /// types in `rate_limit_response`: `Code`, `DescriptorStatus`, `RateLimit`, `Quota`),
            /// the server (`rate_limit_service_server::{RateLimitService,
            /// RateLimitServiceServer}`) and the client (`rate_limit_service_client::
            /// RateLimitServiceClient`, generic over its transport: give it a
            /// `tonic::transport::Channel`).
            pub mod v3 {
                package!("envoy.service.ratelimit.v3");
            }
        }
    }
}
