//! `Limiter::check_descriptors`: a rate limit service's descriptors, matched as
//! envoyproxy/ratelimit matches them, decided all or nothing.

use proptest::prelude::*;
use tollgate::clock::ManualClock;
use tollgate::rules::{KeySources, Rules};
use tollgate::store::MemoryStore;
use tollgate::{Descriptor, Limiter};

const RULES: &str = r"
domain: edge
defaults: { algorithm: gcra }
descriptors:
  - key: generic_key
    value: login
    descriptors:
      - key: remote_address
        rate_limit: { unit: minute, requests_per_unit: 2, name: login }
  - key: path
    value: /api/*
    rate_limit: { unit: minute, requests_per_unit: 3, name: api }
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1, name: per-user }
  - key: api_key
    value: internal
    rate_limit: { unlimited: true, replaces: [{ name: per-user }] }
";

fn limiter() -> Limiter<MemoryStore<ManualClock>> {
    let rules = Rules::from_yaml_with(RULES, KeySources::Given).expect("valid rules");
    Limiter::with_store(rules, MemoryStore::with_clock(ManualClock::new()))
}

fn one<'a>(entries: &'a [(&'a str, &'a str)]) -> Descriptor<'a> {
    Descriptor { entries, cost: 1 }
}

/// The name of the limit each descriptor reached, in order.
async fn reached(
    limiter: &Limiter<MemoryStore<ManualClock>>,
    call: &[Descriptor<'_>],
) -> Vec<Option<String>> {
    let checked = limiter.check_descriptors(call).await;
    checked
        .descriptors()
        .iter()
        .map(|decision| decision.as_ref().map(|d| d.limit().to_owned()))
        .collect()
}

#[tokio::test]
async fn only_the_entry_the_last_one_reaches_applies() {
    let limiter = limiter();
    let login = [("generic_key", "login"), ("remote_address", "203.0.113.9")];
    let alone = [("generic_key", "login")];
    let wildcard = [("path", "/api/items")];
    let unknown = [("tenant", "acme")];
    let call = [one(&login), one(&alone), one(&wildcard), one(&unknown)];
    let names = reached(&limiter, &call).await;
    assert_eq!(
        names,
        [Some("login".into()), None, Some("api".into()), None]
    );
}

#[tokio::test]
async fn a_call_over_one_limit_charges_none_of_the_others() {
    let limiter = limiter();
    let (ann, api) = ([("user", "ann")], [("path", "/api/a")]);
    let call = [one(&api), one(&ann)];
    assert!(limiter
        .check_descriptors(&call)
        .await
        .verdict()
        .is_allowed());
    let refused = limiter.check_descriptors(&call).await;
    assert!(!refused.verdict().is_allowed());
    // The refused call did not charge `api`: two of its three are left.
    let checked = limiter.check_descriptors(&[one(&api)]).await;
    let left = checked.descriptors()[0]
        .as_ref()
        .expect("api")
        .decision()
        .remaining;
    assert_eq!(left, 1);
}

#[tokio::test]
async fn the_same_descriptor_twice_weighs_twice_and_shares_its_decision() {
    let limiter = limiter();
    let api = [("path", "/api/b")];
    let twice = [one(&api), one(&api)];
    let first = limiter.check_descriptors(&twice).await;
    assert!(first.verdict().is_allowed());
    let decisions = first.descriptors();
    assert_eq!(decisions[0], decisions[1]);
    assert_eq!(decisions[0].as_ref().expect("api").decision().remaining, 1);
    // Two more do not fit in the one left: refused, and not charged.
    assert!(!limiter
        .check_descriptors(&twice)
        .await
        .verdict()
        .is_allowed());
    assert!(limiter
        .check_descriptors(&[one(&api)])
        .await
        .verdict()
        .is_allowed());
}

#[tokio::test]
async fn an_unlimited_entry_replaces_what_it_names() {
    let limiter = limiter();
    let (ann, internal) = ([("user", "ann")], [("api_key", "internal")]);
    for _ in 0..5 {
        let call = [one(&internal), one(&ann)];
        let checked = limiter.check_descriptors(&call).await;
        assert!(checked.verdict().is_allowed());
        assert_eq!(checked.descriptors(), [None, None]);
    }
    // Without the internal key, ann has her one a minute.
    assert!(limiter
        .check_descriptors(&[one(&ann)])
        .await
        .verdict()
        .is_allowed());
    assert!(!limiter
        .check_descriptors(&[one(&ann)])
        .await
        .verdict()
        .is_allowed());
}

#[tokio::test]
async fn the_first_matching_prefix_in_the_file_wins_and_shadow_entries_replace() {
    let rules = r"
domain: edge
descriptors:
  - key: path
    value: /api/*
    rate_limit: { unit: minute, requests_per_unit: 3, name: api }
  - key: path
    value: /api/v2/*
    rate_limit: { unit: minute, requests_per_unit: 3, name: v2 }
  - key: canary
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1, name: canary, replaces: [{ name: per-user }] }
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1, name: per-user }
";
    let rules = Rules::from_yaml_with(rules, KeySources::Given).expect("valid rules");
    let limiter = Limiter::with_store(rules, MemoryStore::with_clock(ManualClock::new()));
    // As envoyproxy/ratelimit: `/api/*` comes first, and wins over the longer `/api/v2/*`.
    let v2 = [("path", "/api/v2/items")];
    assert_eq!(reached(&limiter, &[one(&v2)]).await, [Some("api".into())]);
    // A shadow-mode entry's `replaces` lifts `per-user` in the same call.
    let (canary, ann) = ([("canary", "on")], [("user", "ann")]);
    let names = reached(&limiter, &[one(&canary), one(&ann)]).await;
    assert_eq!(names, [Some("canary".into()), None]);
    // For the layer, the longest prefix wins.
    let layer = Rules::from_yaml(
        r"
domain: edge
descriptors:
  - key: path
    value: /api/*
    rate_limit: { unit: minute, requests_per_unit: 3, name: api }
  - key: path
    value: /api/v2/*
    rate_limit: { unit: minute, requests_per_unit: 3, name: v2 }
",
    )
    .expect("valid rules");
    let request = http::Request::get("/api/v2/items")
        .body(())
        .expect("a request");
    let explained = layer.explain(&request).expect("no client address needed");
    assert_eq!(explained.applied()[0].limit().label(), "v2");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever a caller sends, every descriptor gets its answer, and nothing panics.
    #[test]
    fn every_descriptor_gets_an_answer(
        descriptors in prop::collection::vec(
            prop::collection::vec(("[a-z_]{0,12}", "\\PC{0,24}"), 0..5),
            0..8,
        ),
        cost in 0_u64..5,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let limiter = limiter();
        let entries: Vec<Vec<(&str, &str)>> = descriptors
            .iter()
            .map(|d| d.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect())
            .collect();
        let call: Vec<Descriptor<'_>> = entries
            .iter()
            .map(|entries| Descriptor { entries, cost })
            .collect();
        let checked = runtime.block_on(limiter.check_descriptors(&call));
        prop_assert_eq!(checked.descriptors().len(), call.len());
    }
}
