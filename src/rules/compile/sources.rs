//! The sources that descriptor keys name, and the client-IP settings.

use super::Compiler;
use crate::rules::file::{Located, RawClassifierEntry, RawClientIp, RawSingleSource, RawSource};
use crate::rules::KeySources;
use crate::source::{Classifier, ClientIpResolver, ExtensionSource, Identity, PathPattern, Source};
use http::{HeaderName, Method};
use ipnet::IpNet;
use serde_saphyr::Location;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// The IPv6 prefix that groups one client, unless configured.
const DEFAULT_IPV6_PREFIX: u8 = 64;

impl Compiler {
    pub(super) fn declare_sources(&mut self, declared: &BTreeMap<String, Located<RawSource>>) {
        for (name, raw) in declared {
            if Source::builtin(name).is_some() {
                let message = format!("`{name}` is a built-in key and cannot be redeclared");
                self.error(raw.referenced, format!("sources.{name}"), message);
            } else {
                let source = self.source(name, raw);
                self.declared.insert(name.clone(), source);
            }
        }
    }

    fn source(&mut self, name: &str, raw: &Located<RawSource>) -> Option<Source> {
        let path = format!("sources.{name}");
        match &raw.value {
            RawSource::Single(RawSingleSource::Header(header)) => {
                match HeaderName::from_bytes(header.as_bytes()) {
                    Ok(header) => Some(Source::Header(header)),
                    Err(_) => {
                        self.error(
                            raw.referenced,
                            format!("{path}.header"),
                            format!("`{header}` is not a valid header name"),
                        );
                        None
                    }
                }
            }
            RawSource::Single(RawSingleSource::Query(query)) if query.is_empty() => {
                self.error(
                    raw.referenced,
                    format!("{path}.query"),
                    "the query parameter name must not be empty",
                );
                None
            }
            RawSource::Single(RawSingleSource::Query(query)) => Some(Source::Query(query.clone())),
            RawSource::Single(RawSingleSource::Identity) => {
                Some(Source::Extension(ExtensionSource::of::<Identity>()))
            }
            RawSource::Single(RawSingleSource::Extension(extension)) if extension.is_empty() => {
                self.error(
                    raw.referenced,
                    format!("{path}.extension"),
                    "the extension name must not be empty",
                );
                None
            }
            RawSource::Single(RawSingleSource::Extension(extension)) => {
                Some(Source::Extension(ExtensionSource::named(extension)))
            }
            RawSource::Single(RawSingleSource::Typed(extension)) => {
                Some(Source::Extension(extension.clone()))
            }
            RawSource::Classifier(entries) => self
                .classifier(entries, raw.referenced, &path)
                .map(Source::Classifier),
        }
    }

    fn classifier(
        &mut self,
        entries: &[RawClassifierEntry],
        location: Location,
        path: &str,
    ) -> Option<Classifier> {
        if entries.is_empty() {
            self.error(location, path, "a classifier needs at least one entry");
            return None;
        }
        let errors_before = self.errors.len();
        let mut compiled = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let path = format!("{path}[{i}]");
            if entry.value.is_empty() {
                self.error(
                    location,
                    format!("{path}.value"),
                    "the value must not be empty",
                );
            }
            let method = entry.method.as_deref().and_then(|m| {
                match Method::from_bytes(m.to_ascii_uppercase().as_bytes()) {
                    Ok(method) => Some(method),
                    Err(_) => {
                        self.error(
                            location,
                            format!("{path}.method"),
                            format!("`{m}` is not an HTTP method"),
                        );
                        None
                    }
                }
            });
            let pattern = entry.path.as_deref().and_then(|p| {
                if p.starts_with('/') {
                    Some(PathPattern::new(p))
                } else {
                    self.error(
                        location,
                        format!("{path}.path"),
                        format!("`{p}` must start with `/`"),
                    );
                    None
                }
            });
            compiled.push((entry.value.clone(), method, pattern));
        }
        (self.errors.len() == errors_before).then(|| Classifier::new(compiled))
    }

    pub(super) fn client_ip(&mut self, raw: Option<Located<RawClientIp>>) -> ClientIpResolver {
        let raw = raw.map(|r| r.value).unwrap_or_default();
        let mut trusted = Vec::new();
        for (i, proxy) in raw.trusted_proxies.iter().enumerate() {
            let text = proxy.value.trim();
            match text
                .parse::<IpNet>()
                .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
            {
                Ok(net) => trusted.push(net),
                Err(_) => self.error(
                    proxy.referenced,
                    format!("client_ip.trusted_proxies[{i}]"),
                    format!("`{text}` is neither an IP address nor a CIDR block"),
                ),
            }
        }
        let prefix = match raw.ipv6_prefix {
            Some(prefix) if prefix.value == 0 || prefix.value > 128 => {
                self.error(
                    prefix.referenced,
                    "client_ip.ipv6_prefix",
                    "must be between 1 and 128",
                );
                DEFAULT_IPV6_PREFIX
            }
            Some(prefix) => prefix.value,
            None => DEFAULT_IPV6_PREFIX,
        };
        ClientIpResolver::new(trusted, prefix).with_header(raw.header)
    }

    /// The id of the source named by `key`; `path` is where an unknown name is reported.
    pub(super) fn source_id(&mut self, key: &Located<String>, path: &str) -> Option<usize> {
        let name = key.value.as_str();
        if let Some(&id) = self.source_ids.get(name) {
            return Some(id);
        }
        let source = match Source::builtin(name) {
            Some(source) => source,
            None => match self.declared.get(name) {
                Some(source) => source.clone()?,
                None if self.keys == KeySources::Given => Source::Given,
                None => {
                    let message = format!(
                        "unknown key `{name}`: declare it under `sources`, or use a built-in key ({})",
                        Source::BUILTIN_NAMES.join(", ")
                    );
                    self.error(key.referenced, path, message);
                    return None;
                }
            },
        };
        let id = self.sources.len();
        self.sources.push((name.to_owned(), source));
        self.source_ids.insert(name.to_owned(), id);
        Some(id)
    }
}
