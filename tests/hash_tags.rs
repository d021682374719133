//! Which part of each state key is its hash tag (`LimitCheck::tag`), the part that says who
//! is limited: stores that spread keys over shards keep the keys of one tag together.

use parking_lot::Mutex;
use std::sync::Arc;
use tollgate::clock::{ManualClock, Nanos};
use tollgate::rules::Rules;
use tollgate::store::{Acquisition, LimitCheck, MemoryStore, Store};
use tollgate::Limiter;

/// A check's key and tag.
type KeyAndTag = (Vec<u8>, Vec<u8>);

/// The memory store, recording each check's key and tag.
#[derive(Clone)]
struct Recording {
    store: Arc<MemoryStore<ManualClock>>,
    seen: Arc<Mutex<Vec<KeyAndTag>>>,
}

impl tollgate::store::sealed::Sealed for Recording {}

impl Store for Recording {
    type Pending =
        std::future::Ready<Result<tollgate::store::Decisions, tollgate::store::StoreError>>;

    fn acquire(&self, checks: &[LimitCheck<'_>]) -> Acquisition<Self::Pending> {
        self.seen
            .lock()
            .extend(checks.iter().map(|c| (c.key.to_vec(), c.tag.to_vec())));
        self.store.acquire(checks)
    }

    fn cancel(&self, check: &LimitCheck<'_>, booked_until: Nanos) {
        self.store.cancel(check, booked_until);
    }
}

/// The tags of the checks of one request with `values` under `yaml`, in walk order.
fn tags(yaml: &str, values: &[(&str, &str)]) -> Vec<String> {
    tags_and_keys(yaml, values)
        .into_iter()
        .map(|(_, tag)| String::from_utf8_lossy(&tag).into_owned())
        .collect()
}

/// The keys and tags of the checks of one request with `values` under `yaml`, in walk order.
fn tags_and_keys(yaml: &str, values: &[(&str, &str)]) -> Vec<KeyAndTag> {
    checked(Rules::from_yaml(yaml).expect("valid rules"), values)
}

/// The keys and tags of the checks of one request with `values` under `rules`.
fn checked(rules: Rules, values: &[(&str, &str)]) -> Vec<KeyAndTag> {
    let store = Recording {
        store: Arc::new(MemoryStore::with_clock(ManualClock::new())),
        seen: Arc::default(),
    };
    let limiter = Limiter::with_store(rules, store.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    runtime.block_on(limiter.check(values, 1));
    let seen = store.seen.lock().clone();
    seen
}

const SOURCES: &str = "
domain: tags
sources:
  ip: { header: x-ip }
  user: { header: x-user }
  tenant: { header: x-tenant }
  endpoint: { header: x-endpoint }
";

#[test]
fn a_clients_limits_share_its_value_as_tag_whatever_exact_entries_lead_to_them() {
    let yaml = format!(
        "{SOURCES}descriptors:
  - key: ip
    rate_limit: {{ unit: second, requests_per_unit: 20 }}
  - key: endpoint
    value: login
    descriptors:
      - key: ip
        rate_limit: {{ unit: minute, requests_per_unit: 5 }}
"
    );
    assert_eq!(
        tags(&yaml, &[("ip", "203.0.113.9"), ("endpoint", "login")]),
        ["203.0.113.9", "203.0.113.9"]
    );
}

#[test]
fn the_first_varying_value_is_the_tag_unless_an_entry_is_marked() {
    let nested = |mark: &str| {
        format!(
            "{SOURCES}descriptors:
  - key: tenant
    rate_limit: {{ unit: second, requests_per_unit: 100 }}
    descriptors:
      - key: user
        {mark}
        rate_limit: {{ unit: second, requests_per_unit: 10 }}
"
        )
    };
    let request = [("tenant", "acme"), ("user", "u7")];
    assert_eq!(tags(&nested(""), &request), ["acme", "acme"]);
    assert_eq!(tags(&nested("hash_tag: true"), &request), ["acme", "u7"]);
}

#[test]
fn a_prefix_entry_varies_and_a_walk_of_exact_values_is_tagged_by_its_whole_key() {
    let yaml = format!(
        "{SOURCES}descriptors:
  - key: user
    value: 'team-*'
    rate_limit: {{ unit: second, requests_per_unit: 10 }}
  - key: endpoint
    value: reports
    rate_limit: {{ unit: second, requests_per_unit: 5 }}
"
    );
    let seen = tags_and_keys(&yaml, &[("user", "team-blue"), ("endpoint", "reports")]);
    assert_eq!(seen[0].1, b"team-blue");
    assert_eq!(
        seen[1].1, seen[1].0,
        "a global limit: its whole key is its tag"
    );
}

#[test]
fn hash_tag_comes_from_the_builder_too() {
    use tollgate::rules::{DescriptorSpec, LimitSpec, Unit};
    let rules = Rules::builder("tags")
        .source("tenant", tollgate::rules::SourceSpec::header("x-tenant"))
        .source("user", tollgate::rules::SourceSpec::header("x-user"))
        .descriptor(
            DescriptorSpec::key("tenant").nested(
                DescriptorSpec::key("user")
                    .hash_tag(true)
                    .rate_limit(LimitSpec::per(10, Unit::Second)),
            ),
        )
        .build()
        .expect("valid rules");
    let seen = checked(rules, &[("tenant", "acme"), ("user", "u7")]);
    assert_eq!(seen[0].1, b"u7");
}
