//! Which limits apply to a request, and why: what `tollgate explain` prints.
//!
//! The answer comes from the layer's own matching ([`Rules::applicable`] over the values
//! [`RequestView`] reads), so it cannot drift from what the layer enforces.

use super::request_values::RequestValues;
use super::tree::{Matches, Values};
use super::{Limit, Rules};
use crate::source::{MissingPeerAddr, RequestView};

/// The limits that apply to one request, and those that matched it but were set aside.
///
/// Made by [`Rules::explain`].
#[derive(Debug, Clone)]
pub struct Explanation<'r> {
    applied: Vec<AppliedLimit<'r>>,
    replaced: Vec<AppliedLimit<'r>>,
    exemption: Option<AppliedLimit<'r>>,
}

/// A limit that matched a request, with the request's values on the way to it.
#[derive(Debug, Clone)]
pub struct AppliedLimit<'r> {
    limit: &'r Limit,
    values: Vec<(&'r str, String)>,
}

impl Rules {
    /// Which limits apply to `request`, found by the same matching as the layer: the same
    /// sources, client-IP resolution, `unlimited` exemptions and `replaces`.
    ///
    /// ```
    /// use tollgate::rules::Rules;
    /// use tollgate::source::PeerAddr;
    ///
    /// let rules = Rules::from_yaml(r#"
    /// domain: api
    /// descriptors:
    ///   - key: remote_address
    ///     rate_limit: { unit: second, requests_per_unit: 20, name: per-client }
    /// "#)?;
    /// let mut request = http::Request::new(());
    /// request.extensions_mut().insert(PeerAddr("203.0.113.9:0".parse()?));
    ///
    /// let explanation = rules.explain(&request)?;
    /// let applied = &explanation.applied()[0];
    /// assert_eq!(applied.limit().label(), "per-client");
    /// assert_eq!(applied.state_key(), "remote_address=203.0.113.9");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`MissingPeerAddr`] when the rules need the client address and `request` carries no
    /// [`PeerAddr`](crate::source::PeerAddr) (or connect info), as the layer would.
    pub fn explain<B>(
        &self,
        request: &http::Request<B>,
    ) -> Result<Explanation<'_>, MissingPeerAddr> {
        let mut values = RequestValues::new(RequestView::of(request), self);
        // Every match on the walk, to show what exemptions and `replaces` set aside, as
        // `Rules::set_aside` does for the layer.
        let mut matched = Matches::new();
        self.matched(&mut values, &mut matched)?;

        let mut found = |index: usize| -> Result<AppliedLimit<'_>, MissingPeerAddr> {
            let limit = &self.limits[index];
            let mut walked = Vec::with_capacity(limit.sources.len());
            for &source in &limit.sources {
                // The walk read every value on the way to a match, so each is there.
                if let Some(value) = values.get(source)? {
                    walked.push((self.sources[source].0.as_str(), value.to_owned()));
                }
            }
            Ok(AppliedLimit {
                limit,
                values: walked,
            })
        };

        let mut explanation = Explanation {
            applied: Vec::new(),
            replaced: Vec::new(),
            exemption: None,
        };
        if let Some(exempting) = matched
            .iter()
            .find(|m| self.limits[m.limit_index].exempts())
        {
            explanation.exemption = Some(found(exempting.limit_index)?);
            return Ok(explanation);
        }
        for (m, replaced) in matched.iter().zip(self.replaced(&matched)) {
            let limit = found(m.limit_index)?;
            if replaced {
                explanation.replaced.push(limit);
            } else {
                explanation.applied.push(limit);
            }
        }
        Ok(explanation)
    }
}

impl<'r> Explanation<'r> {
    /// The limits the request must fit, in the order of the walk (shadow-mode ones included:
    /// they count but never deny).
    pub fn applied(&self) -> &[AppliedLimit<'r>] {
        &self.applied
    }

    /// Limits that matched but do not apply, because a limit that applies `replaces` them.
    pub fn replaced(&self) -> &[AppliedLimit<'r>] {
        &self.replaced
    }

    /// The `unlimited` entry that exempts the request from every limit, if one matched.
    pub fn exemption(&self) -> Option<&AppliedLimit<'r>> {
        self.exemption.as_ref()
    }
}

impl<'r> AppliedLimit<'r> {
    /// The limit.
    pub fn limit(&self) -> &'r Limit {
        self.limit
    }

    /// Each descriptor key on the way to the limit, with the request's value for it.
    pub fn values(&self) -> &[(&'r str, String)] {
        &self.values
    }

    /// The state key in words, e.g. `endpoint=login/remote_address=203.0.113.9`: requests
    /// with the same state key share the limit's counter.
    pub fn state_key(&self) -> String {
        let pairs: Vec<String> = self
            .values
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        pairs.join("/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::PeerAddr;

    const RULES: &str = r#"
domain: test
sources:
  user_id: { header: x-user-id }
  api_key: { header: x-api-key }
  endpoint:
    - { value: login, method: POST, path: /auth/login }
client_ip:
  trusted_proxies: [10.0.0.0/8]
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 20, name: per-client }
  - key: endpoint
    value: login
    descriptors:
      - key: user_id
        rate_limit: { unit: minute, requests_per_unit: 5, name: login }
  - key: api_key
    value: "internal-*"
    rate_limit: { unlimited: true }
  - key: api_key
    value: "premium-*"
    rate_limit: { unit: minute, requests_per_unit: 1000, replaces: [{ name: per-client }] }
"#;

    fn rules() -> Rules {
        Rules::from_yaml(RULES).expect("valid rules")
    }

    fn request(
        method: &str,
        path: &str,
        peer: &str,
        headers: &[(&str, &str)],
    ) -> http::Request<()> {
        let mut builder = http::Request::builder().method(method).uri(path);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let mut request = builder.body(()).expect("a valid request");
        let peer = format!("{peer}:0").parse().expect("an address");
        request.extensions_mut().insert(PeerAddr(peer));
        request
    }

    fn labels_and_keys(limits: &[AppliedLimit<'_>]) -> Vec<(String, String)> {
        limits
            .iter()
            .map(|a| (a.limit().label().to_owned(), a.state_key()))
            .collect()
    }

    #[test]
    fn every_limit_on_the_walk_applies_with_the_values_walked() {
        let rules = rules();
        let login = request("POST", "/auth/login", "203.0.113.9", &[("x-user-id", "42")]);
        let explanation = rules.explain(&login).expect("a peer address");
        assert_eq!(
            labels_and_keys(explanation.applied()),
            [
                (
                    "per-client".to_owned(),
                    "remote_address=203.0.113.9".to_owned()
                ),
                ("login".to_owned(), "endpoint=login/user_id=42".to_owned()),
            ]
        );
        assert_eq!(
            explanation.applied()[1].values(),
            [
                ("endpoint", "login".to_owned()),
                ("user_id", "42".to_owned())
            ]
        );
        assert!(explanation.replaced().is_empty());
        assert!(explanation.exemption().is_none());
    }

    #[test]
    fn a_request_without_the_values_matches_nothing() {
        let rules = Rules::from_yaml(
            "domain: t\ndescriptors:\n  - key: path\n    value: /search\n    rate_limit: { unit: second, requests_per_unit: 1 }\n",
        )
        .expect("valid rules");
        let explanation = rules
            .explain(&http::Request::new(()))
            .expect("no peer address needed");
        assert!(explanation.applied().is_empty());
        assert!(explanation.exemption().is_none());
    }

    #[test]
    fn an_unlimited_match_exempts_from_every_limit() {
        let rules = rules();
        let internal = request(
            "POST",
            "/auth/login",
            "203.0.113.9",
            &[("x-user-id", "42"), ("x-api-key", "internal-7")],
        );
        let explanation = rules.explain(&internal).expect("a peer address");
        assert!(explanation.applied().is_empty());
        assert!(explanation.replaced().is_empty());
        let exemption = explanation.exemption().expect("exempt");
        assert_eq!(exemption.limit().descriptor(), "api_key=internal-*");
        assert_eq!(exemption.state_key(), "api_key=internal-7");
    }

    #[test]
    fn replaced_limits_are_set_aside() {
        let rules = rules();
        let premium = request("GET", "/", "203.0.113.9", &[("x-api-key", "premium-1")]);
        let explanation = rules.explain(&premium).expect("a peer address");
        assert_eq!(
            labels_and_keys(explanation.applied()),
            [(
                "api_key=premium-*".to_owned(),
                "api_key=premium-1".to_owned()
            )]
        );
        assert_eq!(
            labels_and_keys(explanation.replaced()),
            [(
                "per-client".to_owned(),
                "remote_address=203.0.113.9".to_owned()
            )]
        );
    }

    #[test]
    fn the_client_address_is_read_behind_trusted_proxies_only() {
        let rules = rules();
        let forwarded = [("x-forwarded-for", "198.51.100.7")];
        let via_proxy = request("GET", "/", "10.1.2.3", &forwarded);
        let direct = request("GET", "/", "203.0.113.9", &forwarded);
        let key = |request| {
            let explanation = rules.explain(request).expect("a peer address");
            explanation.applied()[0].state_key()
        };
        assert_eq!(key(&via_proxy), "remote_address=198.51.100.7");
        assert_eq!(key(&direct), "remote_address=203.0.113.9");
    }

    #[test]
    fn the_client_address_is_required_when_the_rules_use_it() {
        let rules = rules();
        assert_eq!(
            rules.explain(&http::Request::new(())).err(),
            Some(MissingPeerAddr)
        );
    }
}
