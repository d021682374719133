//! The server's `load_shedding` limit: how many requests it runs at once, and how much of
//! that each priority level may fill.

use super::tree::Values;
use crate::source::MissingPeerAddr;

/// The least and most an adaptive `max_in_flight` may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounds {
    pub(crate) min: u32,
    pub(crate) max: u32,
}

/// The most requests the server runs at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MaxInFlight {
    Fixed(u32),
    /// Found from the latencies observed, within these bounds.
    Adaptive(Bounds),
}

/// The server's load shedding, compiled.
#[derive(Debug, Clone)]
pub(crate) struct LoadShedding {
    /// Its limit's index in the rules' limits (labelled `load_shedding`).
    pub(crate) limit: usize,
    pub(crate) max_in_flight: MaxInFlight,
    /// The source of the priority, if levels are set.
    source: Option<usize>,
    /// The levels' names, most important first.
    order: Box<[String]>,
    /// Per level, the percent of the most requests in flight it may fill.
    shares: Box<[u64]>,
    /// The level of a request whose value is missing or not in `order`.
    default_level: usize,
}

impl LoadShedding {
    /// Load shedding of limit `limit`, at most `max_in_flight`: the level of a request by its
    /// value of `source` among `order` (else `default_level`), each filling its `shares`.
    pub(crate) fn new(
        limit: usize,
        max_in_flight: MaxInFlight,
        source: Option<usize>,
        order: Box<[String]>,
        shares: Box<[u64]>,
        default_level: usize,
    ) -> Self {
        LoadShedding {
            limit,
            max_in_flight,
            source,
            order,
            shares,
            default_level,
        }
    }

    /// The most requests in flight (of every level) under which a request of the level its
    /// `values` give is admitted, when the server runs `max` at most: its share, at least 1.
    pub(crate) fn ceiling(
        &self,
        values: &mut dyn Values,
        max: u32,
    ) -> Result<u32, MissingPeerAddr> {
        let level = match self.source {
            Some(source) => values
                .get(source)?
                .and_then(|value| self.order.iter().position(|name| name == value))
                .unwrap_or(self.default_level),
            None => self.default_level,
        };
        let ceiling = u64::from(max) * self.shares[level] / 100;
        Ok(u32::try_from(ceiling).unwrap_or(u32::MAX).max(1))
    }
}
