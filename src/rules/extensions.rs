//! The types that a rules file's extension sources (`{ extension: NAME }`) read, bound in
//! Rust: a file names a type, it cannot hold one.

use super::{RuleError, RuleErrors, Rules};
use crate::source::{ExtensionSource, Source};
use serde_saphyr::Location;

impl Rules {
    /// Reads the sources declared as `{ extension: name }` from the `T` an earlier layer
    /// stored in each request's extensions: the key's value is its [`AsRef<str>`] text.
    /// Until a type is bound, such a source has no value, as for a request without a `T`.
    ///
    /// [`Limiter::set_rules`](crate::Limiter::set_rules), and so a reload, keeps the types
    /// bound in the rules in force for the new rules' extensions of the same names.
    ///
    /// ```
    /// use tollgate::rules::Rules;
    ///
    /// /// Inserted into the request extensions by the authentication middleware.
    /// #[derive(Clone)]
    /// struct TenantId(String);
    ///
    /// impl AsRef<str> for TenantId {
    ///     fn as_ref(&self) -> &str {
    ///         &self.0
    ///     }
    /// }
    ///
    /// let rules = Rules::from_yaml(r#"
    /// domain: api
    /// sources:
    ///   tenant: { extension: tenant }
    /// descriptors:
    ///   - key: tenant
    ///     rate_limit: { unit: second, requests_per_unit: 100 }
    /// "#)?
    /// .with_extension::<TenantId>("tenant")?;
    /// assert!(rules.with_extension::<TenantId>("tnant").is_err(), "no such extension");
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    ///
    /// # Errors
    ///
    /// No descriptor key of the rules reads a source declared as `{ extension: name }`.
    pub fn with_extension<T: AsRef<str> + Send + Sync + 'static>(
        mut self,
        name: &str,
    ) -> Result<Rules, RuleErrors> {
        let mut found = false;
        for extension in self.extension_sources_mut() {
            if extension.name() == Some(name) {
                extension.bind::<T>();
                found = true;
            }
        }
        if found {
            return Ok(self);
        }
        let message = format!(
            "no descriptor key reads the extension `{name}`: declare a source as `{{ extension: {name} }}` and use it as a key"
        );
        Err(RuleErrors::new(vec![RuleError::new(
            Location::UNKNOWN,
            "sources",
            message,
        )]))
    }

    /// Binds to these rules' unbound extensions the types `bound` binds to the same names.
    pub(crate) fn keep_extensions_of(&mut self, bound: &Rules) {
        for extension in self.extension_sources_mut() {
            for kept in bound.extension_sources() {
                extension.keep_binding_of(kept);
            }
        }
    }

    /// The names of the extensions that no type is bound to: their sources have no value.
    pub(crate) fn unbound_extensions(&self) -> impl Iterator<Item = &str> {
        self.extension_sources()
            .filter(|extension| !extension.is_bound())
            .filter_map(ExtensionSource::name)
    }

    fn extension_sources(&self) -> impl Iterator<Item = &ExtensionSource> {
        self.sources.iter().filter_map(|(_, source)| match source {
            Source::Extension(extension) => Some(extension),
            _ => None,
        })
    }

    fn extension_sources_mut(&mut self) -> impl Iterator<Item = &mut ExtensionSource> {
        self.sources
            .iter_mut()
            .filter_map(|(_, source)| match source {
                Source::Extension(extension) => Some(extension),
                _ => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_extension_needs_a_name() {
        let errors = Rules::from_yaml(
            "domain: d\nsources:\n  tenant: { extension: '' }\ndescriptors:\n  - key: tenant\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n",
        )
        .expect_err("an empty name");
        assert!(
            errors.to_string().contains("sources.tenant.extension"),
            "{errors}"
        );
    }

    #[test]
    fn only_unbound_extensions_are_reported_unbound() {
        let yaml = "domain: d\nsources:\n  tenant: { extension: tenant }\n  org: { extension: org }\n  user: identity\ndescriptors:\n  - key: tenant\n    descriptors:\n      - key: org\n        descriptors:\n          - key: user\n            rate_limit: { unit: minute, requests_per_unit: 1 }\n";
        let rules = Rules::from_yaml(yaml).expect("valid rules");
        let mut unbound: Vec<&str> = rules.unbound_extensions().collect();
        unbound.sort_unstable();
        assert_eq!(unbound, ["org", "tenant"]);
        let rules = rules
            .with_extension::<crate::source::Identity>("org")
            .expect("a declared extension");
        assert_eq!(rules.unbound_extensions().collect::<Vec<_>>(), ["tenant"]);
    }
}
