//! Descriptor values given by the caller of [`Limiter::check`](super::Limiter::check).

use crate::rules::tree::Values;
use crate::rules::Rules;
use crate::source::MissingPeerAddr;

/// Values given as `(key, value)` pairs: a key the rules use but the pairs lack has no value.
pub(super) struct GivenValues<'a> {
    pub(super) rules: &'a Rules,
    pub(super) values: &'a [(&'a str, &'a str)],
}

impl Values for GivenValues<'_> {
    fn get(&mut self, source: usize) -> Result<Option<&str>, MissingPeerAddr> {
        let name = self.rules.sources[source].0.as_str();
        Ok(self
            .values
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| *value))
    }
}
