//! Sizes as the rules write them: `64KiB`, `4MiB`, `1GiB`, or a bare number of bytes.

/// The units of a size, largest first, in bytes: what [`parse_size`] reads and
/// [`format_size`] writes. Binary only: `4MB` would leave the reader guessing which.
const SIZE_UNITS: [(&str, u128); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];

/// `64KiB`, `4MiB`, `1GiB`, or a number of bytes such as `65536`; `None` for anything else.
/// In `u128`, so that any size written is read exactly, however large.
pub(super) fn parse_size(text: &str) -> Option<u128> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let unit = unit.trim();
    if unit.is_empty() {
        return Some(u128::from(number));
    }
    let (_, size) = SIZE_UNITS.iter().find(|(name, _)| *name == unit)?;
    Some(u128::from(number) * size)
}

/// `bytes` as messages show it: with the largest unit that divides it (`4MiB`), else as
/// bytes (`1000 bytes`).
pub(super) fn format_size(bytes: u128) -> String {
    match SIZE_UNITS
        .into_iter()
        .find(|(_, size)| bytes >= *size && bytes.is_multiple_of(*size))
    {
        Some((unit, size)) => format!("{}{unit}", bytes / size),
        None => format!("{bytes} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::{format_size, parse_size};

    #[test]
    fn sizes_parse_in_binary_units_or_bytes() {
        assert_eq!(parse_size("64KiB"), Some(64 * 1024));
        assert_eq!(parse_size("4MiB"), Some(4 << 20));
        assert_eq!(parse_size(" 1 GiB "), Some(1 << 30));
        assert_eq!(parse_size("65536"), Some(65_536));
        assert_eq!(parse_size("0"), Some(0));
        assert_eq!(
            parse_size("18446744073709551615GiB"),
            Some(u128::from(u64::MAX) << 30)
        );
    }

    #[test]
    fn decimal_units_fractions_and_words_are_not_sizes() {
        for text in [
            "4MB", "4mib", "4M", "1.5MiB", "MiB", "", "-4KiB", "lots", "4MiB4",
        ] {
            assert_eq!(parse_size(text), None, "{text}");
        }
    }

    #[test]
    fn sizes_are_shown_in_the_largest_unit_that_divides_them() {
        assert_eq!(format_size(64 * 1024), "64KiB");
        assert_eq!(format_size(4 << 20), "4MiB");
        assert_eq!(format_size(3 << 30), "3GiB");
        assert_eq!(format_size(1536 * 1024), "1536KiB");
        assert_eq!(format_size(1000), "1000 bytes");
        assert_eq!(format_size(0), "0 bytes");
        for bytes in [1024, 65_536, 4 << 20, 12_345] {
            let shown = format_size(bytes);
            let written = shown.strip_suffix(" bytes").unwrap_or(&shown);
            assert_eq!(parse_size(written), Some(bytes), "{shown}");
        }
    }
}
