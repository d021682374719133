//! The server's `load_shedding` limit: how many requests it runs at once, and how much of
//! that each priority level may fill.

use super::tree::Values;
use crate::source::MissingPeerAddr;

/// The server's load shedding, compiled.
#[derive(Debug, Clone)]
pub(crate) struct LoadShedding {
    /// Its limit's index in the rules' limits (labelled `load_shedding`).
    pub(crate) limit: usize,
    /// The source of the priority, if levels are set.
    source: Option<usize>,
    /// The levels' names, most important first.
    order: Box<[String]>,
    /// Per level, the requests in flight (of every level) under which it is admitted.
    ceilings: Box<[u32]>,
    /// The level of a request whose value is missing or not in `order`.
    default_level: usize,
}

impl LoadShedding {
    /// Load shedding of limit `limit`: the level of a request by its value of `source` among
    /// `order` (else `default_level`), each admitted under its `ceilings`.
    pub(crate) fn new(
        limit: usize,
        source: Option<usize>,
        order: Box<[String]>,
        ceilings: Box<[u32]>,
        default_level: usize,
    ) -> Self {
        LoadShedding {
            limit,
            source,
            order,
            ceilings,
            default_level,
        }
    }

    /// The most requests in flight (of every level) under which a request of the level its
    /// `values` give is admitted.
    pub(crate) fn ceiling(&self, values: &mut dyn Values) -> Result<u32, MissingPeerAddr> {
        let level = match self.source {
            Some(source) => values
                .get(source)?
                .and_then(|value| self.order.iter().position(|name| name == value))
                .unwrap_or(self.default_level),
            None => self.default_level,
        };
        Ok(self.ceilings[level])
    }
}
