//! The gRPC service: `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`.

use super::proto::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use super::proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use super::rls::should_rate_limit;
use tollgate::store::Store;
use tollgate::Limiter;
use tonic::{Request, Response, Status};

/// Envoy's rate limit service, deciding with a [`Limiter`].
pub(crate) struct RlsService<St: Store> {
    limiter: Limiter<St>,
}

impl<St: Store> RlsService<St> {
    pub(crate) fn new(limiter: Limiter<St>) -> Self {
        RlsService { limiter }
    }
}

#[tonic::async_trait]
impl<St: Store> RateLimitService for RlsService<St> {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let answer = should_rate_limit(&self.limiter, request.get_ref()).await?;
        Ok(Response::new(answer))
    }
}
