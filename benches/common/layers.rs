//! The limiting layers the HTTP benches put in front of one route, keyed by the peer address
//! (shared by `benches/layer.rs` and `examples/bench_server.rs`).

use axum::body::Body;
use std::time::Duration;
use tollgate::algorithm::Algorithm;
use tollgate::rules::{DescriptorSpec, LimitSpec, Rules, Unit};
use tollgate::RateLimitLayer;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::GovernorLayer;

/// tower_governor's layer as the benches build it.
pub type Governor = GovernorLayer<
    tower_governor::key_extractor::PeerIpKeyExtractor,
    governor::middleware::NoOpMiddleware<governor::clock::QuantaInstant>,
    Body,
>;

/// tower_governor's layer with its `use_headers` option: the layer of [`Governor`] that also
/// sends `x-ratelimit-limit` and `x-ratelimit-remaining` on admitted responses.
pub type GovernorWithHeaders = GovernorLayer<
    tower_governor::key_extractor::PeerIpKeyExtractor,
    governor::middleware::StateInformationMiddleware,
    Body,
>;

/// The per-second limit of tollgate's layer when nothing is to be limited.
pub const UNLIMITED_PER_SECOND: u64 = 1_000_000_000;

/// tollgate with one per-IP token bucket: [`UNLIMITED_PER_SECOND`] per second (nothing is
/// limited), or, when `limited`, 1 per hour (every request but each address's first gets 429).
pub fn tollgate(limited: bool) -> RateLimitLayer {
    RateLimitLayer::from_rules(tollgate_rules(limited))
}

/// The rules of [`tollgate`].
pub fn tollgate_rules(limited: bool) -> Rules {
    let limit = if limited {
        LimitSpec::per(1, Unit::Hour)
    } else {
        LimitSpec::per(UNLIMITED_PER_SECOND, Unit::Second)
    };
    Rules::builder("bench")
        .descriptor(
            DescriptorSpec::key("remote_address")
                .rate_limit(limit.algorithm(Algorithm::TokenBucket)),
        )
        .build()
        .expect("valid bench rules")
}

/// tollgate with one per-IP concurrency limit of 1,000 requests in flight: nothing is
/// limited, each request takes and gives back its client's slot.
pub fn tollgate_concurrency() -> RateLimitLayer {
    let rules = Rules::builder("bench")
        .descriptor(DescriptorSpec::key("remote_address").concurrency(1_000))
        .build()
        .expect("valid bench rules");
    RateLimitLayer::from_rules(rules)
}

/// tower_governor keyed by peer IP: one cell per nanosecond with a burst of `u32::MAX`
/// (nothing is limited), or, when `limited`, one cell per hour with a burst of 1.
pub fn governor(limited: bool) -> Governor {
    let config = governor_config(limited)
        .finish()
        .expect("a non-zero period and burst");
    GovernorLayer::new(config)
}

/// [`governor`] with nothing limited, sending the same two headers as tollgate on every
/// admitted response (tower_governor's `use_headers`): the like-for-like comparison with
/// [`tollgate`], which always sends them.
pub fn governor_with_headers() -> GovernorWithHeaders {
    let config = governor_config(false)
        .use_headers()
        .finish()
        .expect("a non-zero period and burst");
    GovernorLayer::new(config)
}

/// The configuration of [`governor`], before it is finished.
fn governor_config(
    limited: bool,
) -> GovernorConfigBuilder<
    tower_governor::key_extractor::PeerIpKeyExtractor,
    governor::middleware::NoOpMiddleware<governor::clock::QuantaInstant>,
> {
    let (period, burst) = if limited {
        (Duration::from_secs(3600), 1)
    } else {
        (Duration::from_nanos(1), u32::MAX)
    };
    let mut config = GovernorConfigBuilder::default();
    config.period(period).burst_size(burst);
    config
}
