//! `block_for`: a penalty, kept by a limit of its own (see [`Block`]).

use super::Compiler;
use crate::algorithm::{Algorithm, Quota};
use crate::rules::file::RawRateLimit;
use crate::rules::limit::Block;
use crate::rules::period::parse_period;
use crate::rules::state_id::state_id;
use crate::rules::{KeySources, Limit, Rate, Unit};
use std::sync::Arc;
use std::time::Duration;

/// The shortest `block_for`.
const MIN_BLOCK: Duration = Duration::from_secs(1);

impl Compiler {
    /// The `block_for` of the rate limit `raw` at `path`: `Some(None)` when it has none,
    /// `None` when it is wrong (recorded).
    pub(super) fn block_for(&mut self, raw: &RawRateLimit, path: &str) -> Option<Option<Duration>> {
        let Some(written) = &raw.block_for else {
            return Some(None);
        };
        let path = format!("{path}.block_for");
        let message = if raw.unlimited {
            "an unlimited entry refuses nothing, so it has nothing to block".to_owned()
        } else if self.keys == KeySources::Given {
            "block_for works in the layer: a rate limit service answers each descriptor of a \
             call, and Envoy's protocol has no penalty"
                .to_owned()
        } else {
            match parse_period(&written.value) {
                Some(block) if block >= MIN_BLOCK => return Some(Some(block)),
                Some(block) => format!(
                    "{} is too short: block_for must be at least {}",
                    Unit::format_period(block),
                    Unit::format_period(MIN_BLOCK),
                ),
                None => format!(
                    "`{}` is not a duration: write a positive number and ms, s, m, h or d (e.g. 15m)",
                    written.value
                ),
            }
        };
        self.error(written.referenced, path, message);
        None
    }

    /// A limit that keeps the blocks of each limit with a `block_for`, past the file's: one
    /// request per `block_for`, by GCRA with a burst of 1, so that a key charged once is
    /// refused for exactly `block_for`.
    pub(super) fn add_block_limits(&mut self) {
        for (blocked, duration) in std::mem::take(&mut self.blocked) {
            let Ok(quota) = Quota::new(1, duration) else {
                // Checked when `block_for` was read: a duration a quota takes.
                continue;
            };
            let rate = Rate::Limited {
                quota: quota.with_burst(1),
                algorithm: Algorithm::Gcra,
            };
            let limit = &self.limits[blocked];
            // Its own identity in stores, the same whenever the limit is.
            let id = state_id(&format!("{}\0block_for", limit.descriptor), &rate);
            let keeper = Limit {
                label: format!("{} (blocked)", limit.label).into(),
                cost: None,
                name: None,
                descriptor: limit.descriptor.clone(),
                sources: limit.sources.clone(),
                rate,
                shadow: limit.shadow,
                quota: false,
                metadata: None,
                stats_path: Arc::from([]),
                on_store_error: limit.on_store_error,
                sync_every: limit.sync_every,
                approximate: None,
                replaces: Vec::new(),
                lease: None,
                sheds: false,
                block: None,
                settlement: None,
            };
            self.limits.push(keeper);
            self.limits[blocked].block = Some(Block {
                duration,
                limit: self.limits.len() - 1,
                state_id: id,
            });
        }
    }
}
