//! Makes every change of the public API deliberate: the API of the library with all features is
//! listed by the `public-api` crate and compared with the committed listing
//! `tests/public-api.txt`.
//!
//! After an intended change, rewrite the listing and commit it with the change:
//!
//! ```sh
//! UPDATE_PUBLIC_API=1 cargo test --test public_api
//! ```
//!
//! The listing comes from rustdoc's JSON output, unstable in rustdoc; the stable toolchain writes
//! it through `scripts/rustdoc-unstable.sh`. `public-api` reads one JSON format version per
//! release, so it is pinned in Cargo.toml to the release that reads the toolchain's.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

const LISTING: &str = "tests/public-api.txt";
const UPDATE_COMMAND: &str = "UPDATE_PUBLIC_API=1 cargo test --test public_api";

#[test]
fn public_api_matches_the_committed_listing() {
    let package_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let json = build_rustdoc_json(package_dir);
    check_format_version(&json);
    let api = public_api::Builder::from_rustdoc_json(&json)
        // `impl<T> From<T> for T` and the like on every type: noise that follows from the rest.
        .omit_blanket_impls(true)
        .build()
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", json.display()))
        .to_string();

    let listing = package_dir.join(LISTING);
    if std::env::var_os("UPDATE_PUBLIC_API").is_some() {
        std::fs::write(&listing, &api)
            .unwrap_or_else(|error| panic!("cannot write {}: {error}", listing.display()));
        return;
    }
    let committed = std::fs::read_to_string(&listing).unwrap_or_default();
    if committed != api {
        panic!("{}", mismatch_report(&committed, &api));
    }
}

/// Runs `cargo rustdoc` for the library with all features, writing JSON, and returns the file.
fn build_rustdoc_json(package_dir: &Path) -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = package_dir.join("Cargo.toml");
    let metadata = Metadata::of(&cargo, &manifest);
    let output = Command::new(&cargo)
        .args([
            "rustdoc",
            "--lib",
            "--all-features",
            "--quiet",
            "--manifest-path",
        ])
        .arg(&manifest)
        .args(["--", "-Z", "unstable-options", "--output-format", "json"])
        .env(
            "RUSTDOC",
            metadata.workspace_root.join("scripts/rustdoc-unstable.sh"),
        )
        .output()
        .expect("cannot run cargo");
    assert!(
        output.status.success(),
        "cargo rustdoc failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    metadata.target_directory.join("doc/tollgate.json")
}

/// Where cargo puts this package's output, and where its scripts are.
#[derive(serde::Deserialize)]
struct Metadata {
    target_directory: PathBuf,
    workspace_root: PathBuf,
}

impl Metadata {
    fn of(cargo: &std::ffi::OsStr, manifest: &Path) -> Self {
        let output = Command::new(cargo)
            .args([
                "metadata",
                "--no-deps",
                "--format-version",
                "1",
                "--manifest-path",
            ])
            .arg(manifest)
            .output()
            .expect("cannot run cargo metadata");
        assert!(
            output.status.success(),
            "cargo metadata failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).expect("cargo metadata printed no directories")
    }
}

/// Fails with what to do when rustdoc writes a JSON format the pinned `public-api` cannot read,
/// as happens after a toolchain update.
fn check_format_version(json: &Path) {
    #[derive(serde::Deserialize)]
    struct Header {
        format_version: u32,
    }
    let text = std::fs::read_to_string(json)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", json.display()));
    let written = serde_json::from_str::<Header>(&text)
        .unwrap_or_else(|error| panic!("{} has no format_version: {error}", json.display()))
        .format_version;
    let read = rustdoc_types::FORMAT_VERSION;
    assert_eq!(
        written, read,
        "rustdoc writes rustdoc JSON format {written}, but the `public-api` dev-dependency reads \
         format {read}. Pin `public-api` in Cargo.toml to the release whose `rustdoc-types` \
         dependency has FORMAT_VERSION {written}, and `rustdoc-types` with it."
    );
}

/// Lists the lines the code lost and gained against the committed listing, and the command that
/// accepts them.
fn mismatch_report(committed: &str, api: &str) -> String {
    let committed_lines: HashSet<&str> = committed.lines().collect();
    let api_lines: HashSet<&str> = api.lines().collect();
    let mut report = format!("the public API differs from {LISTING}.\n");
    if committed_lines == api_lines {
        report.push_str("\nThe same lines, in another order or with other whitespace.\n");
    }
    for (heading, from, other) in [
        ("Gone from the code (breaking):", committed, &api_lines),
        ("New in the code:", api, &committed_lines),
    ] {
        let lines: Vec<&str> = from.lines().filter(|line| !other.contains(line)).collect();
        if !lines.is_empty() {
            let _ = write!(report, "\n{heading}\n");
            for line in lines {
                let _ = writeln!(report, "    {line}");
            }
        }
    }
    let _ = write!(
        report,
        "\nIf the change is intended, rewrite the listing and commit it with the change:\n\n    \
         {UPDATE_COMMAND}\n"
    );
    report
}
