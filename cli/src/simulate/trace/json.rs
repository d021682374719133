//! JSON lines: one object a line.
//!
//! ```text
//! {"ts": 1795773600.25, "method": "GET", "path": "/x?y=1", "ip": "203.0.113.9", "headers": {"x-user-id": "42"}}
//! ```
//!
//! `ts` and `ip` are required; `method` defaults to GET, `path` to `/`, `headers` to none.
//! `ts` is Unix seconds, as a number or a string, or an RFC 3339 time. `duration_ms`, how long
//! the request ran (a number or a string), lets the concurrency limits hold its slots that
//! long; `status` (a number) and `response_headers` (an object) are the response's, which
//! `count_when` and `settle` limits read. Other fields are ignored.

use super::{
    check_header_name, client_ip, header_value, method, target, unix_seconds, Shown, TraceRequest,
};
use http::Method;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

/// A line's object, borrowing from the line where it can.
#[derive(Deserialize)]
struct JsonRequest<'a> {
    /// As written: a number's digits are read exactly, not through an `f64`.
    #[serde(borrow)]
    ts: Option<&'a RawValue>,
    /// GET when absent.
    #[serde(borrow)]
    method: Option<Text<'a>>,
    /// The target; `/` when absent.
    #[serde(borrow)]
    path: Option<Text<'a>>,
    #[serde(borrow)]
    ip: Option<Text<'a>>,
    /// None when absent.
    headers: Option<JsonHeaders>,
    #[serde(borrow)]
    duration_ms: Option<&'a RawValue>,
    /// The response's status.
    status: Option<u16>,
    /// The response's headers.
    response_headers: Option<JsonHeaders>,
}

/// A string, borrowed from the line unless it has escapes. (serde's own `Cow<str>` is always
/// owned inside an `Option`.)
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(TextVisitor)
    }
}

/// Reads a [`Text`].
struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Borrowed(text)))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Owned(text.to_owned())))
    }
}

/// The request a line holds, or why it cannot be read.
pub(super) fn parse(line: &str) -> Result<TraceRequest, String> {
    // serde would read an array's items as the fields, in order.
    if !line.starts_with('{') {
        return Err(format!("not a JSON object: got {}", Shown(line)));
    }
    let request: JsonRequest<'_> = serde_json::from_str(line).map_err(|error| message(&error))?;
    let at = match request.ts {
        Some(ts) => time(ts.get())?,
        None => return Err("no time: the `ts` field is missing".to_owned()),
    };
    let ip = match request.ip {
        Some(ip) => client_ip(&ip.0)?,
        None => return Err("no client address: the `ip` field is missing".to_owned()),
    };
    let method = match request.method {
        Some(text) => method(&text.0)?,
        None => Method::GET,
    };
    let target = match request.path {
        Some(path) => target(&path.0)?,
        None => "/".to_owned(),
    };
    let headers = request.headers.map(|headers| headers.0).unwrap_or_default();
    let duration = match request.duration_ms {
        Some(json) => {
            let text = json.get();
            let text = text
                .strip_prefix('"')
                .and_then(|text| text.strip_suffix('"'))
                .unwrap_or(text);
            Some(super::duration_ms(text)?)
        }
        None => None,
    };
    if let Some(status) = request
        .status
        .filter(|status| !(100..=599).contains(status))
    {
        return Err(format!("`{status}` is not a status from 100 to 599"));
    }
    let response_headers = request
        .response_headers
        .map(|headers| headers.0)
        .unwrap_or_default();
    for (name, value) in headers.iter().chain(&response_headers) {
        check_header_name(name)?;
        header_value(name, value)?;
    }
    Ok(TraceRequest {
        at,
        method,
        target,
        ip,
        headers,
        duration,
        status: request.status,
        response_headers,
    })
}

/// A `ts` as written in JSON: a number of Unix seconds, or a string.
fn time(json: &str) -> Result<u64, String> {
    if let Some(text) = json
        .strip_prefix('"')
        .and_then(|json| json.strip_suffix('"'))
    {
        super::time(text)
    } else if json.starts_with(|first: char| first == '-' || first.is_ascii_digit()) {
        unix_seconds(json)
    } else {
        Err(format!(
            "no time: expected a number or a string, got {}",
            Shown(json)
        ))
    }
}

/// A JSON error's message, with the column where it is but not the line, which is always 1.
fn message(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let at = format!(" at line {} column {}", error.line(), error.column());
    let text = text.strip_suffix(&at).unwrap_or(&text);
    let what = match error.classify() {
        serde_json::error::Category::Data => "",
        _ => "not a JSON object: ",
    };
    format!("{what}{text} (column {})", error.column())
}

/// A JSON object's members as request headers, in order.
struct JsonHeaders(Vec<(String, String)>);

impl<'de> Deserialize<'de> for JsonHeaders {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(HeadersVisitor)
    }
}

/// Reads `headers`' object.
struct HeadersVisitor;

impl<'de> Visitor<'de> for HeadersVisitor {
    type Value = JsonHeaders;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of headers")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut headers = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            let value = map.next_value_seed(HeaderValueSeed(&name))?;
            headers.push((name, value));
        }
        Ok(JsonHeaders(headers))
    }
}

/// Reads a header's value, which must be a string; the name is for the error message.
struct HeaderValueSeed<'n>(&'n str);

impl<'de> DeserializeSeed<'de> for HeaderValueSeed<'_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for HeaderValueSeed<'_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a string as the value of header `{}`", self.0)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<String, E> {
        Ok(value.to_owned())
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<String, E> {
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{headers, read, T0};
    use super::super::Format;
    use super::*;

    #[test]
    fn a_full_object_is_a_request() {
        assert_eq!(
            parse(
                r#"{"ts": 1795773600.25, "method": "POST", "path": "/x?y=1", "ip": "203.0.113.9", "headers": {"x-user-id": "42", "Accept": "*/*", "x-user-id": "43"}}"#
            ),
            Ok(TraceRequest {
                at: T0 + 250_000_000,
                method: Method::POST,
                target: "/x?y=1".to_owned(),
                ip: "203.0.113.9".parse().unwrap(),
                headers: headers(&[("x-user-id", "42"), ("Accept", "*/*"), ("x-user-id", "43")]),
                duration: None,
                status: None,
                response_headers: Vec::new(),
            })
        );
    }

    #[test]
    fn method_path_and_headers_have_defaults() {
        let expected = Ok(TraceRequest {
            at: T0,
            method: Method::GET,
            target: "/".to_owned(),
            ip: "2001:db8::1".parse().unwrap(),
            headers: vec![],
            duration: None,
            status: None,
            response_headers: Vec::new(),
        });
        assert_eq!(
            parse(r#"{"ip": "2001:db8::1", "ts": 1795773600}"#),
            expected
        );
        assert_eq!(
            parse(
                r#"{"ip":"2001:db8::1","ts":1795773600,"method":null,"path":null,"headers":null,"extra":{"a":[1,2]}}"#
            ),
            expected
        );
        assert_eq!(
            parse(r#"{"ip": "2001:db8::1", "ts": 1795773600, "headers": {}}"#),
            expected
        );
    }

    #[test]
    fn ts_is_a_number_or_a_string() {
        for (ts, at) in [
            ("1795773600", T0),
            ("1795773600.123456789", T0 + 123_456_789),
            // An f64 would make it 1795773600.1234567165.
            ("1795773600.1234567", T0 + 123_456_700),
            ("1.7957736e9", T0),
            ("\"1795773600.000001\"", T0 + 1_000),
            ("\"2026-11-27T10:00:00.5Z\"", T0 + 500_000_000),
            ("\"2026-11-27T11:00:00.000000001+01:00\"", T0 + 1),
        ] {
            assert_eq!(
                parse(&format!(r#"{{"ts": {ts}, "ip": "::1"}}"#)).map(|r| r.at),
                Ok(at),
                "{ts}"
            );
        }
    }

    #[test]
    fn escaped_strings_are_read() {
        let request = parse(
            r#"{"ts": 1, "ip": "::1", "path": "/a\"b\u00e9", "headers": {"x-a": "\u0041\\"}}"#,
        );
        assert_eq!(
            request.map(|r| (r.target, r.headers)),
            Ok(("/a\"bé".to_owned(), headers(&[("x-a", "A\\")])))
        );
    }

    #[test]
    fn every_bad_field_is_named() {
        for (line, message) in [
            (r#"{"ip": "::1"}"#, "no time: the `ts` field is missing"),
            (r#"{"ts": null, "ip": "::1"}"#, "no time: the `ts` field is missing"),
            (r#"{"ts": 1}"#, "no client address: the `ip` field is missing"),
            (r#"{"ts": true, "ip": "::1"}"#, "no time: expected a number or a string, got `true`"),
            (r#"{"ts": {"s": 1}, "ip": "::1"}"#, "no time: expected a number or a string, got `{\"s\": 1}`"),
            (r#"{"ts": -1, "ip": "::1"}"#, "no time: `-1` is before 1970"),
            (r#"{"ts": "1970-01-01T00:30:00+01:00", "ip": "::1"}"#, "no time: `1970-01-01T00:30:00+01:00` is before 1970"),
            (r#"{"ts": "yesterday", "ip": "::1"}"#, "no time: expected an RFC 3339 time (as in `2026-11-27T10:00:00Z`) or Unix seconds, got `yesterday`"),
            (r#"{"ts": 1, "ip": "localhost"}"#, "no client address: expected an IPv4 or IPv6 address, got `localhost`"),
            (r#"{"ts": 1, "ip": 167772161}"#, "invalid type: integer `167772161`, expected a string (column 25)"),
            (r#"{"ts": 1, "ip": "::1", "method": "GET /"}"#, "no method: `GET /` is not an HTTP method"),
            (r#"{"ts": 1, "ip": "::1", "path": "x"}"#, "no target: expected a path starting with `/`, or `*`, got `x`"),
            (r#"{"ts": 1, "ip": "::1", "path": "/a b"}"#, "no target: `/a b` has a character a URI cannot hold"),
            (r#"{"ts": 1, "ip": "::1", "headers": {"x-user-id": 42}}"#, "invalid type: integer `42`, expected a string as the value of header `x-user-id` (column 50)"),
            (r#"{"ts": 1, "ip": "::1", "headers": [["a", "b"]]}"#, "invalid type: sequence, expected an object of headers (column 34)"),
            (r#"{"ts": 1, "ip": "::1", "headers": {"x user": "1"}}"#, "`x user` is not a header name"),
            (r#"{"ts": 1, "ip": "::1", "headers": {"x-a": "1\n2"}}"#, "header `x-a`: the value `1\\n2` has a control character"),
            (r#"{"ts": 1, "ts": 2, "ip": "::1"}"#, "duplicate field `ts` (column 14)"),
            (r#"["ts", 1]"#, "not a JSON object: got `[\"ts\", 1]`"),
            (r#"{"ts": 1, "ip": "::1""#, "not a JSON object: EOF while parsing an object (column 21)"),
            (r#"{"ts": 1, "ip": "::1"} {}"#, "not a JSON object: trailing characters (column 24)"),
            (r#"{ts: 1}"#, "not a JSON object: key must be a string (column 2)"),
        ] {
            assert_eq!(parse(line).map(|r| r.at), Err(message.to_owned()), "{line}");
        }
    }

    #[test]
    fn a_trace_is_read_with_line_numbers() {
        let trace = "{\"ts\": 1795773600, \"ip\": \"203.0.113.9\"}\n\
                     {\"ts\": 1795773600.5, \"ip\": \"203.0.113.9\", \"path\": 5}\n\
                     \n\
                     {\"ts\": \"2026-11-27T10:00:01Z\", \"ip\": \"203.0.113.10\"}\n";
        let rows: Vec<_> = read(trace, Some(Format::JsonLines))
            .into_iter()
            .map(|row| row.map(|request| (request.at, request.ip.to_string())))
            .collect();
        assert_eq!(
            rows,
            [
                Ok((T0, "203.0.113.9".to_owned())),
                Err("line 2: invalid type: integer `5`, expected a string (column 51)".to_owned()),
                Ok((T0 + 1_000_000_000, "203.0.113.10".to_owned())),
            ]
        );
    }
}
