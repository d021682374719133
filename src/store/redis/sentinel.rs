//! A connection to the master that Redis Sentinel names, which follows it through failovers.
//!
//! The sentinels are asked for the master's address (and the master's `ROLE` checked) when the
//! store connects, and again whenever a call fails as a lost master does: the connection
//! drops or is refused, a call times out, or the server answers `READONLY` (it was demoted to
//! a replica). One search runs at a time, in a task on the store's runtime, until the
//! sentinels name a master that answers as one or the store is dropped (waits from 25 ms,
//! doubling, up to 200 ms between tries); meanwhile calls go to the connection in place and
//! fail as it fails, which the store's timeout, circuit breaker and `on_store_error`
//! policies handle as any outage. The new master's connection then replaces the old one for
//! every call that follows, and the circuit breaker's cooldown ends: the next call tries the
//! new master at once.

use super::breaker::Breaker;
use parking_lot::Mutex;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::sentinel::SentinelClient;
use redis::{Cmd, Pipeline, RedisError, RedisFuture, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// The first wait between two searches for the master; then doubling.
const FIRST_WAIT: Duration = Duration::from_millis(25);
/// The longest wait between two searches for the master.
const LONGEST_WAIT: Duration = Duration::from_millis(200);

/// A connection to the master named by the sentinels; clones share it.
#[derive(Clone)]
pub(super) struct SentinelConnection {
    shared: Arc<Shared>,
}

struct Shared {
    /// The master's name, as the sentinels know it.
    master: String,
    /// The connection calls go to.
    current: arc_swap::ArcSwap<Master>,
    /// Whether a search for the master runs.
    searching: AtomicBool,
    /// The sentinels' client, taken by the search that runs (it keeps its connections to
    /// the sentinels from one search to the next).
    client: Mutex<Option<SentinelClient>>,
    /// The timeouts of a connection to the master.
    config: redis::AsyncConnectionConfig,
    /// The longest one search may take: asking the sentinels, checking and connecting.
    search_timeout: Duration,
    /// The store's circuit breaker: a new master ends its cooldown.
    breaker: Arc<Breaker>,
    /// Where searches run: the runtime that connected the store.
    runtime: tokio::runtime::Handle,
}

/// A master the sentinels named, and the connection to it.
struct Master {
    connection: MultiplexedConnection,
    address: String,
}

impl SentinelConnection {
    /// Asks the sentinels of `client` for the master, checks it is one, and connects to it
    /// with `config`; each step within `search_timeout`. Later searches run on `runtime`.
    ///
    /// # Errors
    ///
    /// When no sentinel names a master that answers as one, or it cannot be reached.
    pub(super) async fn connect(
        mut client: SentinelClient,
        master: String,
        config: redis::AsyncConnectionConfig,
        search_timeout: Duration,
        breaker: Arc<Breaker>,
        runtime: tokio::runtime::Handle,
    ) -> Result<Self, RedisError> {
        let found = find(&mut client, &config, search_timeout).await?;
        tracing::debug!(master, address = %found.address, "connected to the master the sentinels name");
        Ok(SentinelConnection {
            shared: Arc::new(Shared {
                master,
                current: arc_swap::ArcSwap::from_pointee(found),
                searching: AtomicBool::new(false),
                client: Mutex::new(Some(client)),
                config,
                search_timeout,
                breaker,
                runtime,
            }),
        })
    }

    /// After `error` (a lost master's) from a call on `used`: starts a search for the master,
    /// unless one runs or `used` was replaced already.
    fn search_unless_replaced(&self, used: &Arc<Master>, error: &RedisError) {
        let shared = &self.shared;
        if !Arc::ptr_eq(&shared.current.load(), used) {
            return;
        }
        if shared.searching.swap(true, Ordering::AcqRel) {
            return;
        }
        // Replaced between the check and the flag: nothing to search for.
        if !Arc::ptr_eq(&shared.current.load(), used) {
            shared.searching.store(false, Ordering::Release);
            return;
        }
        // A call given up (a timeout) is often only a busy master: not worth a warning.
        if error.is_timeout() {
            tracing::debug!(master = %shared.master, address = %used.address, %error, "a call to the Redis master timed out: asking the sentinels for it");
        } else {
            tracing::warn!(master = %shared.master, address = %used.address, %error, "lost the Redis master: asking the sentinels for it");
        }
        shared.runtime.spawn(search(Arc::downgrade(shared)));
    }
}

/// Searches for the master until found (then it replaces the connection in place) or the
/// store is dropped.
async fn search(shared: Weak<Shared>) {
    let mut wait = FIRST_WAIT;
    loop {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        // Taken for the search and put back after: no lock is held across an await.
        let taken = shared.client.lock().take();
        let Some(mut client) = taken else {
            shared.searching.store(false, Ordering::Release);
            return;
        };
        let found = find(&mut client, &shared.config, shared.search_timeout).await;
        *shared.client.lock() = Some(client);
        match found {
            Ok(master) => {
                tracing::info!(master = %shared.master, address = %master.address, "on the Redis master the sentinels name");
                shared.current.store(Arc::new(master));
                shared.searching.store(false, Ordering::Release);
                // Calls paused by the breaker need not wait out its cooldown.
                shared.breaker.probe_now();
                return;
            }
            Err(error) => {
                tracing::debug!(master = %shared.master, %error, "no Redis master yet");
            }
        }
        drop(shared);
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(LONGEST_WAIT);
    }
}

/// The master the sentinels of `client` name (its role checked), connected with `config`.
async fn find(
    client: &mut SentinelClient,
    config: &redis::AsyncConnectionConfig,
    timeout: Duration,
) -> Result<Master, RedisError> {
    let timed_out = || {
        RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {timeout:?}"),
        ))
    };
    let master = tokio::time::timeout(timeout, client.async_get_client())
        .await
        .map_err(|_| timed_out())??;
    let address = master.get_connection_info().addr().to_string();
    let connection = tokio::time::timeout(
        timeout,
        master.get_multiplexed_async_connection_with_config(config),
    )
    .await
    .map_err(|_| timed_out())??;
    Ok(Master {
        connection,
        address,
    })
}

/// Whether `error` is how a call fails when its server is no longer the master: gone,
/// silent, or demoted to a replica.
fn is_master_lost(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_timeout()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_unrecoverable_error()
        || error.code() == Some("READONLY")
        || error.code() == Some("MASTERDOWN")
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let call = Call::new(self);
            let result = call.connection().req_packed_command(cmd).await;
            call.ended(result)
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let call = Call::new(self);
            let result = call
                .connection()
                .req_packed_commands(pipeline, offset, count)
                .await;
            call.ended(result)
        })
    }

    fn get_db(&self) -> i64 {
        self.shared.current.load().connection.get_db()
    }
}

/// A call on the master's connection in place. One that fails as a lost master fails, or is
/// given up before it ends (the store's timeout cancels a call that a silent master never
/// answers), starts a search for the master.
struct Call<'a> {
    owner: &'a SentinelConnection,
    used: Arc<Master>,
    ended: bool,
}

impl<'a> Call<'a> {
    fn new(owner: &'a SentinelConnection) -> Self {
        Call {
            owner,
            used: owner.shared.current.load_full(),
            ended: false,
        }
    }

    fn connection(&self) -> MultiplexedConnection {
        self.used.connection.clone()
    }

    fn ended<T>(mut self, result: Result<T, RedisError>) -> Result<T, RedisError> {
        self.ended = true;
        if let Err(error) = &result {
            if is_master_lost(error) {
                self.owner.search_unless_replaced(&self.used, error);
            }
        }
        result
    }
}

impl Drop for Call<'_> {
    fn drop(&mut self) {
        if !self.ended {
            let error = RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "a call was given up before the master answered",
            ));
            self.owner.search_unless_replaced(&self.used, &error);
        }
    }
}
