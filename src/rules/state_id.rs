//! The identity of a limit in stores.

use super::Rate;

/// A stable 64-bit identity of a limit (FNV-1a: the same in every process, unlike std's
/// randomly seeded hasher, so that servers sharing a store agree).
pub(super) fn state_id(chain: &str, rate: &Rate) -> u64 {
    let mut bytes = chain.as_bytes().to_vec();
    if let Rate::Limited { quota, algorithm } = rate {
        bytes.push(0);
        bytes.extend_from_slice(algorithm.name().as_bytes());
        for number in [
            quota.requests_per_period(),
            quota.period_nanos(),
            quota.burst(),
        ] {
            bytes.extend_from_slice(&number.to_le_bytes());
        }
        // Only a calendar's limits say so: the others keep the identities they always had.
        if let Some(calendar) = quota.calendar() {
            bytes.extend_from_slice(
                format!("\0{}\0{}", calendar.unit().name(), calendar.time_zone()).as_bytes(),
            );
        }
    }
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |hash: u64, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
}

#[cfg(test)]
mod tests {
    use super::state_id;
    use crate::algorithm::{Algorithm, Quota};
    use crate::rules::Rate;
    use std::time::Duration;

    #[test]
    fn identities_are_the_same_in_every_process_and_version() {
        // A changed identity would start every limit afresh in a shared store on upgrade.
        let quota = Quota::new(20, Duration::from_secs(1))
            .unwrap()
            .with_burst(40);
        let algorithm = Algorithm::TokenBucket;
        let limited = Rate::Limited { quota, algorithm };
        assert_eq!(state_id("remote_address", &limited), 0x3867_03f2_2875_5aad);
        assert_eq!(
            state_id("api_key=internal-*", &Rate::Unlimited),
            0x4e78_bd74_6399_5bd0
        );
    }
}
