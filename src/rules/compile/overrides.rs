//! The limits that a rate limit service's descriptors may set themselves: Envoy's `limit`
//! override, a quota that comes with the call instead of from the file.

use super::Compiler;
use crate::algorithm::Quota;
use crate::rules::limit::{Limit, Rate};
use crate::rules::Unit;
use std::sync::Arc;

/// What the override limits' `descriptor` says, for logs.
const DESCRIPTOR: &str = "(a descriptor's own limit)";

impl Compiler {
    /// Adds one limit per unit, after the file's, for descriptors that bring their own
    /// quota ([`Rules::override_limit`](crate::rules::Rules::override_limit)): decided by the
    /// defaults' algorithm and `on_store_error`, exactly (no `sync_every`, no `approximate`),
    /// never in shadow mode, replacing nothing. The quota here only stands in: each call
    /// gives its own, with one request per unit's burst.
    pub(super) fn add_override_limits(&mut self) {
        for unit in Unit::ALL {
            let quota = Quota::new(1, unit.period()).expect("a unit is a period a quota takes");
            let rate = Rate::Limited {
                quota,
                algorithm: self.default_algorithm,
            };
            self.limits.push(Limit {
                label: format!("override per {}", unit.name()).into(),
                cost: None,
                name: None,
                descriptor: DESCRIPTOR.to_owned(),
                sources: Box::new([]),
                rate,
                shadow: false,
                quota: false,
                metadata: None,
                stats_path: Arc::from([]),
                on_store_error: self.on_store_error,
                sync_every: None,
                approximate: None,
                replaces: Vec::new(),
                lease: None,
                sheds: false,
                block: None,
                settlement: None,
            });
        }
    }
}
