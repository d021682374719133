use serde_saphyr::Location;
use std::fmt;

/// One mistake in a rules file: where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    line: Option<u64>,
    column: Option<u64>,
    path: String,
    message: String,
}

impl RuleError {
    pub(crate) fn new(
        location: Location,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        let known = location != Location::UNKNOWN;
        RuleError {
            line: known.then(|| location.line()),
            column: known.then(|| location.column()),
            path: path.into(),
            message: message.into(),
        }
    }

    /// The line (from 1), when the rules came from a file.
    pub fn line(&self) -> Option<u64> {
        self.line
    }

    /// The column (from 1), when the rules came from a file.
    pub fn column(&self) -> Option<u64> {
        self.column
    }

    /// The path of the entry, e.g. `descriptors[2].descriptors[0].rate_limit.unit`.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let (Some(line), Some(column)) = (self.line, self.column) {
            write!(f, "{line}:{column}: ")?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for RuleError {}

/// Every mistake found in a rules file; the rules are used only when there are none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleErrors {
    source: Option<String>,
    errors: Vec<RuleError>,
}

impl RuleErrors {
    pub(crate) fn new(errors: Vec<RuleError>) -> Self {
        RuleErrors {
            source: None,
            errors,
        }
    }

    /// The same errors, reported as coming from `file` (e.g. a path).
    #[must_use]
    pub fn in_file(mut self, file: impl Into<String>) -> Self {
        self.source = Some(file.into());
        self
    }

    /// The errors, in the order of the file.
    pub fn errors(&self) -> &[RuleError] {
        &self.errors
    }
}

impl fmt::Display for RuleErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.errors.len();
        match &self.source {
            Some(file) => writeln!(f, "{file}: {count} error(s) in the rate-limit rules:")?,
            None => writeln!(f, "{count} error(s) in the rate-limit rules:")?,
        }
        for error in &self.errors {
            match &self.source {
                Some(file) if error.line.is_some() => writeln!(f, "  {file}:{error}")?,
                Some(file) => writeln!(f, "  {file}: {error}")?,
                None => writeln!(f, "  {error}")?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for RuleErrors {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn a_rule_error_is_an_error_that_says_where_and_what() {
        let error = RuleError::new(
            Location::UNKNOWN,
            "defaults.unit",
            "`fortnight` is not a unit",
        );
        let error: &dyn Error = &error;
        assert_eq!(
            error.to_string(),
            "defaults.unit: `fortnight` is not a unit"
        );
        assert!(error.source().is_none());
    }

    #[test]
    fn rule_errors_are_an_error_that_lists_each_mistake() {
        let mistake = RuleError::new(Location::UNKNOWN, "domain", "missing");
        let errors = RuleErrors::new(vec![mistake]).in_file("rules.yaml");
        let errors: &dyn Error = &errors;
        assert_eq!(
            errors.to_string(),
            "rules.yaml: 1 error(s) in the rate-limit rules:\n  rules.yaml: domain: missing\n"
        );
    }
}
