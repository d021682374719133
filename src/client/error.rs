//! The client layer's errors: a request held back, or the inner service's own error.

use super::Origin;
use std::error::Error;
use std::fmt;
use std::time::Duration;

/// A request that was not sent: its server announced a wait that has not passed, or (with
/// [pacing](super::RateLimitClientLayer::pace)) a quota with nothing left of it until then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    wait: Duration,
    origin: Origin,
}

impl Held {
    pub(crate) fn new(wait: Duration, origin: Origin) -> Self {
        Held { wait, origin }
    }

    /// How much longer the server asked to wait when the request was held.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// The origin that is held.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }
}

impl fmt::Display for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "request not sent: {} asked to wait {:.3}s more",
            self.origin,
            self.wait.as_secs_f64()
        )
    }
}

impl Error for Held {}

/// The error of [`RateLimitClient`](super::RateLimitClient): the request was held back, or
/// the inner service failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError<E> {
    /// The request was not sent, because its server announced a wait that has not passed.
    Held(Held),
    /// The inner service's error, unchanged.
    Service(E),
}

impl<E> ClientError<E> {
    /// The hold, if the request was held back.
    pub fn as_held(&self) -> Option<&Held> {
        match self {
            ClientError::Held(held) => Some(held),
            ClientError::Service(_) => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for ClientError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Held(held) => held.fmt(f),
            ClientError::Service(error) => error.fmt(f),
        }
    }
}

impl<E: Error + 'static> Error for ClientError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ClientError::Held(_) => None,
            ClientError::Service(error) => error.source(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_error_is_an_error_that_shows_the_hold_or_the_service_error() {
        let origin = Origin::of(&"http://a:1/".parse().unwrap(), None);
        let held: ClientError<std::io::Error> =
            ClientError::Held(Held::new(Duration::from_secs(2), origin));
        let held: &dyn Error = &held;
        assert_eq!(
            held.to_string(),
            "request not sent: http://a:1 asked to wait 2.000s more"
        );
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let failed = ClientError::Service(refused);
        assert_eq!(
            failed.to_string(),
            std::io::Error::from(std::io::ErrorKind::ConnectionRefused).to_string()
        );
        assert!(failed.as_held().is_none());
    }

    #[test]
    fn held_says_who_and_how_long() {
        let origin = Origin::of(&"http://a:1/".parse().unwrap(), None);
        let held = Held::new(Duration::from_millis(1500), origin);
        assert_eq!(
            held.to_string(),
            "request not sent: http://a:1 asked to wait 1.500s more"
        );
    }
}
