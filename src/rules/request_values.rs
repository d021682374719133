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
    /// The values read so far, by source index, in the order they were asked for. A request
    /// reads only the few sources its walk reaches, so a search beats a table of every
    /// source, which would have to be cleared for each request.
    read: SmallVec<[(usize, Option<Value<'r>>); 4]>,
}

impl<'r> RequestValues<'r> {
    #[inline]
    pub(crate) fn new(view: RequestView<'r>, rules: &'r Rules) -> Self {
        RequestValues {
            view,
            rules,
            read: SmallVec::new(),
        }
    }
}

impl Values for RequestValues<'_> {
    fn get(&mut self, source: usize) -> Result<Option<&str>, MissingPeerAddr> {
        let position = match self.read.iter().position(|(read, _)| *read == source) {
            Some(position) => position,
            None => {
                let value = self
                    .view
                    .value(&self.rules.sources[source].1, &self.rules.client_ip)?;
                self.read.push((source, value));
                self.read.len() - 1
            }
        };
        Ok(self.read[position].1.as_deref())
    }
}
