//! Penalties (`block_for`): a key that a limit with a `block_for` refuses is charged to the
//! limit that keeps its blocks (see [`Block`](crate::rules::limit::Block)), which every
//! later request of the key checks with the limit's others.

use super::active::Active;
use super::decide::checks;
use crate::algorithm::Decision;
use crate::decision::{Booking, Bookings, Ruling};
use crate::store::{Acquisition, Decisions, Store, StoreError};
use std::future::Future;
use std::pin::Pin;

/// Starts the block of each limit with a `block_for` that refused `bookings`' request itself
/// (by its own count, in `decisions`, not by a block in force; a shadow limit's too), and
/// makes the refusal's `Retry-After` the longest block an enforced limit started, and a
/// block in force reported with its limit's capacity: the ruling, so amended, and the
/// store's answer still to come, if it answers later. Blocks are charged in the store apart
/// from the request (which is charged nothing, being refused); a store that fails to keep
/// one is not retried.
pub(super) fn start_blocks<St: Store>(
    store: &St,
    active: &Active,
    bookings: &[Booking],
    decisions: &[Decision],
    mut ruling: Ruling,
) -> (Ruling, Option<Blocking<St>>) {
    let rules = &*active.rules;
    let mut blocks = Bookings::new();
    for (at, (booking, decision)) in bookings.iter().zip(decisions).enumerate() {
        if booking.penalty && !decision.allowed {
            // A block in force: reported with its limit's capacity (the limit precedes it).
            if let Some(limit) = at.checked_sub(1).map(|before| &decisions[before]) {
                ruling = ruling.with_capacity_of(booking.limit_index, limit.capacity);
            }
            continue;
        }
        let Some(block) = rules.limits[booking.limit_index].block else {
            continue;
        };
        if decision.allowed || booking.check_only {
            continue;
        }
        if !booking.shadow {
            ruling = ruling.blocked_for(block.duration);
        }
        // The booking that checked the block, just after the limit's (see
        // `Limiter::book`), charged this time.
        if let Some(check) = bookings
            .get(at + 1)
            .filter(|check| check.penalty && check.limit_index == block.limit)
        {
            blocks.push(Booking {
                check_only: false,
                ..check.clone()
            });
        }
    }
    if blocks.is_empty() {
        return (ruling, None);
    }
    let blocked = match store.acquire(&checks(active, &blocks)) {
        Acquisition::Ready(_) => None,
        Acquisition::Pending(blocked) => Some(Box::pin(blocked)),
    };
    (ruling, blocked)
}

/// A store's answer to the blocks a refusal started, still to come; boxed, as blocks are
/// rare and a store's future may be large (the memory store's holds its decisions).
pub(super) type Blocking<St> = Pin<Box<<St as Store>::Pending>>;

/// Waits for a store to keep a block: before the refusal that started it is answered, so
/// that the client's next request finds it.
pub(super) async fn kept<F: Future<Output = Result<Decisions, StoreError>>>(blocked: F) {
    if let Err(error) = blocked.await {
        tracing::debug!(%error, "a block could not be kept");
    }
}
