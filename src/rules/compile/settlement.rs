//! `settle` and `count_when`: what a limit learns from the response.

use super::Compiler;
use crate::rules::file::{RawRateLimit, RawStatus};
use crate::rules::settlement::GRPC_CODES;
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
        let stream_done = raw
            .settle
            .as_ref()
            .and_then(|settle| settle.value.stream_done.as_ref())
            .is_some_and(|done| done.value);
        let service = self.keys == KeySources::Given;
        let refusal = if raw.unlimited {
            Some("an unlimited entry charges nothing to settle".to_owned())
        } else if service && !stream_done {
            Some(format!("{field} works in the layer, which sees the response: a rate limit service does not (its clients charge when the stream is done: settle: {{ stream_done: true }})"))
        } else if stream_done && !service {
            Some("stream_done is for tollgate serve, whose clients charge by a second call; the layer settles from response_header or response_trailer".to_owned())
        } else if raw.approximate.is_some() {
            Some(format!("an approximate limit counts in a sketch, which cannot give a charge back: remove approximate or {field}"))
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
                (None, None) if stream_done => return Some(Some(Settlement::StreamDone)),
                (Some(header), None) if !stream_done => (header, "response_header", false),
                (None, Some(trailer)) if !stream_done => (trailer, "response_trailer", true),
                _ => {
                    let message = "say where the response tells the cost: response_header, response_trailer or (tollgate serve) stream_done, one of them";
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
        let count_when = &raw.count_when.as_ref()?.value;
        if count_when.status.is_empty() && count_when.grpc_status.is_empty() {
            let message = "list the statuses that count, e.g. status: [401, 403] or [5xx], grpc_status: [UNAUTHENTICATED]";
            self.error(location, field_path, message);
            return None;
        }
        let mut set = StatusSet::default();
        let mut fits = true;
        for status in &count_when.status {
            let message = match &status.value {
                RawStatus::Code(code) if (100..=599).contains(code) => {
                    set.code(u16::try_from(*code).unwrap_or_default());
                    continue;
                }
                RawStatus::Word(class) => match class.trim().as_bytes() {
                    [hundreds @ b'1'..=b'5', b'x' | b'X', b'x' | b'X'] => {
                        set.class(hundreds - b'0');
                        continue;
                    }
                    _ => format!("`{class}` is not a status class: write 1xx to 5xx"),
                },
                RawStatus::Code(code) => {
                    format!("{code} is not a status: write 100 to 599, or a class such as 5xx")
                }
            };
            self.error(status.referenced, format!("{field_path}.status"), message);
            fits = false;
        }
        for status in &count_when.grpc_status {
            let code = match &status.value {
                RawStatus::Code(code) => usize::try_from(*code).ok(),
                RawStatus::Word(name) => {
                    let name = name.trim();
                    GRPC_CODES
                        .iter()
                        .position(|known| known.eq_ignore_ascii_case(name))
                }
            };
            match code.filter(|&code| code < GRPC_CODES.len()) {
                Some(code) => set.grpc_code(u8::try_from(code).unwrap_or_default()),
                None => {
                    let message = format!("`{}` is not a gRPC status: write 0 to 16, or a name such as UNAUTHENTICATED", written(&status.value));
                    self.error(
                        status.referenced,
                        format!("{field_path}.grpc_status"),
                        message,
                    );
                    fits = false;
                }
            }
        }
        fits.then_some(Some(Settlement::CountWhen(set)))
    }
}

/// A status as it was written.
fn written(status: &RawStatus) -> String {
    match status {
        RawStatus::Code(code) => code.to_string(),
        RawStatus::Word(word) => word.clone(),
    }
}
