//! One `concurrency` entry: how many of a key's requests may run at once.

use super::Compiler;
use crate::rules::file::{Located, RawDescriptor};
use crate::rules::period::parse_period;
use crate::rules::state_id::state_id;
use crate::rules::tree::NodeLimit;
use crate::rules::{KeySources, Limit, Rate, Unit};
use std::sync::Arc;
use std::time::Duration;

impl Compiler {
    /// The `concurrency` limit of `descriptor`, at `path`, reached by the entries `chain`
    /// whose sources are `sources`; `None` when it has none, or errors (recorded).
    pub(super) fn concurrency(
        &mut self,
        descriptor: &Located<RawDescriptor>,
        path: &str,
        chain: &str,
        sources: &[usize],
    ) -> Option<NodeLimit> {
        let raw = descriptor.value.concurrency.as_ref()?;
        let path = format!("{path}.concurrency");
        self.written_name(raw.value.name.as_ref(), &path);
        if self.keys == KeySources::Given {
            self.error(
                raw.referenced,
                &path,
                "a rate limit service never sees a request end, so it cannot hold its slot: \
                 `concurrency` limits work in the layer",
            );
            return None;
        }
        let written = &raw.value.max_in_flight;
        let max_in_flight = match u32::try_from(written.value) {
            Ok(max) if max > 0 => max,
            _ => {
                self.error(
                    written.referenced,
                    format!("{path}.max_in_flight"),
                    format!(
                        "max_in_flight must be from 1 to {} (to refuse every request, use `requests_per_unit: 0`)",
                        u32::MAX
                    ),
                );
                return None;
            }
        };
        let lease = self.lease(raw.value.lease.as_ref(), &path)?;
        let name = raw.value.name.as_ref().map(|n| n.value.clone());
        let label = name
            .clone()
            .unwrap_or_else(|| format!("{chain} (concurrency)"));
        // The identity leaves the maximum out: a reload that changes it keeps counting the
        // requests in flight.
        let rate = Rate::Concurrency { max_in_flight };
        self.limits.push(Limit {
            label: label.into(),
            cost: None,
            name,
            descriptor: chain.to_owned(),
            sources: sources.into(),
            rate,
            shadow: descriptor.value.shadow_mode,
            quota: false,
            metadata: None,
            stats_path: Arc::from([]),
            on_store_error: self.on_store_error,
            sync_every: None,
            approximate: None,
            replaces: Vec::new(),
            lease: Some(lease),
            sheds: false,
            block: None,
            settlement: None,
        });
        Some(NodeLimit {
            index: self.limits.len() - 1,
            state_id: state_id(chain, &rate),
        })
    }
}

/// How long a slot is held in a shared store unless renewed, when `lease` is not written.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The shortest `lease`: its server renews it every third of it, over the network.
const MIN_LEASE: Duration = Duration::from_secs(1);

impl Compiler {
    /// The `lease` of the concurrency entry at `path`, as written (`DEFAULT_LEASE` when
    /// not); `None` when it is wrong (recorded).
    fn lease(&mut self, written: Option<&Located<String>>, path: &str) -> Option<Duration> {
        let Some(written) = written else {
            return Some(DEFAULT_LEASE);
        };
        let message = match parse_period(&written.value) {
            Some(lease) if lease >= MIN_LEASE => return Some(lease),
            Some(lease) => format!(
                "{} is too short: a lease must be at least {} (its server renews it every third of it)",
                Unit::format_period(lease),
                Unit::format_period(MIN_LEASE),
            ),
            None => format!(
                "`{}` is not a duration: write a positive number and ms, s, m, h or d (e.g. 30s)",
                written.value
            ),
        };
        self.error(written.referenced, format!("{path}.lease"), message);
        None
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::Rules;
    use std::time::Duration;

    /// The rules of one concurrency limit whose settings are `settings`.
    fn rules(settings: &str) -> Result<Rules, String> {
        let yaml = format!(
            "domain: d\ndescriptors:\n  - key: remote_address\n    concurrency: {settings}\n"
        );
        Rules::from_yaml(&yaml).map_err(|errors| errors.to_string())
    }

    #[test]
    fn a_lease_is_thirty_seconds_unless_written() {
        let lease = |settings| rules(settings).expect("valid").limits()[0].lease();
        assert_eq!(lease("{ max_in_flight: 2 }"), Some(Duration::from_secs(30)));
        assert_eq!(
            lease("{ max_in_flight: 2, lease: 2m }"),
            Some(Duration::from_secs(120))
        );
    }

    #[test]
    fn mistaken_concurrency_is_refused_with_its_place() {
        let cases = [
            (
                "{ max_in_flight: 0 }",
                "concurrency.max_in_flight: max_in_flight must be from 1",
            ),
            (
                "{ max_in_flight: 2, lease: 500ms }",
                "500ms is too short: a lease must be at least 1s",
            ),
            (
                "{ max_in_flight: 2, lease: soon }",
                "concurrency.lease: `soon` is not a duration",
            ),
        ];
        for (settings, expected) in cases {
            let errors = rules(settings).expect_err("refused");
            assert!(errors.contains(expected), "{settings}: {errors}");
        }
    }
}
