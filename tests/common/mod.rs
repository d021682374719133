#![allow(dead_code)]

pub mod demo;
#[cfg(not(feature = "redis"))]
pub mod ports;
#[cfg(feature = "redis")]
pub mod redis_server;
// One copy of the ports' file: `redis_server` holds it, for the command's tests too.
#[cfg(feature = "redis")]
pub use redis_server::ports;
pub mod reference;
pub mod server;
pub mod stores;
#[cfg(feature = "redis")]
pub mod tls_certs;
pub mod windows;

/// A Tokio runtime of two workers, as the tests that drive a store from several tasks use.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}
