//! Trace files: the requests `tollgate simulate --trace` replays, from a web server's access
//! log, JSON lines or CSV.
//!
//! ```text
//! 203.0.113.9 - - [27/Nov/2026:10:00:00 +0000] "GET /search?q=x HTTP/1.1" 200 512 "-" "curl/8.5"
//!
//! {"ts": 1795773600.25, "method": "GET", "path": "/x?y=1", "ip": "203.0.113.9", "headers": {"x-user-id": "42"}}
//!
//! ts,method,path,ip,x-user-id
//! 2026-11-27T10:00:00.25Z,GET,/x?y=1,203.0.113.9,42
//! ```
//!
//! A [`TraceReader`] yields the requests in the file's order, and an error for each line it
//! cannot read; errors name the line (1-based, as an editor counts). Blank lines are skipped.
//! Requests must come in time order; equal times are in order.

mod combined;
mod csv;
mod json;

use self::combined::CombinedParser;
use self::csv::CsvParser;
use super::traffic::TraceRequest;
use http::uri::PathAndQuery;
use http::Method;
use jiff::Timestamp;
use std::fmt::{self, Write as _};
use std::io::{self, BufRead};
use std::net::IpAddr;
use std::str::FromStr;

/// A trace file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// A web server's access log, in the combined or the common log format.
    Combined,
    /// One JSON object a line.
    JsonLines,
    /// CSV with a header row that names the columns.
    Csv,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Combined => "combined",
            Format::JsonLines => "jsonl",
            Format::Csv => "csv",
        })
    }
}

impl FromStr for Format {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "combined" | "clf" | "common" => Ok(Format::Combined),
            "jsonl" | "json" => Ok(Format::JsonLines),
            "csv" => Ok(Format::Csv),
            _ => Err(format!(
                "unknown trace format {}: expected `combined` (or `clf`, `common`), `jsonl` (or `json`) or `csv`",
                Shown(name)
            )),
        }
    }
}

/// Why a trace, or one of its lines, cannot be read.
#[derive(Debug)]
pub(crate) enum TraceError {
    /// A line that cannot be read: the caller reports it and skips it (or stops, with --strict).
    Unreadable {
        /// The line's number, from 1.
        line: u64,
        /// What is wrong with it.
        message: String,
    },
    /// A request earlier in time than the one before it: the caller stops.
    OutOfOrder {
        /// The request's line.
        line: u64,
        /// The request's time, in nanoseconds since the Unix epoch.
        at: u64,
        /// The line of the request before it.
        previous_line: u64,
        /// The time of the request before it.
        previous: u64,
    },
    /// The format could not be detected from the first non-blank line.
    UnknownFormat {
        /// That line's number.
        line: u64,
    },
    /// The trace has no line but blank ones: there is nothing to detect, nor to replay.
    Empty,
    /// Reading the trace failed; the reader yields nothing after it.
    Io(io::Error),
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::Unreadable { line, message } => write!(f, "line {line}: {message}"),
            TraceError::OutOfOrder {
                line,
                at,
                previous_line,
                previous,
            } => write!(
                f,
                "line {line}: out of time order: {} is before line {previous_line}'s {}",
                Rfc3339(*at),
                Rfc3339(*previous)
            ),
            TraceError::UnknownFormat { line } => write!(
                f,
                "line {line}: unknown trace format: expected a combined or common log line, a JSON object, or a CSV header row with `ts` and `ip` columns"
            ),
            TraceError::Empty => f.write_str("the trace is empty"),
            TraceError::Io(error) => write!(f, "cannot read the trace: {error}"),
        }
    }
}

impl std::error::Error for TraceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TraceError::Io(error) => Some(error),
            _ => None,
        }
    }
}

impl From<io::Error> for TraceError {
    fn from(error: io::Error) -> Self {
        TraceError::Io(error)
    }
}

/// The requests of a trace file, in the file's order.
pub(crate) struct TraceReader<R> {
    format: Format,
    lines: Lines<R>,
    parser: Parser,
    /// The line and the time of the last request yielded: no later request may precede it.
    previous: Option<(u64, u64)>,
    /// An I/O error ended the trace.
    failed: bool,
}

impl<R: BufRead> TraceReader<R> {
    /// Reads `reader` in `format`, or the format detected from the first non-empty line when `None`.
    ///
    /// Fails when the trace is empty, when its format cannot be detected, when a CSV trace's
    /// header row lacks a `ts` or an `ip` column, and on I/O errors.
    pub(crate) fn new(reader: R, format: Option<Format>) -> Result<Self, TraceError> {
        let mut lines = Lines {
            reader,
            buffer: Vec::with_capacity(512),
            line: 0,
            pending: false,
            too_long: false,
        };
        // The first line, without the byte order mark spreadsheets start their CSV with.
        if lines.read_line()? {
            if lines.buffer.starts_with(BYTE_ORDER_MARK) {
                lines.buffer.drain(..BYTE_ORDER_MARK.len());
            }
            lines.pending = !lines.buffer.trim_ascii().is_empty();
        }
        let first = lines.advance()?.ok_or(TraceError::Empty)?;
        lines.pending = true;
        let format = match format {
            Some(format) => format,
            None => detect(&String::from_utf8_lossy(lines.buffer.trim_ascii()))
                .ok_or(TraceError::UnknownFormat { line: first })?,
        };
        let parser = match format {
            Format::Combined => Parser::Combined(CombinedParser::default()),
            Format::JsonLines => Parser::JsonLines,
            Format::Csv => Parser::Csv(Box::new(CsvParser::new(&mut lines)?)),
        };
        Ok(TraceReader {
            format,
            lines,
            parser,
            previous: None,
            failed: false,
        })
    }

    /// The trace's format, given or detected.
    pub(crate) fn format(&self) -> Format {
        self.format
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<TraceRequest, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let row = match &mut self.parser {
            Parser::Combined(parser) => self.lines.next_row(|line| parser.parse(line)),
            Parser::JsonLines => self.lines.next_row(json::parse),
            Parser::Csv(parser) => parser.next_row(&mut self.lines),
        };
        let (line, request) = match row {
            Ok(Some(row)) => row,
            Ok(None) => return None,
            Err(error) => {
                self.failed = true;
                return Some(Err(TraceError::Io(error)));
            }
        };
        let request = match request {
            Ok(request) => request,
            Err(message) => return Some(Err(TraceError::Unreadable { line, message })),
        };
        if let Some((previous_line, previous)) = self.previous {
            if request.at < previous {
                return Some(Err(TraceError::OutOfOrder {
                    line,
                    at: request.at,
                    previous_line,
                    previous,
                }));
            }
        }
        self.previous = Some((line, request.at));
        Some(Ok(request))
    }
}

/// UTF-8's byte order mark, which may open a file.
const BYTE_ORDER_MARK: &[u8] = b"\xef\xbb\xbf";

/// The format of a trace whose first non-blank line is `line`.
fn detect(line: &str) -> Option<Format> {
    if line.starts_with('{') {
        Some(Format::JsonLines)
    } else if combined::is_log_line(line) {
        Some(Format::Combined)
    } else if csv::is_header_row(line) {
        Some(Format::Csv)
    } else {
        None
    }
}

/// A request read from a trace, at a line, or why that line cannot be read.
type Row = (u64, Result<TraceRequest, String>);

/// How a format reads requests from lines, with what it keeps between them.
enum Parser {
    /// One request a line.
    Combined(CombinedParser),
    /// One request a line.
    JsonLines,
    /// One request a record, which may span lines; its parser is large.
    Csv(Box<CsvParser>),
}

/// A trace's lines, read one at a time into the same buffer.
struct Lines<R> {
    reader: R,
    /// The line read last, with its line ending.
    buffer: Vec<u8>,
    /// The number of the line in `buffer`.
    line: u64,
    /// `buffer` holds a line not yet parsed: the first, which `TraceReader::new` looked at.
    pending: bool,
    /// The line in `buffer` was longer than [`MAX_LINE_BYTES`]: `buffer` holds its start.
    too_long: bool,
}

/// The longest line read: a longer one is unreadable (and not kept whole in memory).
pub(super) const MAX_LINE_BYTES: usize = 64 * 1024;

impl<R: BufRead> Lines<R> {
    /// Reads the next non-blank line into the buffer, and returns its number; `None` at the end.
    fn advance(&mut self) -> io::Result<Option<u64>> {
        if std::mem::take(&mut self.pending) {
            return Ok(Some(self.line));
        }
        while self.read_line()? {
            if !self.buffer.trim_ascii().is_empty() {
                return Ok(Some(self.line));
            }
        }
        Ok(None)
    }

    /// Reads the next line into the buffer, blank or not; `false` at the end. Of a line
    /// longer than [`MAX_LINE_BYTES`], only the start is kept, and `too_long` says so.
    fn read_line(&mut self) -> io::Result<bool> {
        self.buffer.clear();
        // Bytes rather than `read_line`: a line that is not UTF-8 is one unreadable line, not
        // the end of the trace.
        let limit = MAX_LINE_BYTES as u64 + 1;
        if io::Read::take(&mut self.reader, limit).read_until(b'\n', &mut self.buffer)? == 0 {
            return Ok(false);
        }
        self.line += 1;
        self.too_long = self.buffer.len() > MAX_LINE_BYTES && !self.buffer.ends_with(b"\n");
        if self.too_long {
            self.skip_rest_of_line()?;
        }
        Ok(true)
    }

    /// Reads past the end of the current line without keeping it.
    fn skip_rest_of_line(&mut self) -> io::Result<()> {
        loop {
            let available = self.reader.fill_buf()?;
            if available.is_empty() {
                return Ok(());
            }
            match available.iter().position(|&byte| byte == b'\n') {
                Some(end) => {
                    self.reader.consume(end + 1);
                    return Ok(());
                }
                None => {
                    let all = available.len();
                    self.reader.consume(all);
                }
            }
        }
    }

    /// Reads the next request, one a line.
    fn next_row(
        &mut self,
        parse: impl FnOnce(&str) -> Result<TraceRequest, String>,
    ) -> io::Result<Option<Row>> {
        let Some(line) = self.advance()? else {
            return Ok(None);
        };
        if self.too_long {
            let message = format!("longer than {MAX_LINE_BYTES} bytes");
            return Ok(Some((line, Err(message))));
        }
        let text = self.buffer.trim_ascii();
        let request = match std::str::from_utf8(text) {
            Ok(text) => parse(text),
            Err(error) => {
                let indent = self.buffer.len() - self.buffer.trim_ascii_start().len();
                Err(format!(
                    "not UTF-8: an invalid byte at column {}",
                    indent + error.valid_up_to() + 1
                ))
            }
        };
        Ok(Some((line, request)))
    }
}

// The fields, as every format reads them. Each error is the line's message: what is missing,
// then why.

/// The client's address.
fn client_ip(text: &str) -> Result<IpAddr, String> {
    text.parse().map_err(|_| {
        format!(
            "no client address: expected an IPv4 or IPv6 address, got {}",
            Shown(text)
        )
    })
}

/// The request's method: any token, as HTTP allows.
fn method(text: &str) -> Result<Method, String> {
    Method::from_bytes(text.as_bytes())
        .map_err(|_| format!("no method: {} is not an HTTP method", Shown(text)))
}

/// The request's target: a path and a query, or `*`.
fn target(text: &str) -> Result<String, String> {
    if text != "*" && !text.starts_with('/') {
        return Err(format!(
            "no target: expected a path starting with `/`, or `*`, got {}",
            Shown(text)
        ));
    }
    // What the simulator's `http::Request` would refuse, refused here, with the line's number.
    if text.parse::<PathAndQuery>().is_err() {
        return Err(format!(
            "no target: {} has a character a URI cannot hold",
            Shown(text)
        ));
    }
    Ok(text.to_owned())
}

/// Checks that `name` can name a request header: a token (RFC 9110, section 5.1).
fn check_header_name(name: &str) -> Result<(), String> {
    const SYMBOLS: &[u8] = b"!#$%&'*+-.^_`|~";
    if !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || SYMBOLS.contains(&byte))
    {
        Ok(())
    } else {
        Err(format!("{} is not a header name", Shown(name)))
    }
}

/// A header's value, checked as `http::HeaderValue` does: no control character but tab.
fn header_value(name: &str, value: &str) -> Result<String, String> {
    if value
        .bytes()
        .all(|byte| byte == b'\t' || (byte >= b' ' && byte != 0x7f))
    {
        Ok(value.to_owned())
    } else {
        Err(format!(
            "header `{name}`: the value {} has a control character",
            Shown(value)
        ))
    }
}

/// What a time written as text should look like.
const TIME_EXPECTED: &str =
    "expected an RFC 3339 time (as in `2026-11-27T10:00:00Z`) or Unix seconds";

/// A time written as RFC 3339 (`2026-11-27T10:00:00.25+01:00`), or as Unix seconds
/// (`1795773600.25`), in nanoseconds since the Unix epoch.
fn time(text: &str) -> Result<u64, String> {
    // Unix seconds have no colon; RFC 3339 always does.
    if text.contains(':') {
        match text.parse::<Timestamp>() {
            Ok(time) => since_epoch(time.as_nanosecond(), text),
            Err(_) => Err(format!("no time: {TIME_EXPECTED}, got {}", Shown(text))),
        }
    } else {
        unix_seconds(text)
    }
}

/// A response's status as a trace writes it (`401`).
fn status(text: &str) -> Result<u16, String> {
    text.trim()
        .parse()
        .ok()
        .filter(|status| (100..=599).contains(status))
        .ok_or_else(|| format!("`{text}` is not a status from 100 to 599"))
}

/// A request's duration in milliseconds (`duration_ms`: `250`, `12.5`), in nanoseconds.
fn duration_ms(text: &str) -> Result<u64, String> {
    match decimal_nanoseconds(text) {
        // Read as seconds, a thousandth of it is the milliseconds in nanoseconds.
        Some(nanoseconds) if nanoseconds >= 0 => {
            Ok(u64::try_from(nanoseconds / 1000).unwrap_or(u64::MAX))
        }
        _ => Err(format!(
            "no duration: expected milliseconds, a number of 0 or more, got {}",
            Shown(text)
        )),
    }
}

/// nginx's `$request_time` (`0.125`: seconds, with their milliseconds), in nanoseconds;
/// `None` for a field that is not one.
fn request_time(text: &str) -> Option<u64> {
    let (whole, fraction) = text.split_once('.')?;
    let is_digits = |digits: &str| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    if !is_digits(whole) || !is_digits(fraction) {
        return None;
    }
    u64::try_from(decimal_nanoseconds(text)?).ok()
}

/// Unix seconds (`1795773600.25`, `1.79577360025e9`), in nanoseconds since the Unix epoch.
fn unix_seconds(text: &str) -> Result<u64, String> {
    match decimal_nanoseconds(text) {
        Some(nanoseconds) => since_epoch(nanoseconds, text),
        None => Err(format!("no time: {TIME_EXPECTED}, got {}", Shown(text))),
    }
}

/// A decimal number of seconds, with an optional sign, fraction and exponent, in nanoseconds:
/// exactly, digits below the nanosecond dropped, saturated beyond `u64`. `None` when it is not
/// a number.
fn decimal_nanoseconds(text: &str) -> Option<i128> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(unsigned) => (true, unsigned),
        None => (false, text),
    };
    let (number, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((number, exponent)) => (number, exponent.parse::<i32>().ok()?),
        None => (unsigned, 0),
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let is_digits = |digits: &str| digits.bytes().all(|byte| byte.is_ascii_digit());
    if whole.len() + fraction.len() == 0 || !is_digits(whole) || !is_digits(fraction) {
        return None;
    }
    // The digits before the decimal point once the number is in nanoseconds.
    let point = i64::try_from(whole.len()).ok()? + i64::from(exponent) + 9;
    let mut nanoseconds: Option<u64> = Some(0);
    let mut taken: i64 = 0;
    for digit in whole.bytes().chain(fraction.bytes()) {
        if taken >= point {
            break;
        }
        nanoseconds = nanoseconds
            .and_then(|n| n.checked_mul(10))
            .and_then(|n| n.checked_add(u64::from(digit - b'0')));
        taken += 1;
    }
    // Zeros up to the point; zero stays zero, and too large stays too large.
    while taken < point && nanoseconds.is_some_and(|n| n != 0) {
        nanoseconds = nanoseconds.and_then(|n| n.checked_mul(10));
        taken += 1;
    }
    let magnitude = nanoseconds.map_or(i128::from(u64::MAX) + 1, i128::from);
    Some(if negative { -magnitude } else { magnitude })
}

/// Nanoseconds since the Unix epoch as a request's time: from 1970 to 2554, as a `u64` holds.
fn since_epoch(nanoseconds: i128, text: &str) -> Result<u64, String> {
    u64::try_from(nanoseconds).map_err(|_| {
        let when = if nanoseconds < 0 {
            "before 1970"
        } else {
            "after 2554"
        };
        format!("no time: {} is {when}", Shown(text))
    })
}

/// Shows nanoseconds since the Unix epoch as an RFC 3339 time in UTC.
struct Rfc3339(u64);

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match Timestamp::from_nanosecond(i128::from(self.0)) {
            Ok(time) => write!(f, "{time}"),
            // Every u64 is within jiff's range (years up to 9999); just in case.
            Err(_) => write!(f, "{} ns after the Unix epoch", self.0),
        }
    }
}

/// Shows a piece of a trace in a message: in backquotes, control characters escaped, and cut
/// after 60 characters, since a line may be anything.
struct Shown<'a>(&'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const LONGEST: usize = 60;
        f.write_char('`')?;
        for character in self.0.chars().take(LONGEST) {
            if character.is_control() {
                write!(f, "{}", character.escape_default())?;
            } else {
                f.write_char(character)?;
            }
        }
        if self.0.chars().nth(LONGEST).is_some() {
            f.write_char('…')?;
        }
        f.write_char('`')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads a whole trace; each error as its message.
    pub(super) fn read(trace: &str, format: Option<Format>) -> Vec<Result<TraceRequest, String>> {
        read_from(trace.as_bytes(), format)
    }

    /// Reads all of `reader`, a trace in `format` (detected when `None`); each error as its
    /// message.
    fn read_from<R: BufRead>(
        reader: R,
        format: Option<Format>,
    ) -> Vec<Result<TraceRequest, String>> {
        match TraceReader::new(reader, format) {
            Ok(reader) => reader
                .map(|row| row.map_err(|error| error.to_string()))
                .collect(),
            Err(error) => vec![Err(error.to_string())],
        }
    }

    /// The times of the requests `reader` holds, and its errors' messages.
    fn times_from<R: BufRead>(reader: R) -> Vec<Result<u64, String>> {
        let rows = read_from(reader, None).into_iter();
        rows.map(|row| row.map(|request| request.at)).collect()
    }

    /// `(name, value)` pairs as a request's headers.
    pub(super) fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|&(name, value)| (name.to_owned(), value.to_owned()))
            .collect()
    }

    /// The times of a trace's requests, and its errors' messages.
    fn times(trace: &str, format: Option<Format>) -> Vec<Result<u64, String>> {
        read(trace, format)
            .into_iter()
            .map(|row| row.map(|request| request.at))
            .collect()
    }

    /// The format detected for a trace.
    fn detected(trace: &str) -> Result<Format, String> {
        TraceReader::new(trace.as_bytes(), None)
            .map(|reader| reader.format())
            .map_err(|error| error.to_string())
    }

    /// 2026-11-27T10:00:00Z.
    pub(super) const T0: u64 = 1_795_773_600_000_000_000;
    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn format_names_read_back() {
        for (name, format) in [
            ("combined", Format::Combined),
            ("clf", Format::Combined),
            ("common", Format::Combined),
            ("jsonl", Format::JsonLines),
            ("json", Format::JsonLines),
            ("csv", Format::Csv),
        ] {
            assert_eq!(name.parse::<Format>(), Ok(format), "{name}");
            assert_eq!(format.to_string().parse::<Format>(), Ok(format));
        }
        assert_eq!(
            "ndjson".parse::<Format>(),
            Err("unknown trace format `ndjson`: expected `combined` (or `clf`, `common`), `jsonl` (or `json`) or `csv`".to_owned())
        );
    }

    #[test]
    fn each_format_is_detected_from_its_first_non_blank_line() {
        let combined =
            "\n  \n203.0.113.9 - - [27/Nov/2026:10:00:00 +0000] \"GET / HTTP/1.1\" 200 512\n";
        assert_eq!(detected(combined), Ok(Format::Combined));
        assert_eq!(
            detected("{\"ts\": 1, \"ip\": \"::1\"}\n"),
            Ok(Format::JsonLines)
        );
        assert_eq!(detected("ts,ip\n1,::1\n"), Ok(Format::Csv));
        assert_eq!(detected("\"ip\",\"ts\",\"user-agent\"\n"), Ok(Format::Csv));
    }

    #[test]
    fn a_log_line_with_a_bad_request_is_still_detected_as_a_log() {
        let trace = "203.0.113.9 - - [27/Nov/2026:10:00:00 +0000] \"\\x16\\x03\" 400 0 \"-\" \"-\"\n\
                     203.0.113.9 - - [27/Nov/2026:10:00:01 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"-\"\n";
        assert_eq!(detected(trace), Ok(Format::Combined));
        assert_eq!(
            times(trace, None),
            [
                Err(
                    "line 1: no request line: expected `METHOD TARGET HTTP/x.y`, got `\\x16\\x03`"
                        .to_owned()
                ),
                Ok(T0 + SECOND),
            ]
        );
    }

    #[test]
    fn an_unknown_format_names_the_first_non_blank_line() {
        let message = "line 3: unknown trace format: expected a combined or common log line, a JSON object, or a CSV header row with `ts` and `ip` columns";
        assert_eq!(detected("\n\nhello world\n"), Err(message.to_owned()));
        assert_eq!(
            detected("time,ip\n"),
            Err(message.replace("line 3", "line 1"))
        );
        assert_eq!(
            detected("ts;ip\n"),
            Err(message.replace("line 3", "line 1"))
        );
    }

    #[test]
    fn an_empty_trace_is_an_error_in_every_format() {
        for format in [
            None,
            Some(Format::Combined),
            Some(Format::JsonLines),
            Some(Format::Csv),
        ] {
            assert_eq!(
                times("", format),
                [Err("the trace is empty".to_owned())],
                "{format:?}"
            );
            assert_eq!(
                times("\n \r\n\t\n", format),
                [Err("the trace is empty".to_owned())]
            );
        }
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        let trace = "\u{feff}ts,ip\n1,::1\n";
        assert_eq!(detected(trace), Ok(Format::Csv));
        assert_eq!(times(trace, None), [Ok(SECOND)]);
        assert_eq!(
            times("\u{feff}\n{\"ts\": 1, \"ip\": \"::1\"}", None),
            [Ok(SECOND)]
        );
    }

    #[test]
    fn a_given_format_is_not_detected() {
        let reader = TraceReader::new("ts,ip\n".as_bytes(), Some(Format::JsonLines));
        assert_eq!(
            reader.map(|reader| reader.format()).ok(),
            Some(Format::JsonLines)
        );
        assert_eq!(
            times("ts,ip\n", Some(Format::JsonLines)),
            [Err("line 1: not a JSON object: got `ts,ip`".to_owned())]
        );
    }

    #[test]
    fn blank_lines_are_skipped_and_counted() {
        let trace = "\n{\"ts\": 1, \"ip\": \"::1\"}\r\n\n   \n{\"ts\": \"x\", \"ip\": \"::1\"}\n\n";
        assert_eq!(
            times(trace, None),
            [
                Ok(SECOND),
                Err("line 5: no time: expected an RFC 3339 time (as in `2026-11-27T10:00:00Z`) or Unix seconds, got `x`".to_owned()),
            ]
        );
    }

    #[test]
    fn a_line_that_is_not_utf8_is_unreadable_and_the_next_is_read() {
        let mut trace = b"  {\"ts\": 1, \"ip\": \"::1\", \"path\": \"/".to_vec();
        trace.extend_from_slice(b"\xe9\"}\n{\"ts\": 2, \"ip\": \"::1\"}\n");
        let rows = times_from(&trace[..]);
        assert_eq!(
            rows,
            [
                Err("line 1: not UTF-8: an invalid byte at column 36".to_owned()),
                Ok(2 * SECOND)
            ]
        );
    }

    #[test]
    fn a_request_before_the_previous_one_is_out_of_order() {
        let trace = "{\"ts\": \"2026-11-27T10:00:02Z\", \"ip\": \"::1\"}\n\
                     \n\
                     {\"ts\": \"2026-11-27T10:00:03Z\", \"ip\": \"::1\"}\n\
                     not json\n\
                     {\"ts\": \"2026-11-27T10:00:01.5Z\", \"ip\": \"::1\"}\n\
                     {\"ts\": \"2026-11-27T10:00:03Z\", \"ip\": \"::1\"}\n";
        assert_eq!(
            times(trace, None),
            [
                Ok(T0 + 2 * SECOND),
                Ok(T0 + 3 * SECOND),
                Err("line 4: not a JSON object: got `not json`".to_owned()),
                Err("line 5: out of time order: 2026-11-27T10:00:01.5Z is before line 3's 2026-11-27T10:00:03Z".to_owned()),
                Ok(T0 + 3 * SECOND),
            ]
        );
    }

    #[test]
    fn out_of_order_carries_both_lines_and_times() {
        let trace = "ts,ip\n1795773602,::1\n1795773601,::1\n";
        let errors: Vec<_> = TraceReader::new(trace.as_bytes(), None)
            .into_iter()
            .flatten()
            .filter_map(Result::err)
            .collect();
        assert!(
            matches!(
                errors[..],
                [TraceError::OutOfOrder {
                    line: 3,
                    at,
                    previous_line: 2,
                    previous
                }] if at == T0 + SECOND && previous == T0 + 2 * SECOND
            ),
            "{errors:?}"
        );
    }

    #[test]
    fn equal_times_are_in_order() {
        let trace = "{\"ts\": 1795773600, \"ip\": \"::1\"}\n\
                     {\"ts\": \"2026-11-27T10:00:00Z\", \"ip\": \"::1\"}\n\
                     {\"ts\": \"2026-11-27T11:00:00+01:00\", \"ip\": \"::1\"}\n";
        assert_eq!(times(trace, None), [Ok(T0), Ok(T0), Ok(T0)]);
    }

    #[test]
    fn an_io_error_ends_the_trace() {
        /// Yields one line, then fails.
        struct Failing(bool);
        impl io::Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("disk on fire"))
            }
        }
        impl BufRead for Failing {
            fn fill_buf(&mut self) -> io::Result<&[u8]> {
                if self.0 {
                    Err(io::Error::other("disk on fire"))
                } else {
                    Ok(b"{\"ts\": 1, \"ip\": \"::1\"}\n")
                }
            }
            fn consume(&mut self, _: usize) {
                self.0 = true;
            }
        }
        let rows = times_from(Failing(false));
        assert_eq!(
            rows,
            [
                Ok(SECOND),
                Err("cannot read the trace: disk on fire".to_owned())
            ]
        );
    }

    #[test]
    fn times_are_read_as_rfc3339_or_unix_seconds() {
        for (text, at) in [
            ("2026-11-27T10:00:00Z", T0),
            ("2026-11-27T10:00:00.25Z", T0 + 250_000_000),
            ("2026-11-27T11:30:00.123456789+01:30", T0 + 123_456_789),
            ("2026-11-27T05:00:00-05:00", T0),
            ("2026-11-27 10:00:00z", T0),
            ("1970-01-01T00:00:00Z", 0),
            ("1795773600", T0),
            ("1795773600.25", T0 + 250_000_000),
            ("1795773600.123456789", T0 + 123_456_789),
            ("1795773600.1234567899", T0 + 123_456_789),
            ("1795773600.", T0),
            (".5", 500_000_000),
            ("0", 0),
            ("-0", 0),
            ("1.7957736e9", T0),
            ("17957736001E-1", T0 + 100_000_000),
            ("1795773600000e-3", T0),
            ("1e-10", 0),
            ("18446744073.709551615", u64::MAX),
        ] {
            assert_eq!(time(text), Ok(at), "{text}");
        }
    }

    #[test]
    fn times_out_of_range_or_unreadable_are_refused() {
        for (text, message) in [
            ("1969-12-31T23:59:59.9Z", "no time: `1969-12-31T23:59:59.9Z` is before 1970"),
            ("-0.000000001", "no time: `-0.000000001` is before 1970"),
            ("18446744073.709551616", "no time: `18446744073.709551616` is after 2554"),
            ("1e400", "no time: `1e400` is after 2554"),
            ("2600-01-01T00:00:00Z", "no time: `2600-01-01T00:00:00Z` is after 2554"),
            ("2026-11-27T10:00:00", "no time: expected an RFC 3339 time (as in `2026-11-27T10:00:00Z`) or Unix seconds, got `2026-11-27T10:00:00`"),
            ("2026-11-27", "no time: expected an RFC 3339 time (as in `2026-11-27T10:00:00Z`) or Unix seconds, got `2026-11-27`"),
            ("", "no time: expected an RFC 3339 time (as in `2026-11-27T10:00:00Z`) or Unix seconds, got ``"),
            (".", "no time: expected an RFC 3339 time (as in `2026-11-27T10:00:00Z`) or Unix seconds, got `.`"),
            ("1e", "no time: expected an RFC 3339 time (as in `2026-11-27T10:00:00Z`) or Unix seconds, got `1e`"),
            ("+1", "no time: expected an RFC 3339 time (as in `2026-11-27T10:00:00Z`) or Unix seconds, got `+1`"),
            ("1_000", "no time: expected an RFC 3339 time (as in `2026-11-27T10:00:00Z`) or Unix seconds, got `1_000`"),
            ("0x10", "no time: expected an RFC 3339 time (as in `2026-11-27T10:00:00Z`) or Unix seconds, got `0x10`"),
        ] {
            assert_eq!(time(text), Err(message.to_owned()), "{text}");
        }
    }

    #[test]
    fn fields_are_checked() {
        assert_eq!(client_ip("2001:db8::1"), Ok("2001:db8::1".parse().unwrap()));
        assert_eq!(
            client_ip("foo"),
            Err("no client address: expected an IPv4 or IPv6 address, got `foo`".to_owned())
        );
        assert_eq!(
            client_ip("[::1]"),
            Err("no client address: expected an IPv4 or IPv6 address, got `[::1]`".to_owned())
        );
        assert_eq!(
            method("PURGE").map(|m| m.to_string()),
            Ok("PURGE".to_owned())
        );
        assert_eq!(
            method("GE T"),
            Err("no method: `GE T` is not an HTTP method".to_owned())
        );
        assert_eq!(
            method(""),
            Err("no method: `` is not an HTTP method".to_owned())
        );
        assert_eq!(target("*"), Ok("*".to_owned()));
        assert_eq!(target("/a?b=c"), Ok("/a?b=c".to_owned()));
        assert_eq!(
            target("http://example.com/"),
            Err(
                "no target: expected a path starting with `/`, or `*`, got `http://example.com/`"
                    .to_owned()
            )
        );
        assert_eq!(
            target("/a\tb"),
            Err("no target: `/a\\tb` has a character a URI cannot hold".to_owned())
        );
        assert_eq!(check_header_name("X-User_Id.2"), Ok(()));
        assert_eq!(
            check_header_name("x user"),
            Err("`x user` is not a header name".to_owned())
        );
        assert_eq!(
            check_header_name(""),
            Err("`` is not a header name".to_owned())
        );
        assert_eq!(header_value("a", "b\tc é"), Ok("b\tc é".to_owned()));
        assert_eq!(
            header_value("a", "b\u{7f}"),
            Err("header `a`: the value `b\\u{7f}` has a control character".to_owned())
        );
    }

    #[test]
    fn long_pieces_are_cut_in_messages() {
        let long = "x".repeat(61);
        assert_eq!(Shown(&long).to_string(), format!("`{}…`", &long[..60]));
        assert_eq!(Shown(&long[..60]).to_string(), format!("`{}`", &long[..60]));
    }

    /// Reads 1,000,000 generated lines of each format from a file and prints the time a line.
    /// `cargo test --release -p tollgate-cli -- --ignored --nocapture reading_speed`
    #[test]
    #[ignore = "a measurement: run it with --release"]
    fn reading_speed() {
        use std::io::Write as _;
        const LINES: u64 = 1_000_000;
        /// Writes line `i` of a trace.
        type Generator = fn(u64) -> String;
        let formats: [(Format, &str, Generator); 3] = [
            (Format::Combined, "", |i| {
                // 400 requests a second.
                let (minute, second) = (i / 400 / 60, i / 400 % 60);
                format!(
                    "203.0.113.{} - - [27/Nov/2026:10:{minute:02}:{second:02} +0000] \"GET /search?q={i} HTTP/1.1\" 200 512 \"https://example.com/\" \"Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0\"\n",
                    i % 256
                )
            }),
            (Format::JsonLines, "", |i| {
                format!(
                    "{{\"ts\": {}.{:06}, \"method\": \"GET\", \"path\": \"/search?q={i}\", \"ip\": \"203.0.113.{}\", \"headers\": {{\"x-user-id\": \"{}\", \"user-agent\": \"curl/8.5\"}}}}\n",
                    1_795_773_600 + i / 1000,
                    i % 1000 * 1000,
                    i % 256,
                    i % 1000
                )
            }),
            (
                Format::Csv,
                "ts,method,path,ip,x-user-id,user-agent\n",
                |i| {
                    format!(
                        "{}.{:06},GET,/search?q={i},203.0.113.{},{},curl/8.5\n",
                        1_795_773_600 + i / 1000,
                        i % 1000 * 1000,
                        i % 256,
                        i % 1000
                    )
                },
            ),
        ];
        for (format, header, line) in formats {
            let mut file = tempfile::NamedTempFile::new().expect("a temporary file");
            {
                let mut writer = io::BufWriter::new(file.as_file_mut());
                writer.write_all(header.as_bytes()).expect("written");
                for i in 0..LINES {
                    writer.write_all(line(i).as_bytes()).expect("written");
                }
                writer.flush().expect("written");
            }
            let reader = io::BufReader::new(file.reopen().expect("reopened"));
            let start = std::time::Instant::now();
            let trace = TraceReader::new(reader, None).expect("a trace");
            assert_eq!(trace.format(), format);
            let mut count = 0;
            for request in trace {
                let request = request.expect("a request");
                std::hint::black_box(request);
                count += 1;
            }
            let elapsed = start.elapsed();
            assert_eq!(count, LINES);
            println!(
                "{format}: {:.0} ns a line",
                elapsed.as_nanos() as f64 / LINES as f64
            );
        }
    }

    #[test]
    fn a_line_too_long_is_unreadable_and_the_next_is_read() {
        let long = format!(
            "{{\"ts\": 1, \"ip\": \"203.0.113.9\", \"x\": \"{}\"}}\n",
            "a".repeat(MAX_LINE_BYTES)
        );
        let trace = format!("{long}{{\"ts\": 2, \"ip\": \"203.0.113.9\"}}\n");
        let reader = TraceReader::new(trace.as_bytes(), Some(Format::JsonLines)).unwrap();
        let rows: Vec<_> = reader.map(|row| row.map(|request| request.at)).collect();
        assert!(
            matches!(&rows[0], Err(TraceError::Unreadable { line: 1, message }) if message.contains("longer than")),
            "{rows:?}"
        );
        assert_eq!(rows[1].as_ref().ok(), Some(&(2 * SECOND)));
    }

    #[test]
    fn a_quote_left_open_in_csv_spoils_a_bounded_run_of_lines() {
        let mut trace = String::from("ts,ip\n1,\"203.0.113.9\n");
        for _ in 0..200 {
            trace.push_str("2,203.0.113.9\n");
        }
        let reader = TraceReader::new(trace.as_bytes(), Some(Format::Csv)).unwrap();
        let rows: Vec<_> = reader.collect();
        assert!(
            matches!(&rows[0], Err(TraceError::Unreadable { line: 2, message }) if message.contains("not closed")),
            "{:?}",
            rows[0]
        );
        let read = rows.iter().filter(|row| row.is_ok()).count();
        assert!(
            read >= 100,
            "the lines after the spoilt ones are read: {read}"
        );
    }
}
