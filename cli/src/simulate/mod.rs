//! `tollgate simulate`: replays traffic through the real limiter on a manual clock.

mod plot;
mod synthetic;
mod trace;
mod traffic;
