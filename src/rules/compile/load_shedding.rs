//! `load_shedding`: the requests the server runs at once, and each priority level's share.

use super::Compiler;
use crate::rules::file::{Located, RawLoadShedding, RawMaxInFlight, RawPriority};
use crate::rules::load_shedding::{Bounds, LoadShedding, MaxInFlight};
use crate::rules::{KeySources, Limit, Rate};
use std::sync::Arc;

/// The most priority levels: more would be a list of clients, not of priorities.
const MAX_LEVELS: usize = 16;
/// The bounds of an adaptive `max_in_flight` that sets none.
const ADAPTIVE_BOUNDS: Bounds = Bounds { min: 4, max: 1000 };
/// The share of the last level, in percent, when `shares` is not set: a flood of the least
/// important traffic leaves half of the server to the rest.
const LAST_SHARE: u64 = 50;

impl Compiler {
    /// The server's load shedding, its limit pushed onto the rules' limits; `None` when the
    /// file sets none, or it has errors (recorded).
    pub(super) fn load_shedding(
        &mut self,
        raw: Option<&Located<RawLoadShedding>>,
    ) -> Option<LoadShedding> {
        let raw = raw?;
        if self.keys == KeySources::Given {
            self.error(
                raw.referenced,
                "load_shedding",
                "a rate limit service never sees a request end, so it cannot count the requests in flight: `load_shedding` works in the layer",
            );
            return None;
        }
        let max_in_flight = self.max_in_flight(&raw.value)?;
        let taken = self
            .names
            .iter()
            .find(|(name, _)| name.value == "load_shedding")
            .map(|(name, path)| (name.referenced, path.clone()));
        if let Some((location, path)) = taken {
            self.error(
                location,
                path,
                "the name `load_shedding` is the server's load shedding limit's: its metrics and logs would mix with this one's",
            );
            return None;
        }
        let Levels {
            source,
            order,
            shares,
            default_level,
        } = match &raw.value.priority {
            None => Levels {
                source: None,
                order: Vec::new(),
                shares: vec![100],
                default_level: 0,
            },
            Some(priority) => self.priority(priority)?,
        };
        let most = match max_in_flight {
            MaxInFlight::Fixed(max) => max,
            MaxInFlight::Adaptive(bounds) => bounds.max,
        };
        self.limits.push(Limit {
            label: "load_shedding".into(),
            cost: None,
            name: None,
            descriptor: "load_shedding".to_owned(),
            sources: source.into_iter().collect(),
            rate: Rate::Concurrency {
                max_in_flight: most,
            },
            shadow: false,
            quota: false,
            metadata: None,
            stats_path: Arc::from([]),
            on_store_error: self.on_store_error,
            sync_every: None,
            approximate: None,
            replaces: Vec::new(),
            lease: None,
            sheds: true,
            block: None,
            settlement: None,
        });
        Some(LoadShedding::new(
            self.limits.len() - 1,
            max_in_flight,
            source,
            order.into(),
            shares.into(),
            default_level,
        ))
    }

    /// `max_in_flight`, with `min` and `max` when it is `adaptive`.
    fn max_in_flight(&mut self, raw: &RawLoadShedding) -> Option<MaxInFlight> {
        const PATH: &str = "load_shedding";
        let written = &raw.max_in_flight;
        let bounds = [&raw.min, &raw.max];
        let in_range = |value: u64| u32::try_from(value).ok().filter(|&n| n > 0);
        match &written.value {
            RawMaxInFlight::Fixed(max) => {
                if let Some(bound) = bounds.iter().find_map(|bound| bound.as_ref()) {
                    self.error(
                        bound.referenced,
                        PATH,
                        "`min` and `max` bound an adaptive limit: `max_in_flight: adaptive`",
                    );
                    return None;
                }
                let Some(max) = in_range(*max) else {
                    self.error(
                        written.referenced,
                        format!("{PATH}.max_in_flight"),
                        format!(
                            "max_in_flight must be from 1 to {}, or `adaptive`",
                            u32::MAX
                        ),
                    );
                    return None;
                };
                Some(MaxInFlight::Fixed(max))
            }
            RawMaxInFlight::Named(name) if name == "adaptive" => {
                let mut read = |bound: &Option<Located<u64>>, name: &str, default: u32| {
                    let Some(bound) = bound else {
                        return Some(default);
                    };
                    let value = in_range(bound.value);
                    if value.is_none() {
                        self.error(
                            bound.referenced,
                            format!("{PATH}.{name}"),
                            format!("{name} must be from 1 to {}", u32::MAX),
                        );
                    }
                    value
                };
                let min = read(&raw.min, "min", ADAPTIVE_BOUNDS.min);
                let max = read(&raw.max, "max", ADAPTIVE_BOUNDS.max.max(min.unwrap_or(1)));
                let (min, max) = (min?, max?);
                if min > max {
                    self.error(
                        written.referenced,
                        PATH,
                        format!("the adaptive limit's min ({min}) is above its max ({max})"),
                    );
                    return None;
                }
                Some(MaxInFlight::Adaptive(Bounds { min, max }))
            }
            RawMaxInFlight::Named(name) => {
                self.error(
                    written.referenced,
                    format!("{PATH}.max_in_flight"),
                    format!("max_in_flight is a number or `adaptive`, not `{name}`"),
                );
                None
            }
        }
    }

    /// `load_shedding.priority`, checked.
    fn priority(&mut self, priority: &Located<RawPriority>) -> Option<Levels> {
        const PATH: &str = "load_shedding.priority";
        let raw = &priority.value;
        let source = self.source_id(&raw.key, &format!("{PATH}.key"));
        let order: Vec<String> = raw.order.iter().map(|level| level.value.clone()).collect();
        let mut ok = source.is_some();
        let unique: std::collections::HashSet<&String> = order.iter().collect();
        if order.is_empty() || order.len() > MAX_LEVELS || unique.len() != order.len() {
            self.error(
                priority.referenced,
                format!("{PATH}.order"),
                format!("order lists 1 to {MAX_LEVELS} levels, each once, most important first"),
            );
            return None;
        }
        let shares = match &raw.shares {
            None => default_shares(order.len()),
            Some(shares) => {
                let valid = shares.value.len() == order.len()
                    && shares.value.iter().all(|share| (1..=100).contains(share))
                    && shares.value.windows(2).all(|pair| pair[0] >= pair[1]);
                if !valid {
                    self.error(
                        shares.referenced,
                        format!("{PATH}.shares"),
                        format!(
                            "shares gives each of the {} levels the percent of max_in_flight it may fill, from 1 to 100, never more than a more important level's",
                            order.len()
                        ),
                    );
                    ok = false;
                }
                shares.value.clone()
            }
        };
        let default_level = match &raw.default {
            None => order.len() - 1,
            Some(level) => match order.iter().position(|name| *name == level.value) {
                Some(index) => index,
                None => {
                    self.error(
                        level.referenced,
                        format!("{PATH}.default"),
                        format!("`{}` is not one of the levels in order", level.value),
                    );
                    ok = false;
                    0
                }
            },
        };
        ok.then_some(Levels {
            source,
            order,
            shares,
            default_level,
        })
    }
}

/// The priority levels of load shedding: the source of a request's level, the levels most
/// important first, each one's share (percent), and the level of a request with none.
struct Levels {
    source: Option<usize>,
    order: Vec<String>,
    shares: Vec<u64>,
    default_level: usize,
}

/// The shares of `levels` levels when the file sets none: all of the capacity for the most
/// important, [`LAST_SHARE`] for the least, evenly between.
fn default_shares(levels: usize) -> Vec<u64> {
    let steps = u64::try_from(levels.saturating_sub(1))
        .unwrap_or(u64::MAX)
        .max(1);
    (0..levels)
        .map(|level| {
            let level = u64::try_from(level).unwrap_or(u64::MAX);
            100 - (100 - LAST_SHARE) * level / steps
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::default_shares;
    use crate::rules::Rules;

    /// The errors of rules whose `load_shedding` is `settings`.
    fn errors(settings: &str) -> String {
        let yaml = format!(
            "domain: d\nsources: {{ priority: {{ header: x-priority }} }}\nload_shedding: {settings}\n"
        );
        Rules::from_yaml(&yaml).expect_err("refused").to_string()
    }

    #[test]
    fn mistaken_load_shedding_is_refused_with_its_place() {
        let cases = [
            ("{ max_in_flight: 0 }", "load_shedding.max_in_flight: max_in_flight must be from 1"),
            (
                "{ max_in_flight: 8, priority: { key: nobody, order: [a] } }",
                "load_shedding.priority.key",
            ),
            (
                "{ max_in_flight: 8, priority: { key: priority, order: [] } }",
                "order lists 1 to 16 levels",
            ),
            (
                "{ max_in_flight: 8, priority: { key: priority, order: [a, a] } }",
                "each once",
            ),
            (
                "{ max_in_flight: 8, priority: { key: priority, order: [a, b], shares: [50, 100] } }",
                "never more than a more important level's",
            ),
            (
                "{ max_in_flight: 8, priority: { key: priority, order: [a, b], default: c } }",
                "`c` is not one of the levels",
            ),
            ("{ max_in_flight: fast }", "a number or `adaptive`, not `fast`"),
            ("{ max_in_flight: 8, min: 2 }", "`min` and `max` bound an adaptive limit"),
            ("{ max_in_flight: adaptive, min: 10, max: 5 }", "min (10) is above its max (5)"),
            ("{ max_in_flight: adaptive, max: 0 }", "load_shedding.max: max must be from 1"),
];
        for (settings, expected) in cases {
            let errors = errors(settings);
            assert!(errors.contains(expected), "{settings}: {errors}");
        }
    }

    #[test]
    fn no_other_limit_may_be_named_load_shedding() {
        let named = "domain: d\nload_shedding: { max_in_flight: 8 }\ndescriptors:\n  - key: path\n    rate_limit: { unit: second, requests_per_unit: 1, name: load_shedding }\n";
        let errors = Rules::from_yaml(named).expect_err("refused").to_string();
        assert!(
            errors.contains("is the server's load shedding limit's"),
            "{errors}"
        );
    }

    #[test]
    fn by_default_the_first_level_fills_all_and_the_last_half() {
        assert_eq!(default_shares(1), [100]);
        assert_eq!(default_shares(2), [100, 50]);
        assert_eq!(default_shares(3), [100, 75, 50]);
    }
}
