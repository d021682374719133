//! What requests hold while they run: the slots of `concurrency` limits (see the
//! [rules reference](crate::guide::rules#concurrency)).
//!
//! A request takes a slot of each concurrency limit that applies, before its rate limits
//! are asked, all or nothing: refused by one, it holds none and charges no rate limit; refused
//! by a rate limit, it gives its slots back at once. Admitted, it carries its [`Slots`] in the
//! response future and then in the response body, and gives them back when the body ends or
//! is dropped: whether the response completes, the client goes away, or the handler fails,
//! panics or is cancelled, since each of those drops the future or the body.

mod adaptive;
mod slots;
mod table;

pub(crate) use adaptive::AdaptiveLimit;
pub(crate) use slots::{Slot, Slots};
pub(crate) use table::InFlight;
