//! The gRPC service: `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`.

use super::proto::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use super::proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use super::readiness::Readiness;
use super::rls::{should_rate_limit, Answering};
use super::store::Backing;
use tonic::{Request, Response, Status};

/// Envoy's rate limit service, deciding with the service's domains once it is
/// [ready](Readiness); `UNAVAILABLE`, with the reason, before.
pub(crate) struct RlsService<St: Backing> {
    readiness: Readiness<St>,
    answering: Answering,
}

impl<St: Backing> RlsService<St> {
    /// The service, deciding once `readiness` has its domains, answering as `answering`
    /// says.
    pub(crate) fn new(readiness: Readiness<St>, answering: Answering) -> Self {
        RlsService {
            readiness,
            answering,
        }
    }
}

#[tonic::async_trait]
impl<St: Backing> RateLimitService for RlsService<St> {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let domains = self.readiness.domains().map_err(Status::unavailable)?;
        let answer = should_rate_limit(domains, request.get_ref(), &self.answering).await?;
        Ok(Response::new(answer))
    }
}
