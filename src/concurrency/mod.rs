//! What requests hold while they run: the slots of `concurrency` limits (see the
//! [rules reference](crate::guide::rules#concurrency)).
//!
//! A request takes a slot of each concurrency limit that applies, before its rate limits
//! are asked, all or nothing: refused by one, it holds none and charges no rate limit; refused
//! by a rate limit, it gives its slots back at once. Admitted, it carries its [`Slots`] in the
//! response future and then in the response body, and gives them back when the body ends or
//! is dropped: whether the response completes, the client goes away, or the handler fails,
//! panics or is cancelled, since each of those drops the future or the body.
//!
//! The slots are counted in this process ([`InFlight`]), or, when the store keeps slots for
//! a fleet ([`Store::take_slots`](crate::store::Store::take_slots), Redis), in the store,
//! whose [`Leases`](crate::store::Leases) the request's [`Slots`] hold. The server's slot of
//! `load_shedding` is always this process's.

mod adaptive;
mod slots;
mod table;

pub(crate) use adaptive::AdaptiveLimit;
pub(crate) use slots::{Slot, Slots};
pub(crate) use table::InFlight;
