//! `Limiter::check_descriptors`: a rate limit service's descriptors, matched as
//! envoyproxy/ratelimit matches them, decided all or nothing.

use proptest::prelude::*;
use tollgate::clock::ManualClock;
use tollgate::envoy::{Descriptor, LimitOverride};
use tollgate::response::verdict_headers;
use tollgate::rules::{KeySources, Rules, Unit};
use tollgate::store::MemoryStore;
use tollgate::Limiter;

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
    Descriptor {
        entries,
        cost: 1,
        limit: None,
    }
}

/// Whether `call` is admitted.
async fn admitted(limiter: &Limiter<MemoryStore<ManualClock>>, call: &[Descriptor<'_>]) -> bool {
    limiter.check_descriptors(call).await.verdict().is_allowed()
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
    assert!(admitted(&limiter, &call).await);
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
    assert!(!admitted(&limiter, &twice).await);
    assert!(admitted(&limiter, &[one(&api)]).await);
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
    assert!(admitted(&limiter, &[one(&ann)]).await);
    assert!(!admitted(&limiter, &[one(&ann)]).await);
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

/// A descriptor of `entries` with its own quota of `requests_per_unit` per `unit`.
fn own<'a>(
    entries: &'a [(&'a str, &'a str)],
    requests_per_unit: u64,
    unit: Unit,
) -> Descriptor<'a> {
    let limit = Some(LimitOverride {
        requests_per_unit,
        unit,
    });
    Descriptor {
        entries,
        cost: 1,
        limit,
    }
}

#[tokio::test]
async fn a_descriptor_with_its_own_quota_is_limited_by_it_alone() {
    let limiter = limiter();
    // No entry of the rules matches a tenant: its own quota limits it.
    let acme = [("tenant", "acme")];
    assert!(admitted(&limiter, &[own(&acme, 2, Unit::Minute)]).await);
    assert!(admitted(&limiter, &[own(&acme, 2, Unit::Minute)]).await);
    let third = limiter
        .check_descriptors(&[own(&acme, 2, Unit::Minute)])
        .await;
    assert!(!third.verdict().is_allowed());
    let decision = third.descriptors()[0].as_ref().expect("its own limit");
    assert_eq!(decision.limit(), "override per minute");
    assert_eq!(decision.decision().capacity, 2);
    let headers = verdict_headers(third.rules(), third.verdict());
    assert_eq!(headers["x-ratelimit-limit"], "2");
    // The entry it reaches plays no part: unlimited there, or 1 a minute.
    let internal = [("api_key", "internal")];
    assert!(admitted(&limiter, &[own(&internal, 1, Unit::Minute)]).await);
    assert!(!admitted(&limiter, &[own(&internal, 1, Unit::Minute)]).await);
    let ann = [("user", "ann")];
    for _ in 0..3 {
        assert!(admitted(&limiter, &[own(&ann, 3, Unit::Minute)]).await);
    }
    // All or nothing with the call's other descriptors.
    let api = [("path", "/api/own")];
    assert!(!admitted(&limiter, &[one(&api), own(&acme, 2, Unit::Minute)]).await);
    let left = limiter.check_descriptors(&[one(&api)]).await;
    let api_left = left.descriptors()[0].as_ref().expect("api").decision();
    assert_eq!(api_left.remaining, 2, "the refused call charged nothing");
    // The file's limits are the file's: the override limits are not among them.
    assert_eq!(limiter.rules().limits().len(), 4);
}

#[tokio::test]
async fn own_quotas_count_per_entries_and_unit() {
    let yaml = "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 9 }\n";
    let rules = Rules::from_yaml_with(yaml, KeySources::Given).expect("valid rules");
    let limiter = Limiter::with_store(rules, MemoryStore::with_clock(ManualClock::new()));
    let acme = [("tenant", "acme")];
    let both = [("tenant", "acme"), ("plan", "gold")];
    assert!(admitted(&limiter, &[own(&acme, 2, Unit::Minute)]).await);
    assert!(admitted(&limiter, &[own(&acme, 2, Unit::Minute)]).await);
    // A fixed window by default: another requests per unit counts in the same window.
    assert!(admitted(&limiter, &[own(&acme, 3, Unit::Minute)]).await);
    assert!(!admitted(&limiter, &[own(&acme, 3, Unit::Minute)]).await);
    // Other entries, or another unit, count apart.
    assert!(admitted(&limiter, &[own(&both, 1, Unit::Minute)]).await);
    assert!(admitted(&limiter, &[own(&acme, 1, Unit::Hour)]).await);
    // Rules for the layer have no override limits: the descriptor is matched as any.
    let layer = Rules::from_yaml(yaml.replace("user", "method").as_str()).expect("valid");
    let limiter = Limiter::with_store(layer, MemoryStore::with_clock(ManualClock::new()));
    let get = [("method", "GET")];
    let checked = limiter
        .check_descriptors(&[own(&get, 1, Unit::Minute)])
        .await;
    let decision = checked.descriptors()[0].as_ref().expect("the file's limit");
    assert_eq!(decision.decision().capacity, 9, "the file's quota");
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
        quotas in prop::collection::vec(prop::option::of((0_u64..5, 0..Unit::ALL.len())), 8),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let limiter = limiter();
        let entries: Vec<Vec<(&str, &str)>> = descriptors
            .iter()
            .map(|d| d.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect())
            .collect();
        let call: Vec<Descriptor<'_>> = entries
            .iter()
            .zip(&quotas)
            .map(|(entries, quota)| Descriptor {
                entries,
                cost,
                limit: quota.map(|(requests_per_unit, unit)| LimitOverride {
                    requests_per_unit,
                    unit: Unit::ALL[unit],
                }),
            })
            .collect();
        let checked = runtime.block_on(limiter.check_descriptors(&call));
        prop_assert_eq!(checked.descriptors().len(), call.len());
    }
}
