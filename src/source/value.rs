use arrayvec::ArrayString;
use std::fmt::{self, Write};
use std::ops::Deref;

/// A request's value for one descriptor key: borrowed from the request where it can be, or
/// a short text made from it (a client address) without touching the heap.
#[derive(Debug, Clone)]
pub(crate) enum Value<'a> {
    /// Text borrowed from the request.
    Borrowed(&'a str),
    /// Short text made for the request, kept inline.
    Inline(InlineText),
    /// Text made for the request (e.g. a decoded query parameter).
    Owned(String),
}

/// Up to 44 bytes of text, inline: room for any IPv6 address with its prefix length.
#[derive(Clone, Copy)]
pub(crate) struct InlineText(ArrayString<44>);

impl Value<'_> {
    /// `value` as text, inline when it fits.
    pub(crate) fn display(value: impl fmt::Display) -> Value<'static> {
        let mut inline = InlineText(ArrayString::new());
        match write!(inline, "{value}") {
            Ok(()) => Value::Inline(inline),
            Err(_) => Value::Owned(value.to_string()),
        }
    }

    /// A copy of `text`, inline when it fits.
    pub(crate) fn text(text: &str) -> Value<'static> {
        match ArrayString::from(text) {
            Ok(inline) => Value::Inline(InlineText(inline)),
            Err(_) => Value::Owned(text.to_owned()),
        }
    }
}

impl Deref for Value<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            Value::Borrowed(text) => text,
            Value::Inline(inline) => inline,
            Value::Owned(text) => text,
        }
    }
}

impl Deref for InlineText {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl Write for InlineText {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.0.try_push_str(text).map_err(|_| fmt::Error)
    }
}

impl fmt::Debug for InlineText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_stays_inline_and_long_text_is_owned() {
        let ip = Value::display("2001:db8:1:2::/64");
        assert!(matches!(ip, Value::Inline(_)));
        assert_eq!(&*ip, "2001:db8:1:2::/64");
        let widest = Value::display("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128");
        assert!(matches!(widest, Value::Inline(_)));
        let long = Value::display("x".repeat(100));
        assert!(matches!(long, Value::Owned(_)));
        assert_eq!(long.len(), 100);
    }

    #[test]
    fn copied_text_stays_inline_when_it_fits() {
        assert!(matches!(Value::text("203.0.113.9"), Value::Inline(_)));
        assert_eq!(&*Value::text("203.0.113.9"), "203.0.113.9");
        let long = "y".repeat(45);
        assert!(matches!(Value::text(&long), Value::Owned(_)));
        assert_eq!(&*Value::text(&long), long);
    }
}
