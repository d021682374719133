//! Access logs in the combined log format of nginx and Apache, or in the common log format,
//! which lacks the last two fields:
//!
//! ```text
//! %h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i"
//! 203.0.113.9 - - [27/Nov/2026:10:00:00 +0000] "GET /search?q=x HTTP/1.1" 200 512 "-" "curl/8.5"
//! ```
//!
//! Fields after the user agent, which many configurations add, are ignored, but for one:
//! nginx's `$request_time` (`0.125`) right after it, how long the request ran, lets the
//! concurrency limits hold its slots that long.

use super::{client_ip, header_value, method, target, Shown, TraceRequest};
use http::Method;
use std::borrow::Cow;

/// Reads access-log lines into requests.
#[derive(Debug, Default)]
pub(super) struct CombinedParser {
    /// The last time field read, and its nanoseconds since the Unix epoch: consecutive lines
    /// mostly share their second, and parsing a time is the slowest part of a line.
    last_time: String,
    last_at: u64,
}

impl CombinedParser {
    /// The request a line records, or why it cannot be read.
    pub(super) fn parse(&mut self, line: &str) -> Result<TraceRequest, String> {
        let fields = Fields::split(line)?;
        let ip = client_ip(fields.host)?;
        let at = self.time(fields.time)?;
        let (method, target) = request_line(&fields.request.text())?;
        let mut headers = Vec::new();
        for (name, field) in [
            ("referer", fields.referer),
            ("user-agent", fields.user_agent),
        ] {
            if let Some(field) = field.filter(|field| field.raw != "-") {
                headers.push((name.to_owned(), header_value(name, &field.text())?));
            }
        }
        Ok(TraceRequest {
            at,
            method,
            target,
            ip,
            headers,
            duration: fields.request_time,
            status: Some(fields.status),
            response_headers: Vec::new(),
        })
    }

    /// A time field, `dd/Mon/yyyy:HH:MM:SS ±zzzz`, in nanoseconds since the Unix epoch.
    fn time(&mut self, text: &str) -> Result<u64, String> {
        if text == self.last_time && !text.is_empty() {
            return Ok(self.last_at);
        }
        let at = jiff::fmt::strtime::parse("%d/%b/%Y:%H:%M:%S %z", text)
            .and_then(|time| time.to_timestamp())
            .map_err(|_| {
                format!(
                    "no time: expected `dd/Mon/yyyy:HH:MM:SS ±zzzz`, got {}",
                    Shown(text)
                )
            })?;
        let at = super::since_epoch(at.as_nanosecond(), text)?;
        self.last_time.clear();
        self.last_time.push_str(text);
        self.last_at = at;
        Ok(at)
    }
}

/// Whether `line` has the shape of a combined or common log line, whatever its fields hold.
pub(super) fn is_log_line(line: &str) -> bool {
    Fields::split(line).is_ok()
}

/// The method and the target of a request line, `METHOD TARGET HTTP/x.y`; HTTP/0.9's has no
/// protocol.
fn request_line(text: &str) -> Result<(Method, String), String> {
    let mut parts = text.split(' ');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(method_text), Some(target_text), protocol, None)
            if protocol.is_none_or(|protocol| protocol.starts_with("HTTP/")) =>
        {
            Ok((method(method_text)?, target(target_text)?))
        }
        _ => Err(format!(
            "no request line: expected `METHOD TARGET HTTP/x.y`, got {}",
            Shown(text)
        )),
    }
}

/// The fields of a log line that make a request.
struct Fields<'a> {
    host: &'a str,
    /// Between the brackets.
    time: &'a str,
    request: Quoted<'a>,
    /// Absent in the common log format.
    referer: Option<Quoted<'a>>,
    user_agent: Option<Quoted<'a>>,
    /// nginx's `$request_time`, in nanoseconds, when it follows the user agent.
    request_time: Option<u64>,
    /// The response's status (three digits, checked).
    status: u16,
}

impl<'a> Fields<'a> {
    /// Splits a line into its fields, checking that the status and the size are there.
    fn split(line: &'a str) -> Result<Self, String> {
        let not_a_log_line =
            |expected: &str| format!("not a combined or common log line: expected {expected}");
        let mut rest = Rest(line);
        let host = rest
            .token()
            .ok_or_else(|| not_a_log_line("a client address"))?;
        let (Some(_ident), Some(_user)) = (rest.token(), rest.token()) else {
            return Err(not_a_log_line(
                "the ident and the user after the client address",
            ));
        };
        let time = rest
            .bracketed()
            .ok_or_else(|| not_a_log_line("the time in brackets after the user"))?;
        let request = rest
            .quoted()
            .ok_or_else(|| not_a_log_line("the quoted request line after the time"))?;
        let status = rest.token().unwrap_or_default();
        if status.len() != 3 || !status.bytes().all(|byte| byte.is_ascii_digit()) {
            return Err(not_a_log_line(&format!(
                "a three-digit status after the request line, got {}",
                Shown(status)
            )));
        }
        let size = rest.token().unwrap_or_default();
        if size != "-" && (size.is_empty() || !size.bytes().all(|byte| byte.is_ascii_digit())) {
            return Err(not_a_log_line(&format!(
                "a size in bytes, or `-`, after the status, got {}",
                Shown(size)
            )));
        }
        let (referer, user_agent) = if rest.is_empty() {
            (None, None)
        } else {
            let referer = rest
                .quoted()
                .ok_or_else(|| not_a_log_line("the quoted referer after the size"))?;
            let user_agent = rest
                .quoted()
                .ok_or_else(|| not_a_log_line("the quoted user agent after the referer"))?;
            (Some(referer), Some(user_agent))
        };
        let request_time = if user_agent.is_some() {
            rest.token().and_then(super::request_time)
        } else {
            None
        };
        let status = status.parse().unwrap_or_default();
        Ok(Fields {
            status,
            host,
            time,
            request,
            referer,
            user_agent,
            request_time,
        })
    }
}

/// The part of a line not split yet.
struct Rest<'a>(&'a str);

impl<'a> Rest<'a> {
    /// Whether only spaces are left.
    fn is_empty(&mut self) -> bool {
        self.0 = self.0.trim_start_matches(' ');
        self.0.is_empty()
    }

    /// The next field up to a space; `None` at the end of the line.
    fn token(&mut self) -> Option<&'a str> {
        if self.is_empty() {
            return None;
        }
        let end = self.0.find(' ').unwrap_or(self.0.len());
        let (token, rest) = self.0.split_at(end);
        self.0 = rest;
        Some(token)
    }

    /// The next field, in brackets, without them.
    fn bracketed(&mut self) -> Option<&'a str> {
        self.is_empty();
        let (inside, rest) = self.0.strip_prefix('[')?.split_once(']')?;
        self.0 = rest;
        Some(inside)
    }

    /// The next field, in double quotes, without them.
    fn quoted(&mut self) -> Option<Quoted<'a>> {
        self.is_empty();
        let inside = self.0.strip_prefix('"')?;
        let mut escaped = false;
        let mut bytes = inside.bytes().enumerate();
        while let Some((at, byte)) = bytes.next() {
            match byte {
                b'\\' => {
                    escaped = true;
                    bytes.next();
                }
                b'"' => {
                    self.0 = &inside[at + 1..];
                    return Some(Quoted {
                        raw: &inside[..at],
                        escaped,
                    });
                }
                _ => {}
            }
        }
        None
    }
}

/// A quoted field's text, as written.
#[derive(Clone, Copy)]
struct Quoted<'a> {
    raw: &'a str,
    /// It holds a backslash.
    escaped: bool,
}

impl<'a> Quoted<'a> {
    /// The field's text with `\"` and `\\` unescaped; other escapes, such as nginx's `\x22`,
    /// are kept as written.
    fn text(self) -> Cow<'a, str> {
        if !self.escaped {
            return Cow::Borrowed(self.raw);
        }
        let mut text = String::with_capacity(self.raw.len());
        let mut characters = self.raw.chars();
        while let Some(character) = characters.next() {
            if character == '\\' {
                let mut lookahead = characters.clone();
                if let Some(escaped @ ('"' | '\\')) = lookahead.next() {
                    text.push(escaped);
                    characters = lookahead;
                    continue;
                }
            }
            text.push(character);
        }
        Cow::Owned(text)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{headers, read, T0};
    use super::super::Format;
    use super::*;

    fn one(line: &str) -> Result<TraceRequest, String> {
        CombinedParser::default().parse(line)
    }

    #[test]
    fn a_combined_line_is_a_request_with_referer_and_user_agent() {
        assert_eq!(
            one(
                r#"203.0.113.9 - - [27/Nov/2026:10:00:00 +0000] "GET /search?q=x HTTP/1.1" 200 512 "https://example.com/" "curl/8.5""#
            ),
            Ok(TraceRequest {
                at: T0,
                method: Method::GET,
                target: "/search?q=x".to_owned(),
                ip: "203.0.113.9".parse().unwrap(),
                headers: headers(&[
                    ("referer", "https://example.com/"),
                    ("user-agent", "curl/8.5")
                ]),
                duration: None,
                status: Some(200),
                response_headers: Vec::new(),
            })
        );
    }

    #[test]
    fn a_common_line_has_no_headers() {
        assert_eq!(
            one(r#"2001:db8::7 - alice [27/Nov/2026:11:00:00.5 +0100] "POST /login HTTP/2.0" 302 -"#),
            Err("no time: expected `dd/Mon/yyyy:HH:MM:SS ±zzzz`, got `27/Nov/2026:11:00:00.5 +0100`".to_owned())
        );
        assert_eq!(
            one(r#"2001:db8::7 - alice [27/Nov/2026:11:00:00 +0100] "POST /login HTTP/2.0" 302 -"#),
            Ok(TraceRequest {
                at: T0,
                method: Method::POST,
                target: "/login".to_owned(),
                ip: "2001:db8::7".parse().unwrap(),
                headers: vec![],
                duration: None,
                status: Some(302),
                response_headers: Vec::new(),
            })
        );
    }

    #[test]
    fn times_with_any_offset_are_converted_to_utc() {
        let line = |time: &str| format!(r#"10.0.0.1 - - [{time}] "GET / HTTP/1.1" 200 1 "-" "-""#);
        let mut parser = CombinedParser::default();
        for (time, at) in [
            ("27/Nov/2026:10:00:00 +0000", T0),
            ("27/Nov/2026:05:00:00 -0500", T0),
            ("27/Nov/2026:15:30:01 +0530", T0 + 1_000_000_000),
            ("27/Nov/2026:15:30:01 +0530", T0 + 1_000_000_000),
            ("01/Jan/1970:00:00:00 +0000", 0),
        ] {
            assert_eq!(parser.parse(&line(time)).map(|r| r.at), Ok(at), "{time}");
        }
        assert_eq!(
            parser
                .parse(&line("31/Dec/1969:23:59:59 +0000"))
                .map(|r| r.at),
            Err("no time: `31/Dec/1969:23:59:59 +0000` is before 1970".to_owned())
        );
        assert_eq!(
            parser
                .parse(&line("31/Feb/2026:10:00:00 +0000"))
                .map(|r| r.at),
            Err(
                "no time: expected `dd/Mon/yyyy:HH:MM:SS ±zzzz`, got `31/Feb/2026:10:00:00 +0000`"
                    .to_owned()
            )
        );
        assert_eq!(
            parser.parse(&line("")).map(|r| r.at),
            Err("no time: expected `dd/Mon/yyyy:HH:MM:SS ±zzzz`, got ``".to_owned())
        );
    }

    #[test]
    fn dashes_are_absent_headers_and_extra_fields_are_ignored() {
        let request = one(
            r#"10.0.0.1 - - [27/Nov/2026:10:00:00 +0000] "DELETE /a/1 HTTP/1.1" 204 0 "-" "ua" "198.51.100.1" 0.003"#,
        );
        assert_eq!(
            request.map(|r| (r.method, r.headers)),
            Ok((Method::DELETE, headers(&[("user-agent", "ua")])))
        );
    }

    #[test]
    fn quoted_fields_keep_their_escapes_but_quotes_and_backslashes() {
        let request = one(
            r#"10.0.0.1 - - [27/Nov/2026:10:00:00 +0000] "GET /\x22a\x22 HTTP/1.1" 200 1 "say \"hi\" \\o/ \x41" "-""#,
        );
        assert_eq!(
            request.map(|r| (r.target, r.headers)),
            Ok((
                r"/\x22a\x22".to_owned(),
                headers(&[("referer", r#"say "hi" \o/ \x41"#)])
            ))
        );
    }

    #[test]
    fn http_0_9_request_lines_and_asterisks_are_read() {
        let line = |request: &str| {
            format!(r#"10.0.0.1 - - [27/Nov/2026:10:00:00 +0000] "{request}" 200 1"#)
        };
        assert_eq!(
            one(&line("GET /old")).map(|r| r.target),
            Ok("/old".to_owned())
        );
        assert_eq!(
            one(&line("OPTIONS * HTTP/1.1")).map(|r| (r.method, r.target)),
            Ok((Method::OPTIONS, "*".to_owned()))
        );
    }

    #[test]
    fn every_bad_field_is_named() {
        let time = "[27/Nov/2026:10:00:00 +0000]";
        for (line, message) in [
            (format!(r#"foo - - {time} "GET / HTTP/1.1" 200 1"#), "no client address: expected an IPv4 or IPv6 address, got `foo`".to_owned()),
            (format!(r#"10.0.0.1 - - {time} "-" 400 0 "-" "-""#), "no request line: expected `METHOD TARGET HTTP/x.y`, got `-`".to_owned()),
            (format!(r#"10.0.0.1 - - {time} "GET / HTTP/1.1 x" 400 0"#), "no request line: expected `METHOD TARGET HTTP/x.y`, got `GET / HTTP/1.1 x`".to_owned()),
            (format!(r#"10.0.0.1 - - {time} "GET / SPDY/3" 400 0"#), "no request line: expected `METHOD TARGET HTTP/x.y`, got `GET / SPDY/3`".to_owned()),
            (format!(r#"10.0.0.1 - - {time} "GET" 400 0"#), "no request line: expected `METHOD TARGET HTTP/x.y`, got `GET`".to_owned()),
            (format!(r#"10.0.0.1 - - {time} "G(T / HTTP/1.1" 400 0"#), "no method: `G(T` is not an HTTP method".to_owned()),
            (format!(r#"10.0.0.1 - - {time} "GET example.com:443 HTTP/1.1" 400 0"#), "no target: expected a path starting with `/`, or `*`, got `example.com:443`".to_owned()),
            (format!(r#"10.0.0.1 - - {time} "GET / HTTP/1.1" 200 1 "-" "a{}b""#, '\u{1}'), "header `user-agent`: the value `a\\u{1}b` has a control character".to_owned()),
            (format!(r#"10.0.0.1 - {time} "GET / HTTP/1.1" 200 1"#), "not a combined or common log line: expected the time in brackets after the user".to_owned()),
            ("10.0.0.1".to_owned(), "not a combined or common log line: expected the ident and the user after the client address".to_owned()),
            (format!(r#"10.0.0.1 - - {time} GET / HTTP/1.1 200 1"#), "not a combined or common log line: expected the quoted request line after the time".to_owned()),
            (format!(r#"10.0.0.1 - - {time} "GET / HTTP/1.1 200 1"#), "not a combined or common log line: expected the quoted request line after the time".to_owned()),
            (format!(r#"10.0.0.1 - - {time} "GET / HTTP/1.1""#), "not a combined or common log line: expected a three-digit status after the request line, got ``".to_owned()),
            (format!(r#"10.0.0.1 - - {time} "GET / HTTP/1.1" OK 1"#), "not a combined or common log line: expected a three-digit status after the request line, got `OK`".to_owned()),
            (format!(r#"10.0.0.1 - - {time} "GET / HTTP/1.1" 200"#), "not a combined or common log line: expected a size in bytes, or `-`, after the status, got ``".to_owned()),
            (format!(r#"10.0.0.1 - - {time} "GET / HTTP/1.1" 200 1k"#), "not a combined or common log line: expected a size in bytes, or `-`, after the status, got `1k`".to_owned()),
            (format!(r#"10.0.0.1 - - {time} "GET / HTTP/1.1" 200 1 -"#), "not a combined or common log line: expected the quoted referer after the size".to_owned()),
            (format!(r#"10.0.0.1 - - {time} "GET / HTTP/1.1" 200 1 "-""#), "not a combined or common log line: expected the quoted user agent after the referer".to_owned()),
        ] {
            assert_eq!(one(&line).map(|r| r.at), Err(message), "{line}");
        }
    }

    #[test]
    fn a_log_is_read_with_line_numbers() {
        let trace = "\
203.0.113.9 - - [27/Nov/2026:10:00:00 +0000] \"GET /a HTTP/1.1\" 200 512 \"-\" \"curl/8.5\"

203.0.113.9 - - [27/Nov/2026:10:00:00 +0000] \"GET /b HTTP/1.1\" 200 512 \"-\" \"curl/8.5\"
foo - - [27/Nov/2026:10:00:01 +0000] \"GET /c HTTP/1.1\" 200 512 \"-\" \"curl/8.5\"
::1 - - [27/Nov/2026:10:00:02 +0000] \"GET /d HTTP/1.1\" 200 512
";
        let rows: Vec<_> = read(trace, Some(Format::Combined))
            .into_iter()
            .map(|row| row.map(|request| (request.at, request.target)))
            .collect();
        assert_eq!(
            rows,
            [
                Ok((T0, "/a".to_owned())),
                Ok((T0, "/b".to_owned())),
                Err(
                    "line 4: no client address: expected an IPv4 or IPv6 address, got `foo`"
                        .to_owned()
                ),
                Ok((T0 + 2_000_000_000, "/d".to_owned())),
            ]
        );
    }
}
