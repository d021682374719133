//! Envoy's rate limit service API: deciding the descriptors of a `ShouldRateLimit` call, as
//! [`tollgate serve`](crate::guide::service) does, for a service of your own.
//!
//! A gateway (Envoy's `ratelimit` filter) sends a call of descriptors, each a list of
//! entries; rules compiled with [`KeySources::Given`](crate::rules::KeySources::Given) take
//! any key from them. [`Limiter::check_descriptors`](crate::Limiter::check_descriptors)
//! decides a call all or nothing, and answers a [`CallVerdict`]: the verdict on the call,
//! and each descriptor's limit's decision. A descriptor may bring its own quota
//! ([`LimitOverride`]).
//!
//! ```
//! use tollgate::envoy::Descriptor;
//! use tollgate::rules::{KeySources, Rules};
//! use tollgate::Limiter;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let rules = Rules::from_yaml_with(r#"
//! domain: edge
//! descriptors:
//!   - key: tenant
//!     rate_limit: { unit: minute, requests_per_unit: 1 }
//! "#, KeySources::Given)?;
//! let limiter = Limiter::new(rules);
//! let call = [Descriptor { entries: &[("tenant", "acme")], cost: 1, limit: None }];
//! let first = limiter.check_descriptors(&call).await;
//! let reached = first.descriptors()[0].as_ref().expect("a limit");
//! assert_eq!(first.limit_of(reached).map(|limit| limit.descriptor()), Some("tenant"));
//! assert!(!limiter.check_descriptors(&call).await.verdict().is_allowed());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

pub use crate::limiter::{CallVerdict, Descriptor};
pub use crate::rules::limit_override::LimitOverride;
