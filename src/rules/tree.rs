//! Descriptor matching, as in Envoy's ratelimit service.
//!
//! At each level the entries are grouped by key. For every key the request has a value
//! for, the most specific entry applies: an exact `value`, else a matching wildcard
//! (`prefix*`, `foo*bar`), else the key-only entry. Every entry on the walk that has a rate limit
//! applies, and its state key is the limit's state id plus the values seen on the way, so a
//! key-only entry limits each distinct value separately.
//!
//! Each state key also names its hash tag, the part of it that says who is limited: stores
//! that spread keys over shards (a Redis Cluster) keep the keys with the same tag together.
//! The tag is the value of the nearest entry on the walk marked `hash_tag`; without one, the
//! first value matched by a key-only or wildcard entry (the value that varies with the
//! client); without one either, the whole key.
//!
//! A wildcard entry with `share_threshold` counts every value it matches as one: the state
//! key holds the wildcard as written instead of the value.

use super::wildcard::Wildcard;
use crate::source::MissingPeerAddr;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::ops::Range;

/// One level of the descriptor tree.
#[derive(Debug, Clone, Default)]
pub(crate) struct Level {
    pub(crate) groups: Vec<Group>,
}

/// The entries of one level that share a key.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub(crate) source: usize,
    pub(crate) exact: HashMap<String, Node>,
    /// Sorted most specific first (the longest text besides the `*`s) for the layer; in
    /// the file's order for a rate limit service, as envoyproxy/ratelimit takes them.
    pub(crate) wildcards: Vec<(Wildcard, Node)>,
    pub(crate) key_only: Option<Box<Node>>,
}

/// A descriptor entry: its limit, if any, and the entries nested in it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Node {
    pub(crate) limit: Option<NodeLimit>,
    /// The entry's `concurrency` limit: walked as its rate limit is, never reached by a
    /// rate limit service's descriptors (which have no response to hold a slot until).
    pub(crate) concurrency: Option<NodeLimit>,
    /// Whether this entry's value is the hash tag of the limits at and below it.
    pub(crate) hash_tag: bool,
    /// Whether the values its wildcard matches share one count (`share_threshold`).
    pub(crate) share_threshold: bool,
    pub(crate) children: Level,
}

/// The limit of a descriptor entry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeLimit {
    /// Its index in the rules' limits.
    pub(crate) index: usize,
    /// Its identity in stores: the same for the same descriptor, algorithm and quota, so
    /// state survives rules that move the limit, and a changed quota starts afresh.
    pub(crate) state_id: u64,
}

/// A limit that applies to a request, with the key of its state.
#[derive(Debug, Clone)]
pub(crate) struct Matched {
    /// The limit's index in the rules' limits.
    pub(crate) limit_index: usize,
    pub(crate) key: StateKey,
    /// The bytes of `key` that make its hash tag.
    pub(crate) tag: Range<usize>,
}

impl Matched {
    /// The match of a descriptor that brings its own quota: the limit at `limit_index`,
    /// keyed by `state_id`, then each entry's key and value, length-prefixed; tagged by its
    /// entries, all of which say who is limited.
    pub(crate) fn of_entries(
        limit_index: usize,
        state_id: u64,
        entries: &[(&str, &str)],
    ) -> Matched {
        let mut key = StateKey::from_slice(&state_id.to_le_bytes());
        for text in entries.iter().flat_map(|(key, value)| [key, value]) {
            let len = u32::try_from(text.len()).unwrap_or(u32::MAX);
            key.extend_from_slice(&len.to_le_bytes());
            key.extend_from_slice(text.as_bytes());
        }
        Matched {
            limit_index,
            tag: STATE_ID_BYTES..key.len(),
            key,
        }
    }
}

/// State id, then each value on the walk, length-prefixed so that no two walks collide.
pub(crate) type StateKey = SmallVec<[u8; 48]>;

/// Every limit that applies, in walk order.
pub(crate) type Matches = SmallVec<[Matched; 2]>;

/// The request's value for a source, computed on first use.
pub(crate) trait Values {
    fn get(&mut self, source: usize) -> Result<Option<&str>, MissingPeerAddr>;
}

impl Group {
    /// The entry that applies to `value`, the wildcard as written when the values it
    /// matches share one count (their state is keyed by it, not by the value), and whether
    /// what keys the state does not vary from client to client.
    fn select(&self, value: &str) -> Option<(&Node, Option<&str>, bool)> {
        if let Some(node) = self.exact.get(value) {
            return Some((node, None, true));
        }
        let wildcard = self
            .wildcards
            .iter()
            .find(|(wildcard, _)| wildcard.matches(value));
        match wildcard {
            Some((wildcard, node)) if node.share_threshold => {
                Some((node, Some(wildcard.written()), true))
            }
            Some((_, node)) => Some((node, None, false)),
            None => self.key_only.as_deref().map(|node| (node, None, false)),
        }
    }
}

/// The hash tag a walk has found so far.
#[derive(Debug, Clone)]
enum Tag {
    /// Every value so far was exact.
    None,
    /// The first value of a key-only or wildcard entry.
    Varying(Range<usize>),
    /// The value of the nearest entry marked `hash_tag`.
    Marked(Range<usize>),
}

impl Tag {
    /// The tag below an entry whose value is at `value` in the path.
    fn below(&self, value: Range<usize>, exact: bool, marked: bool) -> Tag {
        match self {
            _ if marked => Tag::Marked(value),
            Tag::None if !exact => Tag::Varying(value),
            tag => tag.clone(),
        }
    }

    /// The bytes of a key of `len` bytes that make its hash tag.
    fn range(&self, len: usize) -> Range<usize> {
        match self {
            Tag::None => 0..len,
            Tag::Varying(range) | Tag::Marked(range) => range.clone(),
        }
    }
}

/// The bytes of a state id at the front of a [`StateKey`].
const STATE_ID_BYTES: usize = std::mem::size_of::<u64>();

/// `key` as the limit of `state_id` keeps it: the same values under another identity.
#[inline]
pub(crate) fn rekeyed(key: &StateKey, state_id: u64) -> StateKey {
    // Copied whole, not cloned byte by byte.
    let mut key = StateKey::from_slice(key);
    key[..STATE_ID_BYTES].copy_from_slice(&state_id.to_le_bytes());
    key
}

impl NodeLimit {
    /// This limit's match by a walk that reached it by `path`, tagged by `tag`.
    fn matched(self, path: &StateKey, tag: &Tag) -> Matched {
        let mut key = StateKey::from_slice(path);
        key[..STATE_ID_BYTES].copy_from_slice(&self.state_id.to_le_bytes());
        Matched {
            limit_index: self.index,
            tag: tag.range(key.len()),
            key,
        }
    }
}

impl Level {
    /// Calls `visit` with the limit of every entry at this level and below.
    pub(crate) fn for_each_limit_mut(&mut self, visit: &mut dyn FnMut(&mut NodeLimit)) {
        for group in &mut self.groups {
            let wildcards = group.wildcards.iter_mut().map(|(_, node)| node);
            let nodes = group.exact.values_mut().chain(wildcards);
            for node in nodes.chain(group.key_only.as_deref_mut()) {
                for limit in node.limit.iter_mut().chain(&mut node.concurrency) {
                    visit(limit);
                }
                node.children.for_each_limit_mut(visit);
            }
        }
    }

    /// The limit a descriptor reaches from this level, the root, as envoyproxy/ratelimit
    /// matches the descriptors of a rate limit service's call: each of `entries` (a source
    /// and its value), in order, selects an entry of the next level (an exact value, else
    /// the first matching wildcard, else the key-only entry), and the limit applies only if the
    /// entry the last one selects has one. `None` when an entry selects nothing, or the last
    /// has no limit.
    pub(crate) fn descriptor(&self, entries: &[(usize, &str)]) -> Option<Matched> {
        let mut path = StateKey::from_slice(&[0; STATE_ID_BYTES]);
        let mut tag = Tag::None;
        let mut level = self;
        let mut reached = None;
        for &(source, value) in entries {
            let group = level.groups.iter().find(|group| group.source == source)?;
            let (node, shared, exact) = group.select(value)?;
            let value = shared.unwrap_or(value);
            let len = u32::try_from(value.len()).unwrap_or(u32::MAX);
            path.extend_from_slice(&len.to_le_bytes());
            let value_at = path.len();
            path.extend_from_slice(value.as_bytes());
            tag = tag.below(value_at..path.len(), exact, node.hash_tag);
            reached = Some(node);
            level = &node.children;
        }
        let limit = reached?.limit?;
        let mut key = path;
        key[..STATE_ID_BYTES].copy_from_slice(&limit.state_id.to_le_bytes());
        Some(Matched {
            limit_index: limit.index,
            tag: tag.range(key.len()),
            key,
        })
    }

    /// Collects the limits that apply under this level, the root, into `out`.
    pub(crate) fn walk(
        &self,
        values: &mut dyn Values,
        out: &mut Matches,
    ) -> Result<(), MissingPeerAddr> {
        // The path keeps room for a state id at its front, so that a limit's key is one copy
        // of it.
        let mut path = StateKey::from_slice(&[0; STATE_ID_BYTES]);
        self.walk_from(values, &mut path, &Tag::None, out)
    }

    /// Collects the limits that apply under this level, reached by `path`, into `out`.
    fn walk_from(
        &self,
        values: &mut dyn Values,
        path: &mut StateKey,
        tag: &Tag,
        out: &mut Matches,
    ) -> Result<(), MissingPeerAddr> {
        for group in &self.groups {
            let Some(value) = values.get(group.source)? else {
                continue;
            };
            let Some((node, shared, exact)) = group.select(value) else {
                continue;
            };
            let value = shared.unwrap_or(value);
            let mark = path.len();
            let len = u32::try_from(value.len()).unwrap_or(u32::MAX);
            path.extend_from_slice(&len.to_le_bytes());
            let value_at = path.len();
            path.extend_from_slice(value.as_bytes());
            let tag = tag.below(value_at..path.len(), exact, node.hash_tag);
            if let Some(limit) = node.limit {
                out.push(limit.matched(path, &tag));
            }
            if let Some(limit) = node.concurrency {
                out.push(limit.matched(path, &tag));
            }
            // Most entries are leaves, with nothing below them to walk.
            if !node.children.groups.is_empty() {
                node.children.walk_from(values, path, &tag, out)?;
            }
            path.truncate(mark);
        }
        Ok(())
    }
}
