//! Slots of concurrency limits that a store counts for a whole fleet (see
//! [`Store::take_slots`](super::Store::take_slots)).

use super::StoreError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// One slot of a concurrency limit that one request asks for.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct SlotCheck<'a> {
    /// The rules' domain; a shared store keeps each domain's slots apart.
    pub domain: &'a str,
    /// The key whose requests in flight are counted (limit identity and descriptor values).
    pub key: &'a [u8],
    /// Who is limited, the key's hash tag (see [`LimitCheck::tag`](super::LimitCheck::tag)).
    pub tag: &'a [u8],
    /// The key's requests in flight at once, at most.
    pub max_in_flight: u32,
    /// Whether the limit only reports: its slot is taken whatever the count.
    pub shadow: bool,
    /// How long the slot is held unless its holder renews it: a process that dies holding
    /// slots frees them after this.
    pub lease: Duration,
}

impl<'a> SlotCheck<'a> {
    /// A slot of the key `key` (tagged `tag`) in `domain`, at most `max_in_flight` held at
    /// once, each for `lease` unless renewed; enforced (not shadow).
    pub fn new(
        domain: &'a str,
        key: &'a [u8],
        tag: &'a [u8],
        max_in_flight: u32,
        lease: Duration,
    ) -> Self {
        SlotCheck {
            domain,
            key,
            tag,
            max_in_flight,
            shadow: false,
            lease,
        }
    }

    /// The same slot, of a limit that only reports (`true`) or enforces.
    pub fn shadow(mut self, shadow: bool) -> Self {
        self.shadow = shadow;
        self
    }
}

/// How a key's slots stood when a request asked for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotCount {
    /// The key's requests in flight before this one.
    pub in_flight: u32,
    /// Whether this request took a slot.
    pub taken: bool,
}

/// What a store answered for the slots of one request: how each stood, and the leases of
/// those taken, given back when dropped.
#[derive(Debug)]
pub struct TakenSlots {
    counts: Vec<SlotCount>,
    leases: Leases,
}

impl TakenSlots {
    /// One count per slot asked for, in order, and the leases that hold the slots taken.
    pub fn new(counts: Vec<SlotCount>, leases: Leases) -> Self {
        TakenSlots { counts, leases }
    }

    /// How each slot stood, in the order they were asked for.
    pub fn counts(&self) -> &[SlotCount] {
        &self.counts
    }

    /// The counts and the leases, apart.
    pub fn into_parts(self) -> (Vec<SlotCount>, Leases) {
        (self.counts, self.leases)
    }
}

/// The slots a request holds in a store: given back when dropped (renewed by the store until
/// then).
pub struct Leases(Option<Box<dyn Send + Sync>>);

impl Leases {
    /// Leases held by `holder`, which gives them back when dropped.
    pub fn new(holder: impl Send + Sync + 'static) -> Self {
        Leases(Some(Box::new(holder)))
    }

    /// No lease: nothing to give back.
    pub fn none() -> Self {
        Leases(None)
    }

    /// Whether these hold any lease.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

impl fmt::Debug for Leases {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leases")
            .field("held", &!self.is_empty())
            .finish()
    }
}

/// The future of a [`Store::take_slots`](super::Store::take_slots).
pub type TakingSlots = Pin<Box<dyn Future<Output = Result<TakenSlots, StoreError>> + Send>>;
