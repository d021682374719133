//! A request's descriptor values, as the rules ask for them.

use super::tree::Values;
use super::Rules;
use crate::source::{MissingPeerAddr, RequestView, Value};
use smallvec::SmallVec;

/// A request's descriptor values, each read on first use: what the layer decides on, and
/// what [`Rules::explain`] explains.
pub(crate) struct RequestValues<'r> {
    view: RequestView<'r>,
    rules: &'r Rules,
    cache: SmallVec<[Option<Option<Value<'r>>>; 8]>,
}

impl<'r> RequestValues<'r> {
    pub(crate) fn new(view: RequestView<'r>, rules: &'r Rules) -> Self {
        RequestValues {
            view,
            rules,
            cache: SmallVec::from_elem(None, rules.sources.len()),
        }
    }
}

impl Values for RequestValues<'_> {
    fn get(&mut self, source: usize) -> Result<Option<&str>, MissingPeerAddr> {
        if self.cache[source].is_none() {
            let value = self
                .view
                .value(&self.rules.sources[source].1, &self.rules.client_ip)?;
            self.cache[source] = Some(value);
        }
        Ok(self.cache[source]
            .as_ref()
            .and_then(|value| value.as_deref()))
    }
}
