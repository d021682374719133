//! `settle` and `count_when`: what a limit learns from the response.

use super::Compiler;
use crate::rules::file::{RawRateLimit, RawStatus};
use crate::rules::KeySources;
use crate::rules::{Settlement, StatusSet};
use http::HeaderName;

impl Compiler {
    /// The settlement of the rate limit `raw` at `path`: `Some(None)` for none, `None` when
    /// it is wrong (recorded).
    pub(super) fn settlement(
        &mut self,
        raw: &RawRateLimit,
        path: &str,
    ) -> Option<Option<Settlement>> {
        let (field, location) = match (&raw.settle, &raw.count_when) {
            (None, None) => return Some(None),
            (Some(settle), Some(count_when)) => {
                let message = "a request's charge is either settled from the response (settle) or counted by its status (count_when), not both";
                self.error(count_when.referenced, format!("{path}.count_when"), message);
                let _ = settle;
                return None;
            }
            (Some(settle), None) => ("settle", settle.referenced),
            (None, Some(count_when)) => ("count_when", count_when.referenced),
        };
        let field_path = format!("{path}.{field}");
        let refusal = if raw.unlimited {
            Some("an unlimited entry charges nothing to settle".to_owned())
        } else if self.keys == KeySources::Given {
            Some(format!("{field} works in the layer, which sees the response: a rate limit service does not"))
        } else if raw.approximate.is_some() {
            Some(format!("an approximate limit counts in a sketch, which cannot give a charge back: remove approximate or {field}"))
        } else if raw.sync_every.is_some() {
            Some(format!(
                "local-first limits do not settle yet: remove sync_every or {field}"
            ))
        } else {
            None
        };
        if let Some(message) = refusal {
            self.error(location, field_path, message);
            return None;
        }
        if let Some(settle) = &raw.settle {
            let written = (
                &settle.value.response_header,
                &settle.value.response_trailer,
            );
            let (name, field, trailer) = match written {
                (Some(header), None) => (header, "response_header", false),
                (None, Some(trailer)) => (trailer, "response_trailer", true),
                _ => {
                    let message = "say where the response tells the cost: response_header or response_trailer, one of them";
                    self.error(location, field_path, message);
                    return None;
                }
            };
            return match HeaderName::try_from(name.value.trim()) {
                Ok(header) if trailer => Some(Some(Settlement::ResponseTrailer(header))),
                Ok(header) => Some(Some(Settlement::ResponseHeader(header))),
                Err(_) => {
                    let message = format!("`{}` is not a header name", name.value);
                    self.error(name.referenced, format!("{field_path}.{field}"), message);
                    None
                }
            };
        }
        let statuses = &raw.count_when.as_ref()?.value.status;
        if statuses.is_empty() {
            let message = "list the statuses that count, e.g. [401, 403] or [5xx]";
            self.error(location, format!("{field_path}.status"), message);
            return None;
        }
        let mut set = StatusSet::default();
        let mut fits = true;
        for status in statuses {
            match &status.value {
                RawStatus::Code(code) if (100..=599).contains(code) => {
                    set.code(u16::try_from(*code).unwrap_or_default());
                }
                RawStatus::Class(class) => match class.trim().as_bytes() {
                    [hundreds @ b'1'..=b'5', b'x' | b'X', b'x' | b'X'] => {
                        set.class(hundreds - b'0')
                    }
                    _ => {
                        let message = format!("`{class}` is not a status class: write 1xx to 5xx");
                        self.error(status.referenced, format!("{field_path}.status"), message);
                        fits = false;
                    }
                },
                RawStatus::Code(code) => {
                    let message =
                        format!("{code} is not a status: write 100 to 599, or a class such as 5xx");
                    self.error(status.referenced, format!("{field_path}.status"), message);
                    fits = false;
                }
            }
        }
        fits.then_some(Some(Settlement::CountWhen(set)))
    }
}
