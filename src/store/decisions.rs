//! A store's answer for one request: one decision per limit ([`Decisions`]), and the
//! iterator that takes them out.

use crate::algorithm::Decision;
use smallvec::SmallVec;
use std::ops::{Deref, DerefMut};

/// One [`Decision`] per [`LimitCheck`](super::LimitCheck), in the order of the checks.
///
/// Reads as a slice of decisions. Two are held without allocating: nearly every request has
/// one or two limits.
///
/// ```
/// use tollgate::store::Decisions;
///
/// let decisions = Decisions::new();
/// assert!(decisions.is_empty());
/// assert_eq!(decisions.iter().filter(|d| d.allowed).count(), 0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decisions(SmallVec<[Decision; 2]>);

// `#[inline]` throughout: a store built in another crate (and the benches) would otherwise
// call across crates to read each decision of a wrapper that is only a vector.
impl Decisions {
    /// No decision yet.
    #[inline]
    pub fn new() -> Self {
        Decisions(SmallVec::new())
    }

    /// Adds the decision on the next check.
    #[inline]
    pub fn push(&mut self, decision: Decision) {
        self.0.push(decision);
    }

    /// The decisions, as a slice.
    #[inline]
    pub fn as_slice(&self) -> &[Decision] {
        &self.0
    }

    /// The decision on a request's only check.
    #[inline]
    pub(crate) fn one(decision: Decision) -> Self {
        Decisions(smallvec::smallvec![decision])
    }
}

impl Deref for Decisions {
    type Target = [Decision];

    #[inline]
    fn deref(&self) -> &[Decision] {
        &self.0
    }
}

impl DerefMut for Decisions {
    #[inline]
    fn deref_mut(&mut self) -> &mut [Decision] {
        &mut self.0
    }
}

impl FromIterator<Decision> for Decisions {
    #[inline]
    fn from_iter<I: IntoIterator<Item = Decision>>(decisions: I) -> Self {
        Decisions(decisions.into_iter().collect())
    }
}

impl Extend<Decision> for Decisions {
    #[inline]
    fn extend<I: IntoIterator<Item = Decision>>(&mut self, decisions: I) {
        self.0.extend(decisions);
    }
}

impl<'a> IntoIterator for &'a Decisions {
    type Item = &'a Decision;
    type IntoIter = std::slice::Iter<'a, Decision>;

    #[inline]
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<'a> IntoIterator for &'a mut Decisions {
    type Item = &'a mut Decision;
    type IntoIter = std::slice::IterMut<'a, Decision>;

    #[inline]
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter_mut()
    }
}

impl IntoIterator for Decisions {
    type Item = Decision;
    type IntoIter = IntoIter;

    #[inline]
    fn into_iter(self) -> IntoIter {
        IntoIter(self.0.into_iter())
    }
}

/// The decisions of a [`Decisions`], taken out in order.
#[derive(Debug)]
pub struct IntoIter(smallvec::IntoIter<[Decision; 2]>);

impl Iterator for IntoIter {
    type Item = Decision;

    #[inline]
    fn next(&mut self) -> Option<Decision> {
        self.0.next()
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for IntoIter {
    #[inline]
    fn next_back(&mut self) -> Option<Decision> {
        self.0.next_back()
    }
}

impl ExactSizeIterator for IntoIter {}
