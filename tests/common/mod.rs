#![allow(dead_code)]

#[cfg(feature = "redis")]
pub mod redis_server;
pub mod reference;
pub mod server;
pub mod stores;
pub mod windows;
