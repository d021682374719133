//! Stopping `tollgate serve` on SIGTERM or Ctrl-C (SIGINT): the signals it listens to from
//! the start, the word that tells the servers to stop accepting, and how long the calls in
//! flight have to finish.

use std::time::Duration;
use tokio::sync::watch;

/// How long the calls in flight have to finish once the service stops; then it exits
/// anyway.
pub(crate) const GRACE: Duration = Duration::from_secs(10);

/// Tells the servers to stop: each stops accepting when [`Stop::now`] is called, and
/// finishes the calls in flight.
pub(crate) struct Stop(watch::Sender<bool>);

impl Stop {
    /// Nothing asked yet.
    pub(crate) fn new() -> Stop {
        Stop(watch::Sender::new(false))
    }

    /// What a server waits for, to stop.
    pub(crate) fn request(&self) -> StopRequest {
        StopRequest(self.0.subscribe())
    }

    /// Tells every server to stop.
    pub(crate) fn now(&self) {
        self.0.send_replace(true);
    }
}

/// What a server waits for, to stop: [`Stop::now`], or the end of its [`Stop`]. Clones
/// wait for the same.
#[derive(Clone)]
pub(crate) struct StopRequest(watch::Receiver<bool>);

impl StopRequest {
    /// Completes once the server is to stop: for its graceful shutdown.
    pub(crate) async fn made(mut self) {
        // An error means the `Stop` is gone: nothing could ask later, so stop now.
        let _ = self.0.wait_for(|&stop| stop).await;
    }
}

/// The signals that stop the service. Listening replaces their default action (ending
/// the process at once) for as long as the process lives.
#[cfg(unix)]
pub(crate) struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    /// Starts listening to SIGTERM and SIGINT.
    ///
    /// # Errors
    ///
    /// When the process cannot handle signals.
    pub(crate) fn listen() -> Result<Signals, String> {
        use tokio::signal::unix::{signal, SignalKind};
        let listen = |kind: SignalKind| {
            signal(kind).map_err(|error| format!("cannot handle signals: {error}"))
        };
        Ok(Signals {
            terminate: listen(SignalKind::terminate())?,
            interrupt: listen(SignalKind::interrupt())?,
        })
    }

    /// Waits for the next SIGTERM or SIGINT: its name.
    pub(crate) async fn received(&mut self) -> &'static str {
        tokio::select! {
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.interrupt.recv() => "SIGINT",
        }
    }
}

/// The signal that stops the service: Ctrl-C (there is no SIGTERM off Unix).
#[cfg(not(unix))]
pub(crate) struct Signals;

#[cfg(not(unix))]
impl Signals {
    /// Starts listening to Ctrl-C.
    ///
    /// # Errors
    ///
    /// Never: a failure to listen shows when waiting.
    pub(crate) fn listen() -> Result<Signals, String> {
        Ok(Signals)
    }

    /// Waits for the next Ctrl-C: its name.
    pub(crate) async fn received(&mut self) -> &'static str {
        if tokio::signal::ctrl_c().await.is_err() {
            // Without a handler, nothing stops the service but the end of the process.
            std::future::pending::<()>().await;
        }
        "Ctrl-C"
    }
}
