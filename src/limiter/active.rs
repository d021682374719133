//! The rules in force, with what reports the decisions made under them.

use crate::clock::Clock;
use crate::observe::Observer;
use crate::rules::Rules;
use std::sync::Arc;

/// The rules in force and what reports the decisions made under them, put in force together
/// so that a decision never sees one without the other.
#[derive(Debug)]
pub(crate) struct Active {
    pub(crate) rules: Arc<Rules>,
    pub(crate) observer: Observer,
}

impl Active {
    /// `rules` and their observer, made now: off the request path, so that no decision
    /// registers metrics or allocates labels.
    pub(crate) fn new(rules: Rules, clock: &Arc<dyn Clock>) -> Self {
        let observer = Observer::new(&rules, Arc::clone(clock));
        Active {
            rules: Arc::new(rules),
            observer,
        }
    }
}
