//! Text tables with aligned columns.

use std::fmt::{self, Write};

/// Rows under a header, written with each column as wide as its widest cell.
pub(crate) struct Table<const N: usize> {
    header: [&'static str; N],
    rows: Vec<[String; N]>,
}

impl<const N: usize> Table<N> {
    pub(crate) fn new(header: [&'static str; N]) -> Self {
        Table {
            header,
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: [String; N]) {
        self.rows.push(cells);
    }
}

impl<const N: usize> fmt::Display for Table<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header = self.header.map(str::to_owned);
        let lines = || std::iter::once(&header).chain(&self.rows);
        let mut widths = [0; N];
        for line in lines() {
            for (width, cell) in widths.iter_mut().zip(line) {
                *width = (*width).max(cell.chars().count());
            }
        }
        for line in lines() {
            let mut text = String::new();
            for (cell, width) in line.iter().zip(widths) {
                write!(text, "{cell:width$}  ")?;
            }
            writeln!(f, "{}", text.trim_end())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Table;

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let mut table = Table::new(["A", "B"]);
        table.row(["long cell".to_owned(), "x".to_owned()]);
        table.row(["y".to_owned(), String::new()]);
        assert_eq!(table.to_string(), "A          B\nlong cell  x\ny\n");
    }
}
