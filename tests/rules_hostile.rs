//! Hostile and broken rules files: too large, too deep, alias bombs, endless, not UTF-8,
//! empty or missing; each refused with an error instead of exhausting memory or time.

use tollgate::rules::Rules;

#[path = "common/rules.rs"]
mod rules_common;

use rules_common::*;

#[test]
fn oversized_rules_are_refused_before_parsing() {
    let padding = |bytes: usize| format!("# {}\n", "x".repeat(bytes));
    let base = one_limit("unit: minute, requests_per_unit: 1");

    let huge = format!("{base}{}", padding(MAX_FILE_BYTES));
    assert!(huge.len() > MAX_FILE_BYTES);
    let errors = reject(&huge);
    let error = only_error(&errors);
    assert_eq!(error.line(), None);
    assert!(
        error.message().contains(&huge.len().to_string())
            && error.message().contains(&MAX_FILE_BYTES.to_string()),
        "the message should give the size and the limit: {error}"
    );

    // Right at the limit, the same rules are still accepted.
    let at_limit = format!("{base}{}", padding(MAX_FILE_BYTES - base.len() - 3));
    assert_eq!(at_limit.len(), MAX_FILE_BYTES);
    assert_eq!(compile(&at_limit).limits().len(), 1);

    let file = file_with(huge.as_bytes());
    let errors = Rules::from_file(file.path()).expect_err("a huge file is refused");
    assert!(
        errors
            .to_string()
            .contains(&file.path().display().to_string()),
        "{errors}"
    );
}

#[test]
fn descriptors_nested_beyond_sixteen_levels_are_refused() {
    let fine = compile(&nested_descriptors(MAX_DEPTH));
    assert_eq!(fine.limits().len(), MAX_DEPTH);
    assert_eq!(
        fine.limits()[MAX_DEPTH - 1].descriptor(),
        vec!["method"; MAX_DEPTH].join("/")
    );

    let text = nested_descriptors(20);
    let errors = reject(&text);
    let error = only_error(&errors);
    let path = format!("descriptors[0]{}", ".descriptors[0]".repeat(MAX_DEPTH));
    assert_eq!(error.path(), path);
    assert_on_line(
        error,
        line_of(&text, &format!("# level {}\n", MAX_DEPTH + 1)),
    );
    assert!(error.message().contains("16"), "{error}");
}

#[test]
fn descriptors_nested_beyond_the_yaml_budget_are_refused() {
    let errors = reject(&nested_descriptors(100));
    let error = only_error(&errors);
    assert!(error.line().is_some(), "{error}");
    assert!(
        error.message().to_lowercase().contains("depth"),
        "the message should say the nesting is too deep: {error}"
    );
}

#[test]
fn alias_bombs_are_refused() {
    // Nine levels of ten aliases each: 10^9 copies of the first entry once expanded.
    let mut typed = String::from("domain: bomb\nsources:\n");
    for i in 0..10 {
        typed.push_str(&format!("  k{i}: {{ header: x-k{i} }}\n"));
    }
    typed.push_str(
        "descriptors:\n  - &l0 { key: k0, rate_limit: { unit: second, requests_per_unit: 1 } }\n",
    );
    for i in 1..10 {
        let aliases = vec![format!("*l{}", i - 1); 10].join(", ");
        typed.push_str(&format!(
            "  - &l{i} {{ key: k{i}, descriptors: [{aliases}] }}\n"
        ));
    }

    // One large string, aliased as often as the alias budget allows: ~100 MiB once expanded.
    let mut wide = format!(
        "domain: bomb\nsources:\n  s:\n    - {{ value: &big \"{}\" }}\n",
        "lol".repeat(350_000)
    );
    wide.push_str(&"    - { value: *big }\n".repeat(99));

    for bomb in [typed, wide] {
        let errors = reject(&bomb);
        let error = only_error(&errors);
        assert!(error.line().is_some(), "{error}");
        assert!(error.message().contains("budget"), "{error}");
    }
}

#[test]
fn deeply_nested_flow_collections_are_refused() {
    let depth = 100_000;
    let balanced = format!(
        "domain: d\ndescriptors: {}{}\n",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let unclosed = format!("domain: d\ndescriptors: {}\n", "[".repeat(depth));
    let mappings = format!(
        "domain: d\ndescriptors: {}{}\n",
        "{a: ".repeat(depth),
        "}".repeat(depth)
    );
    for yaml in [balanced, unclosed, mappings] {
        let errors = reject(&yaml);
        let error = only_error(&errors);
        assert_eq!(error.line(), Some(2), "{error}");
    }
}

#[test]
fn rules_file_that_is_not_utf8_is_refused() {
    let mut bytes = b"domain: \xff\xfe\n".to_vec();
    bytes.extend_from_slice(one_limit("unit: minute, requests_per_unit: 1").as_bytes());
    let file = file_with(&bytes);
    let errors = Rules::from_file(file.path()).expect_err("the file is not UTF-8");
    let shown = errors.to_string();
    assert!(
        shown.contains(&file.path().display().to_string()),
        "{shown}"
    );
    assert!(shown.contains("UTF-8"), "{shown}");
}

#[test]
fn empty_rules_file_is_refused() {
    for contents in ["", "\n\n", "# only a comment\n", "---\n"] {
        let file = file_with(contents.as_bytes());
        let errors = Rules::from_file(file.path()).expect_err("an empty file has no domain");
        assert!(!errors.errors().is_empty());
        assert!(
            errors
                .to_string()
                .contains(&file.path().display().to_string()),
            "{errors}"
        );
    }
}

#[test]
fn missing_rules_file_is_refused_naming_the_path() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let missing = dir.path().join("rules.yaml");
    assert!(!missing.exists());
    let errors = Rules::from_file(&missing).expect_err("the file does not exist");
    let error = only_error(&errors);
    assert_eq!(error.line(), None);
    assert!(error.message().contains("cannot read"), "{error}");
    let shown = errors.to_string();
    assert!(
        shown.contains(&missing.display().to_string()),
        "the report should name the file: {shown}"
    );
}

#[cfg(unix)]
#[test]
fn an_endless_rules_file_is_refused_without_reading_it_all() {
    let errors = Rules::from_file("/dev/zero").expect_err("an endless file is not rules");
    assert!(errors.to_string().contains("the limit is"), "{errors}");
}
