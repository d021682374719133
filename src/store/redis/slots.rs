//! All or nothing across the slots of a Redis Cluster.
//!
//! One call of the library's `acquire` decides every check whose key is in one slot, atomically: it
//! charges them only when all of its enforced limits have room. A request whose keys share a
//! slot (one client's limits: see [`LimitCheck::tag`](crate::store::LimitCheck::tag)) is one
//! call, as on a single server. A request whose keys are in several slots is one call per
//! slot, sent together; when a slot denies (or fails), its `refund` gives back what the other
//! slots charged, before the request is answered.
//!
//! Between the two steps, concurrent requests see the charges that are about to be given
//! back: they may be denied for them, never admitted beyond a limit. A server that dies
//! between the steps leaves its charges to expire with their keys (at most one period).

use super::errors::unexpected_reply;
use super::program::Entry;
use super::{Inner, Planned};
use crate::algorithm::Decision;
use crate::store::{Decisions, StoreError};
use futures_util::future::join_all;
use smallvec::SmallVec;
use std::sync::Arc;

/// What `acquire` answered for one check.
struct Answer {
    decision: Decision,
    /// Where the charge was filed, for `refund`.
    mark: i64,
}

/// The checks of one slot, by their index among the request's.
type Group = SmallVec<[usize; 2]>;

/// Decides `planned` (the checks of one request) with `now` as the scripts' clock.
pub(super) async fn acquire(
    inner: &Arc<Inner>,
    planned: &[Planned],
    now: &str,
) -> Result<Decisions, StoreError> {
    // A request of one limit that a function for one limit decides: the shortest call.
    if let [check] = planned {
        if let Some((entry, args)) = check.single_limit_call() {
            let key = [check.key.name.as_slice()];
            let decision = if entry == Entry::AcquireCounter {
                check.counter_decision(inner.decide(entry, key, now, args).await?)
            } else {
                check.single_limit_decision(&inner.decide(entry, key, now, args).await?)
            };
            return Ok(Decisions::one(decision));
        }
    }
    let groups = groups(planned, inner.is_cluster());
    if let [_] = groups.as_slice() {
        let answers = call(inner, planned.iter(), now).await?;
        return Ok(answers.into_iter().map(|a| a.decision).collect());
    }
    let replies = join_all(
        groups
            .iter()
            .map(|group| call(inner, group.iter().map(|&i| &planned[i]), now)),
    )
    .await;
    let mut answers: Vec<Option<Answer>> = planned.iter().map(|_| None).collect();
    let mut failure = None;
    for (group, reply) in groups.iter().zip(replies) {
        match reply {
            Ok(group_answers) => {
                for (&i, answer) in group.iter().zip(group_answers) {
                    answers[i] = Some(answer);
                }
            }
            Err(error) => failure = Some(error),
        }
    }
    let admitted = failure.is_none()
        && planned.iter().zip(&answers).all(|(check, answer)| {
            check.shadow() || answer.as_ref().is_some_and(|a| a.decision.allowed)
        });
    if !admitted {
        refund_charged(inner, planned, &groups, &answers, now).await;
    }
    if let Some(error) = failure {
        return Err(error);
    }
    Ok(answers
        .into_iter()
        .map(|answer| answer.expect("every slot answered").decision)
        .collect())
}

/// The checks of `planned` grouped by slot (one group on a single server), in order of
/// first appearance.
fn groups(planned: &[Planned], cluster: bool) -> SmallVec<[Group; 1]> {
    let mut groups: SmallVec<[(u16, Group); 1]> = SmallVec::new();
    for (i, check) in planned.iter().enumerate() {
        let slot = if cluster { check.key.slot } else { 0 };
        match groups.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, group)) => group.push(i),
            None => groups.push((slot, SmallVec::from_slice(&[i]))),
        }
    }
    groups.into_iter().map(|(_, group)| group).collect()
}

/// One call of the library's `acquire` for `checks` (keys of one slot).
async fn call<'a>(
    inner: &Arc<Inner>,
    checks: impl Iterator<Item = &'a Planned> + Clone,
    now: &str,
) -> Result<Vec<Answer>, StoreError> {
    // Each check's key, then the keys it is carried from; its numbers, then theirs.
    let mut keys: SmallVec<[&[u8]; 2]> = SmallVec::new();
    let mut args: Vec<i64> = Vec::new();
    for p in checks.clone() {
        keys.push(&p.key.name);
        args.extend(p.args);
        for carry in &p.carried {
            keys.push(&carry.key.name);
            args.extend(carry.args);
        }
    }
    let reply: Vec<i64> = inner.decide(Entry::Acquire, keys, now, args).await?;
    let count = checks.clone().count();
    if reply.len() != 1 + 8 * count {
        let got = format_args!("{} numbers", reply.len());
        return Err(unexpected_reply("a decision", got));
    }
    Ok(checks
        .zip(reply[1..].chunks(8))
        .map(|(p, values)| Answer {
            decision: p.decision(&values[..7]),
            mark: values[7],
        })
        .collect())
}

/// Gives back, in every slot that charged its checks, what they charged: the request was
/// not admitted. A refund that fails leaves its charge to expire with its key.
async fn refund_charged(
    inner: &Inner,
    planned: &[Planned],
    groups: &[Group],
    answers: &[Option<Answer>],
    now: &str,
) {
    let refunds = groups.iter().filter_map(|group| {
        let answered: Option<Vec<(&Planned, &Answer)>> = group
            .iter()
            .map(|&i| Some((&planned[i], answers[i].as_ref()?)))
            .collect();
        // A slot charged when it answered and all of its enforced limits had room; then
        // each of its limits that had room was charged, but those only checked.
        let answered = answered?;
        let charged_slot = answered
            .iter()
            .all(|(check, answer)| check.shadow() || answer.decision.allowed);
        let charged: Vec<(&Planned, i64)> = answered
            .into_iter()
            .filter(|(check, answer)| {
                charged_slot && answer.decision.allowed && !check.check_only()
            })
            .map(|(check, answer)| (check, answer.mark))
            .collect();
        (!charged.is_empty()).then(|| refund(inner, charged, now))
    });
    for result in join_all(refunds).await {
        if let Err(error) = result {
            tracing::warn!(%error, "could not give back the charges of a denied request: they expire with their keys");
        }
    }
}

/// One call of `refund`: gives back the charges of `checks`, each filed at its mark.
pub(super) async fn refund(
    inner: &Inner,
    checks: Vec<(&Planned, i64)>,
    now: &str,
) -> Result<i64, StoreError> {
    let keys = checks.iter().map(|(p, _)| p.key.name.as_slice());
    let args = checks.iter().flat_map(|(p, mark)| p.refund_args(*mark));
    inner.invoke(Entry::Refund, keys, now, args).await
}
