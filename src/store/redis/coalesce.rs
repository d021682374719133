//! Requests decided together. Redis runs one call at a time, and each call costs it a
//! dispatch, the function's entry and a reply, and the store a write and a read on the
//! connection, whatever the call decides: a call that decides many requests pays them once.
//!
//! A request that finds fewer than [`IN_FLIGHT`] calls in flight on a single server's
//! connection goes at once, alone, as it would without this: a store that is not busy waits
//! for nothing. Past that, requests wait, and the first call in flight to end sends those
//! waiting (up to [`BATCH`]) in one call of the library's `acquire_batch`, from a task that
//! ends with the call. The call decides each as its own call would: each request is still
//! one round trip, its checks decided all or nothing, and a request that fails in Redis fails
//! no other. The busier the store, the more each call decides.
//!
//! A request that gave up waiting (its caller timed out or left) is not sent. A failed batch
//! counts once towards the circuit breaker, as the one call it was, and a request that timed
//! out waiting for a place in one counts not at all: the calls in flight tell how Redis
//! answers. A Redis Cluster's requests are not batched: one call's keys must share a slot.

use super::call::{Arg, Failure};
use super::errors::{timeout_error, unexpected_reply};
use super::program::Entry;
use super::Inner;
use crate::store::{StoreError, StoreErrorKind};
use parking_lot::Mutex;
use redis::Value;
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::oneshot;

/// Calls in flight at once on the connection before requests wait for a batch.
const IN_FLIGHT: usize = 4;
/// Requests in one call at most.
const BATCH: usize = 64;

/// The calls in flight and the requests waiting for one.
#[derive(Default)]
pub(super) struct Coalescer {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    in_flight: usize,
    waiting: VecDeque<Waiting>,
}

/// A request waiting for a call, and where its answer goes.
struct Waiting {
    request: Request,
    reply: oneshot::Sender<Result<Value, Failure>>,
}

/// A request's call, owned while it waits.
struct Request {
    entry: Entry,
    /// How `acquire_batch` names the entry.
    code: i64,
    keys: SmallVec<[Vec<u8>; 1]>,
    now: String,
    args: SmallVec<[i64; 16]>,
}

/// Runs `entry` with `keys`, then `now` and `args`: at once, or in a batch when the
/// connection is busy and `acquire_batch` takes the entry. What the call answered, within
/// the timeout.
pub(super) async fn call(
    inner: &Arc<Inner>,
    entry: Entry,
    keys: &[&[u8]],
    now: &str,
    args: &[i64],
) -> Result<Value, Failure> {
    let (Some(coalescer), Some(code)) = (&inner.coalescer, entry.batch_code()) else {
        return inner
            .run(
                entry,
                keys.iter().copied(),
                now,
                args.iter().copied(),
                inner.timeout,
            )
            .await;
    };
    let answer = {
        let mut state = coalescer.state.lock();
        if state.in_flight < IN_FLIGHT {
            state.in_flight += 1;
            None
        } else {
            let (reply, answer) = oneshot::channel();
            let request = Request {
                entry,
                code,
                keys: keys.iter().map(|key| key.to_vec()).collect(),
                now: now.to_owned(),
                args: args.into(),
            };
            state.waiting.push_back(Waiting { request, reply });
            Some(answer)
        }
    };
    let Some(answer) = answer else {
        let _slot = Slot(Arc::clone(inner));
        let (keys, args) = (keys.iter().copied(), args.iter().copied());
        return inner.run(entry, keys, now, args, inner.timeout).await;
    };
    match tokio::time::timeout(inner.timeout, answer).await {
        Ok(Ok(answered)) => answered,
        Ok(Err(_)) => Err(Failure::other(StoreError::new(
            StoreErrorKind::Interrupted,
            "the request's batch was dropped before it was sent: its runtime shut down",
        ))),
        // Redis's health is told by the calls in flight, not by a wait for a place.
        Err(_) => Err(Failure::other(timeout_error(inner.timeout))),
    }
}

/// A call in flight. When it ends, the requests waiting go in the next call, which takes its
/// place; with none waiting, the place is free.
struct Slot(Arc<Inner>);

impl Drop for Slot {
    fn drop(&mut self) {
        let Some(coalescer) = &self.0.coalescer else {
            return;
        };
        let batch: Vec<Waiting> = {
            let mut state = coalescer.state.lock();
            // Requests whose callers left are not decided.
            state.waiting.retain(|waiting| !waiting.reply.is_closed());
            if state.waiting.is_empty() {
                state.in_flight -= 1;
                return;
            }
            let count = state.waiting.len().min(BATCH);
            state.waiting.drain(..count).collect()
        };
        let slot = Slot(Arc::clone(&self.0));
        self.0
            .spawn_for_request(async move { send(&slot.0, batch).await });
    }
}

/// Sends `batch` in one call and hands each request its answer.
async fn send(inner: &Inner, batch: Vec<Waiting>) {
    if let [alone] = batch.as_slice() {
        let request = &alone.request;
        let keys = request.keys.iter().map(Vec::as_slice);
        let args = request.args.iter().copied();
        let answered = inner
            .run(request.entry, keys, &request.now, args, inner.timeout)
            .await;
        if let Some(alone) = batch.into_iter().next() {
            // A caller that left no longer waits for its answer.
            let _ = alone.reply.send(answered);
        }
        return;
    }
    let keys: Vec<&[u8]> = batch
        .iter()
        .flat_map(|waiting| waiting.request.keys.iter().map(Vec::as_slice))
        .collect();
    let mut args: Vec<Arg<'_>> = Vec::new();
    for Waiting { request, .. } in &batch {
        let counts = [request.keys.len(), request.args.len()]
            .map(|count| i64::try_from(count).unwrap_or(i64::MAX));
        args.push(Arg::Number(request.code));
        args.extend(counts.map(Arg::Number));
        args.push(Arg::Text(&request.now));
        args.extend(request.args.iter().copied().map(Arg::Number));
    }
    let answered: Result<Vec<Value>, Failure> = inner
        .run_with(Entry::AcquireBatch, &keys, &args, inner.timeout)
        .await;
    let answers: Vec<Result<Value, Failure>> = match answered {
        Ok(answers) if answers.len() == batch.len() => answers.into_iter().map(answer).collect(),
        Ok(answers) => {
            let asked = format!("a batch of {} requests", batch.len());
            let error = unexpected_reply(&asked, format_args!("{} answers", answers.len()));
            batch
                .iter()
                .map(|_| Err(Failure::other(error.clone())))
                .collect()
        }
        Err(failure) => {
            // The breaker hears of the call once: its first request carries the failure.
            let mut answers: Vec<_> = batch
                .iter()
                .skip(1)
                .map(|_| Err(Failure::other(failure.error.clone())))
                .collect();
            answers.insert(0, Err(failure));
            answers
        }
    };
    for (waiting, answered) in batch.into_iter().zip(answers) {
        // A caller that left no longer waits for its answer.
        let _ = waiting.reply.send(answered);
    }
}

/// A request's answer in a batch: what its own call answers, or the text of its error.
fn answer(value: Value) -> Result<Value, Failure> {
    match value {
        Value::BulkString(text) => Err(Failure::other(StoreError::new(
            StoreErrorKind::Server,
            format!(
                "the Redis call failed in a batch: {}",
                String::from_utf8_lossy(&text)
            ),
        ))),
        value => Ok(value),
    }
}
