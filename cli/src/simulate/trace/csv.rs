//! CSV with a header row: columns `ts`, `method`, `path` and `ip` as in JSON lines, and every
//! other column a request header of the column's name.
//!
//! ```text
//! ts,method,path,ip,x-user-id
//! 2026-11-27T10:00:00.25Z,GET,/x?y=1,203.0.113.9,42
//! 1795773600.5,,,203.0.113.9,
//! ```
//!
//! `ts` and `ip` are required; an empty `method` is GET, an empty `path` is `/`, and an empty
//! header cell is an absent header. A `duration_ms` column says how long each request ran; a
//! `status` column and columns named `response:<header>` say what its response was.
//! Cells are trimmed.

use super::{
    check_header_name, client_ip, header_value, method, target, Lines, Row, MAX_LINE_BYTES,
};
use super::{TraceError, TraceRequest};
use csv_core::{ReadRecordResult, ReaderBuilder, Terminator};
use http::Method;
use std::io::{self, BufRead};

/// Reads a CSV trace's records into requests.
pub(super) struct CsvParser {
    parser: csv_core::Reader,
    /// The record read last; its buffers are reused.
    record: Record,
    columns: Columns,
    /// Why the record read last could not be read whole, if it could not.
    broken: Option<String>,
}

/// The most lines one record may span (a quoted cell may hold line feeds): past them, a
/// quote is taken to be left open, and the parser starts afresh on the next line.
const MAX_RECORD_LINES: u64 = 100;

impl CsvParser {
    /// Reads the header row, the first record of `lines`.
    pub(super) fn new<R: BufRead>(lines: &mut Lines<R>) -> Result<Self, TraceError> {
        let mut parser = CsvParser {
            // Only a line feed ends a record: lines are fed without their ending, then `\n`.
            parser: ReaderBuilder::new()
                .terminator(Terminator::Any(b'\n'))
                .build(),
            record: Record {
                fields: vec![0; 1024],
                ends: vec![0; 32],
                written: 0,
                count: 0,
            },
            columns: Columns::default(),
            broken: None,
        };
        let line = parser.read_record(lines)?.ok_or(TraceError::Empty)?;
        if let Some(message) = parser.broken.take() {
            return Err(TraceError::Unreadable { line, message });
        }
        parser.columns = Columns::from_header_row(&parser.record)
            .map_err(|message| TraceError::Unreadable { line, message })?;
        Ok(parser)
    }

    /// Reads the next request.
    pub(super) fn next_row<R: BufRead>(&mut self, lines: &mut Lines<R>) -> io::Result<Option<Row>> {
        let Some(line) = self.read_record(lines)? else {
            return Ok(None);
        };
        if let Some(message) = self.broken.take() {
            return Ok(Some((line, Err(message))));
        }
        Ok(Some((line, self.columns.request(&self.record))))
    }

    /// Reads the next record, and returns the line where it starts; `None` at the end.
    fn read_record<R: BufRead>(&mut self, lines: &mut Lines<R>) -> io::Result<Option<u64>> {
        let Some(start) = lines.advance()? else {
            return Ok(None);
        };
        self.record.written = 0;
        self.record.count = 0;
        loop {
            let spanned = lines.line - start;
            let too_long = lines.too_long || self.record.written > MAX_LINE_BYTES;
            if too_long || spanned >= MAX_RECORD_LINES {
                self.broken = Some(if too_long {
                    format!("a record longer than {MAX_LINE_BYTES} bytes")
                } else {
                    format!("a quoted cell is not closed within {MAX_RECORD_LINES} lines")
                });
                self.parser.reset();
                return Ok(Some(start));
            }
            let line = &lines.buffer[..];
            let content = line.strip_suffix(b"\n").unwrap_or(line);
            let content = content.strip_suffix(b"\r").unwrap_or(content);
            // Empty input would end the trace for the parser.
            if (!content.is_empty() && self.record.feed(&mut self.parser, content))
                || self.record.feed(&mut self.parser, b"\n")
            {
                return Ok(Some(start));
            }
            // A quoted field holds a line feed: the record goes on on the next line, or ends
            // with the trace.
            if !lines.read_line()? {
                self.record.feed(&mut self.parser, b"");
                return Ok(Some(start));
            }
        }
    }
}

/// A record's fields, one after the other, and where each ends.
struct Record {
    fields: Vec<u8>,
    ends: Vec<usize>,
    /// The bytes of `fields` written.
    written: usize,
    /// The number of fields.
    count: usize,
}

impl Record {
    /// Parses `input` into the record; `true` once the record is complete.
    fn feed(&mut self, parser: &mut csv_core::Reader, mut input: &[u8]) -> bool {
        loop {
            let (result, read, written, ended) = parser.read_record(
                input,
                &mut self.fields[self.written..],
                &mut self.ends[self.count..],
            );
            input = &input[read..];
            self.written += written;
            self.count += ended;
            match result {
                ReadRecordResult::InputEmpty => return false,
                ReadRecordResult::OutputFull => self.fields.resize(self.fields.len() * 2, 0),
                ReadRecordResult::OutputEndsFull => self.ends.resize(self.ends.len() * 2, 0),
                ReadRecordResult::Record | ReadRecordResult::End => return true,
            }
        }
    }

    /// The number of fields.
    fn len(&self) -> usize {
        self.count
    }

    /// A field, without surrounding whitespace.
    fn get(&self, index: usize) -> Option<&[u8]> {
        let end = *self.ends[..self.count].get(index)?;
        let start = index.checked_sub(1).map_or(0, |before| self.ends[before]);
        Some(self.fields[start..end].trim_ascii())
    }
}

/// Why a column that is not a request's field is read as a header.
const HEADER_COLUMNS: &str = "columns other than ts, method, path and ip are request headers";

/// Where each field is in a record.
#[derive(Debug, Default)]
struct Columns {
    /// The number of columns.
    count: usize,
    /// The columns of the request's fields, when the header row names them.
    ts: Option<usize>,
    method: Option<usize>,
    path: Option<usize>,
    ip: Option<usize>,
    duration: Option<usize>,
    status: Option<usize>,
    /// The columns named `response:<header>`, with the header's name.
    response_headers: Vec<(usize, String)>,
    /// The other columns, with their names.
    headers: Vec<(usize, String)>,
}

/// Whether `line` looks like a CSV trace's header row: cells `ts` and `ip`, between commas.
pub(super) fn is_header_row(line: &str) -> bool {
    let mut cells = line.split(',').map(|cell| cell.trim().trim_matches('"'));
    line.contains(',') && cells.clone().any(|cell| cell == "ts") && cells.any(|cell| cell == "ip")
}

impl Columns {
    /// The columns a header row names, or why it cannot be one.
    fn from_header_row(record: &Record) -> Result<Self, String> {
        let mut columns = Columns {
            count: record.len(),
            ..Columns::default()
        };
        for index in 0..record.len() {
            let name = std::str::from_utf8(record.get(index).unwrap_or_default())
                .map_err(|_| format!("column {} of the header row is not UTF-8", index + 1))?;
            let field = match name {
                "ts" => &mut columns.ts,
                "method" => &mut columns.method,
                "path" => &mut columns.path,
                "ip" => &mut columns.ip,
                "duration_ms" => &mut columns.duration,
                "status" => &mut columns.status,
                "" => {
                    return Err(format!(
                        "column {} of the header row has no name",
                        index + 1
                    ))
                }
                _ if name.starts_with("response:") => {
                    let header = &name["response:".len()..];
                    check_header_name(header).map_err(|message| {
                        format!("column {} of the header row: {message}", index + 1)
                    })?;
                    columns.response_headers.push((index, header.to_owned()));
                    continue;
                }
                _ => {
                    check_header_name(name).map_err(|message| {
                        format!(
                            "column {} of the header row: {message}; {HEADER_COLUMNS}",
                            index + 1
                        )
                    })?;
                    columns.headers.push((index, name.to_owned()));
                    continue;
                }
            };
            if field.replace(index).is_some() {
                return Err(format!("the header row has two `{name}` columns"));
            }
        }
        for (name, column) in [("ts", columns.ts), ("ip", columns.ip)] {
            if column.is_none() {
                return Err(format!("the header row has no `{name}` column"));
            }
        }
        Ok(columns)
    }

    /// The request a record holds, or why it cannot be read.
    fn request(&self, record: &Record) -> Result<TraceRequest, String> {
        if record.len() != self.count {
            return Err(format!(
                "expected {} cells, as the header row has columns, got {}",
                self.count,
                record.len()
            ));
        }
        // The cell in a column, empty when there is no such column.
        let cell = |column: Option<usize>, name: &str| -> Result<&str, String> {
            let bytes = column
                .and_then(|index| record.get(index))
                .unwrap_or_default();
            std::str::from_utf8(bytes).map_err(|_| format!("the `{name}` cell is not UTF-8"))
        };
        let at = match cell(self.ts, "ts")? {
            "" => return Err("no time: the `ts` cell is empty".to_owned()),
            text => super::time(text)?,
        };
        let ip = match cell(self.ip, "ip")? {
            "" => return Err("no client address: the `ip` cell is empty".to_owned()),
            text => client_ip(text)?,
        };
        let method = match cell(self.method, "method")? {
            "" => Method::GET,
            text => method(text)?,
        };
        let target = match cell(self.path, "path")? {
            "" => "/".to_owned(),
            text => target(text)?,
        };
        let duration = match cell(self.duration, "duration_ms")? {
            "" => None,
            text => Some(super::duration_ms(text)?),
        };
        let status = match cell(self.status, "status")? {
            "" => None,
            text => Some(super::status(text)?),
        };
        let mut headers = Vec::new();
        for (index, name) in &self.headers {
            match cell(Some(*index), name)? {
                "" => {}
                value => headers.push((name.clone(), header_value(name, value)?)),
            }
        }
        let mut response_headers = Vec::new();
        for (index, name) in &self.response_headers {
            match cell(Some(*index), name)? {
                "" => {}
                value => response_headers.push((name.clone(), header_value(name, value)?)),
            }
        }
        Ok(TraceRequest {
            at,
            method,
            target,
            ip,
            headers,
            duration,
            status,
            response_headers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{headers, read, T0};
    use super::super::Format;
    use super::*;

    #[test]
    fn rows_are_requests_and_other_columns_headers() {
        let trace = "\
ts,method,path,ip,x-user-id,User-Agent
2026-11-27T10:00:00.25Z,POST,/x?y=1,203.0.113.9,42,curl/8.5
1795773600.5 , , ,  2001:db8::1 ,,\"a, \"\"quoted\"\" agent\" 
";
        assert_eq!(
            read(trace, None),
            [
                Ok(TraceRequest {
                    at: T0 + 250_000_000,
                    method: Method::POST,
                    target: "/x?y=1".to_owned(),
                    ip: "203.0.113.9".parse().unwrap(),
                    headers: headers(&[("x-user-id", "42"), ("User-Agent", "curl/8.5")]),
                    duration: None,
                    status: None,
                    response_headers: Vec::new(),
                }),
                Ok(TraceRequest {
                    at: T0 + 500_000_000,
                    method: Method::GET,
                    target: "/".to_owned(),
                    ip: "2001:db8::1".parse().unwrap(),
                    headers: headers(&[("User-Agent", "a, \"quoted\" agent")]),
                    duration: None,
                    status: None,
                    response_headers: Vec::new(),
                }),
            ]
        );
    }

    #[test]
    fn only_ts_and_ip_are_required_in_any_order() {
        let trace = "\"ip\",\"ts\"\r\n::1,2026-11-27T11:00:00+01:00\r\n";
        assert_eq!(
            read(trace, Some(Format::Csv)),
            [Ok(TraceRequest {
                at: T0,
                method: Method::GET,
                target: "/".to_owned(),
                ip: "::1".parse().unwrap(),
                headers: vec![],
                duration: None,
                status: None,
                response_headers: Vec::new(),
            })]
        );
    }

    #[test]
    fn header_row_errors_fail_the_trace_at_its_line() {
        for (trace, message) in [
            ("ts,method,path\n", "line 1: the header row has no `ip` column"),
            ("\n\nip,path\n", "line 3: the header row has no `ts` column"),
            ("ts,ip,ts\n", "line 1: the header row has two `ts` columns"),
            ("ts,ip,,x\n", "line 1: column 3 of the header row has no name"),
            ("ts,ip,x user\n", "line 1: column 3 of the header row: `x user` is not a header name; columns other than ts, method, path and ip are request headers"),
            ("TS,ip\n", "line 1: the header row has no `ts` column"),
        ] {
            assert_eq!(
                read(trace, Some(Format::Csv)),
                [Err(message.to_owned())],
                "{trace}"
            );
        }
    }

    #[test]
    fn every_bad_cell_is_named_with_its_line() {
        let trace = "\
ts,ip,method,path,x-a
1795773600,::1,GET,/,a

1795773600,::1,GET,/
1795773600,::1,GET,/,a,b
,::1,GET,/,a
1795773600,,GET,/,a
soon,::1,GET,/,a
1795773600,::1:::,GET,/,a
1795773600,::1,G T,/,a
1795773600,::1,GET,x,a
1795773600,::1,GET,/,\"a\u{1b}b\"
1795773600,::1,GET,\"/a
b\",a
1795773601,::1,GET,/b,a
";
        let rows: Vec<_> = read(trace, None)
            .into_iter()
            .map(|row| row.map(|request| (request.at, request.target)))
            .collect();
        assert_eq!(
            rows,
            [
                Ok((T0, "/".to_owned())),
                Err("line 4: expected 5 cells, as the header row has columns, got 4".to_owned()),
                Err("line 5: expected 5 cells, as the header row has columns, got 6".to_owned()),
                Err("line 6: no time: the `ts` cell is empty".to_owned()),
                Err("line 7: no client address: the `ip` cell is empty".to_owned()),
                Err("line 8: no time: expected an RFC 3339 time (as in `2026-11-27T10:00:00Z`) or Unix seconds, got `soon`".to_owned()),
                Err("line 9: no client address: expected an IPv4 or IPv6 address, got `::1:::`".to_owned()),
                Err("line 10: no method: `G T` is not an HTTP method".to_owned()),
                Err("line 11: no target: expected a path starting with `/`, or `*`, got `x`".to_owned()),
                Err("line 12: header `x-a`: the value `a\\u{1b}b` has a control character".to_owned()),
                Err("line 13: no target: `/a\\nb` has a character a URI cannot hold".to_owned()),
                Ok((T0 + 1_000_000_000, "/b".to_owned())),
            ]
        );
    }

    #[test]
    fn lines_are_counted_across_blank_lines_crlf_and_quoted_line_feeds() {
        let trace =
            "\r\nts,ip,x-a\r\n\r\n1,::1,a\r\n   \r\n2,::1,\"b\r\n\r\nc\"\r\n3,::1\r\n4,::1,\"d";
        let rows: Vec<_> = read(trace, None)
            .into_iter()
            .map(|row| row.map(|request| request.headers))
            .collect();
        assert_eq!(
            rows,
            [
                Ok(headers(&[("x-a", "a")])),
                Err(
                    "line 6: header `x-a`: the value `b\\n\\nc` has a control character".to_owned()
                ),
                Err("line 9: expected 3 cells, as the header row has columns, got 2".to_owned()),
                Ok(headers(&[("x-a", "d")])),
            ]
        );
    }

    #[test]
    fn records_larger_than_the_buffers_are_read() {
        let names: Vec<_> = (0..40).map(|i| format!("x-{i}")).collect();
        let values = vec!["v".repeat(100); 40];
        let trace = format!("ts,ip,{}\n1,::1,{}\n", names.join(","), values.join(","));
        let expected: Vec<_> = names.into_iter().zip(values).collect();
        assert_eq!(
            read(&trace, None)
                .into_iter()
                .map(|row| row.map(|request| request.headers))
                .collect::<Vec<_>>(),
            [Ok(expected)]
        );
    }

    #[test]
    fn a_cell_that_is_not_utf8_is_unreadable() {
        let trace = b"ts,ip,x-a\n1,::1,\xe9\n2,::1,b\n";
        let rows: Vec<_> = super::super::TraceReader::new(&trace[..], None)
            .map(|reader| {
                reader
                    .map(|row| {
                        row.map(|request| request.headers)
                            .map_err(|e| e.to_string())
                    })
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(
            rows,
            [
                Err("line 2: the `x-a` cell is not UTF-8".to_owned()),
                Ok(headers(&[("x-a", "b")]))
            ]
        );
    }

    #[test]
    fn header_rows_are_detected_by_their_ts_and_ip_cells() {
        assert!(is_header_row("ts,ip"));
        assert!(is_header_row(" \"ip\" , x, ts "));
        assert!(!is_header_row("ts,x"));
        assert!(!is_header_row("ts ip"));
        assert!(!is_header_row("timestamp,ip"));
    }
}
