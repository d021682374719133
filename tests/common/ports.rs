//! Free loopback ports for the servers tests start.

use std::net::TcpListener;

/// A free TCP port on 127.0.0.1 (free when asked; the server binds it right after).
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `n` distinct free TCP ports on 127.0.0.1, all held at once while chosen, so they differ.
///
/// They come from below the kernel's ephemeral range: a port the kernel hands out
/// (`bind` to port 0) may be handed out again as the source port of an outgoing connection
/// (a `redis-cli`, a client of another test) before the server binds it, and the server
/// then fails to start.
pub fn free_ports(n: usize) -> Vec<u16> {
    let mut listeners = Vec::with_capacity(n);
    while listeners.len() < n {
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", candidate_port())) {
            listeners.push(listener);
        }
    }
    listeners
        .iter()
        .map(|listener| listener.local_addr().expect("a bound address").port())
        .collect()
}

/// A port to try, at random below the ephemeral range: the test files that include this
/// file each have their own copy of it, and the tests of one process run side by side, so
/// nothing shared says which ports the others chose.
fn candidate_port() -> u16 {
    use std::hash::BuildHasher;
    const LOWEST: u64 = 10_000;
    let end = u64::from(ephemeral_range_start()).max(LOWEST + 1_000);
    let random = std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now());
    let port = LOWEST + random % (end - LOWEST);
    u16::try_from(port).expect("ports below the ephemeral range fit in 16 bits")
}

/// The first port of the kernel's ephemeral range (Linux's default when it cannot be read).
fn ephemeral_range_start() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}
