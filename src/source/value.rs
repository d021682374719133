use std::fmt::{self, Write};
use std::ops::Deref;

/// A request's value for one descriptor key: borrowed from the request where it can be, or
/// a short text made from it (a client address) without touching the heap.
#[derive(Debug, Clone)]
pub enum Value<'a> {
    /// Text borrowed from the request.
    Borrowed(&'a str),
    /// Short text made for the request, kept inline.
    Inline(InlineText),
    /// Text made for the request (e.g. a decoded query parameter).
    Owned(String),
}

/// Up to 47 bytes of text, inline.
#[derive(Clone, Copy)]
pub struct InlineText {
    bytes: [u8; 47],
    len: u8,
}

impl Value<'_> {
    /// `value` as text, inline when it fits.
    pub fn display(value: impl fmt::Display) -> Value<'static> {
        let mut inline = InlineText {
            bytes: [0; 47],
            len: 0,
        };
        match write!(inline, "{value}") {
            Ok(()) => Value::Inline(inline),
            Err(_) => Value::Owned(value.to_string()),
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
        // Only whole `str`s are ever written, so the bytes are UTF-8.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl Write for InlineText {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let start = usize::from(self.len);
        let end = start + text.len();
        let slot = self.bytes.get_mut(start..end).ok_or(fmt::Error)?;
        slot.copy_from_slice(text.as_bytes());
        self.len = u8::try_from(end).map_err(|_| fmt::Error)?;
        Ok(())
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
        let long = Value::display("x".repeat(100));
        assert!(matches!(long, Value::Owned(_)));
        assert_eq!(long.len(), 100);
    }
}
