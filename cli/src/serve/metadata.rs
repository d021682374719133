//! The dynamic metadata of an answer (`RESPONSE_DYNAMIC_METADATA`), as envoyproxy/ratelimit
//! builds it: the call's domain, descriptors and weight, and the `metadata` of the limits
//! of the descriptors that passed, merged (Envoy reads it to route a request, e.g. to a
//! service with quota left).

use super::proto::envoy::r#type::v3::RateLimitUnit;
use super::proto::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use super::proto::envoy::service::ratelimit::v3::RateLimitRequest;
use serde_json::{json, Map, Value};
use tollgate::envoy::CallVerdict;

/// The dynamic metadata of the answer to `request`, with the merged `metadata` of the
/// limits its descriptors passed (see [`passed_metadata`]).
pub(crate) fn dynamic_metadata(
    request: &RateLimitRequest,
    passed: Map<String, Value>,
) -> pbjson_types::Struct {
    let mut metadata = Map::new();
    metadata.insert("domain".to_owned(), json!(request.domain));
    let descriptors = request.descriptors.iter().map(|descriptor| {
        let entries: Vec<String> = descriptor
            .entries
            .iter()
            .map(|entry| format!("{}={}", entry.key, entry.value))
            .collect();
        let mut described = Map::new();
        described.insert("entries".to_owned(), json!(entries));
        if let Some(own) = &descriptor.limit {
            let unit = RateLimitUnit::try_from(own.unit).map_or("UNKNOWN", |u| u.as_str_name());
            let text = format!("requests_per_unit:{} unit:{unit}", own.requests_per_unit);
            described.insert("limit".to_owned(), json!(text));
        }
        if let Some(hits) = &descriptor.hits_addend {
            described.insert("hitsAddend".to_owned(), json!(hits.value));
        }
        Value::Object(described)
    });
    metadata.insert(
        "descriptors".to_owned(),
        Value::Array(descriptors.collect()),
    );
    if request.hits_addend != 0 {
        metadata.insert("hitsAddend".to_owned(), json!(request.hits_addend));
    }
    if !passed.is_empty() {
        metadata.insert("metadata".to_owned(), Value::Object(passed));
    }
    serde_json::from_value(Value::Object(metadata)).unwrap_or_default()
}

/// The `metadata` of the limits of the descriptors that passed (not `OVER_LIMIT`, not
/// unlimited), merged in the call's order: a key already there keeps its first value,
/// unless both are maps, which merge the same way.
pub(crate) fn passed_metadata(
    call: &CallVerdict,
    statuses: &[DescriptorStatus],
) -> Map<String, Value> {
    let mut merged = Map::new();
    let decisions = call.descriptors().iter().zip(statuses).enumerate();
    for (position, (decision, status)) in decisions {
        if status.code() == Code::OverLimit || call.is_unlimited(position) {
            continue;
        }
        let limit = decision
            .as_ref()
            .and_then(|decision| call.limit_of(decision));
        if let Some(metadata) = limit.and_then(|limit| limit.metadata()) {
            merge(&mut merged, metadata);
        }
    }
    merged
}

/// `more` merged into `into`: its keys that are new added, maps in both merged.
fn merge(into: &mut Map<String, Value>, more: &Map<String, Value>) {
    for (key, value) in more {
        match (into.get_mut(key), value) {
            (None, _) => {
                into.insert(key.clone(), value.clone());
            }
            (Some(Value::Object(kept)), Value::Object(more)) => merge(kept, more),
            (Some(_), _) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_value_of_a_key_is_kept_and_maps_merge() {
        let mut merged = Map::new();
        let first = json!({ "name": "service_1", "route": { "zone": "a" } });
        let second = json!({ "name": "service_2", "route": { "zone": "b", "pool": 2 }, "x": 1 });
        for metadata in [first, second] {
            let Value::Object(metadata) = metadata else {
                unreachable!("an object");
            };
            merge(&mut merged, &metadata);
        }
        let expected = json!({ "name": "service_1", "route": { "zone": "a", "pool": 2 }, "x": 1 });
        assert_eq!(Value::Object(merged), expected);
    }
}
