//! Where `tollgate serve` reads its rules: one file, or a directory of them, one domain
//! each (envoyproxy/ratelimit's layout: every `*.yaml` of `$RUNTIME_ROOT/
//! $RUNTIME_SUBDIRECTORY/config/`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tollgate::rules::{KeySources, Rules};

/// The rules files of the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RulesSource {
    /// One file: one domain.
    File(PathBuf),
    /// Every `*.yaml` and `*.yml` file directly in this directory, one domain each (or, with
    /// `merge`, several files of one domain merged, as `MERGE_DOMAIN_CONFIG=true` does).
    Directory { path: PathBuf, merge: bool },
}

/// What reading the rules found: the files that compiled, and the others, with why not.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    /// A domain's file (the first, when several merge) and its rules.
    pub(crate) compiled: Vec<(PathBuf, Rules)>,
    /// A file that did not compile, and its errors.
    pub(crate) failed: Vec<(PathBuf, String)>,
}

impl RulesSource {
    /// `path`: a directory of files, merged by domain when `merge`, or one file.
    pub(crate) fn at(path: PathBuf, merge: bool) -> Self {
        if path.is_dir() {
            RulesSource::Directory { path, merge }
        } else {
            RulesSource::File(path)
        }
    }

    /// What is watched for changes.
    pub(crate) fn path(&self) -> &Path {
        match self {
            RulesSource::File(path) | RulesSource::Directory { path, .. } => path,
        }
    }

    /// Reads and compiles every file, for a rate limit service.
    pub(crate) fn load(&self) -> Loaded {
        let mut loaded = Loaded::default();
        let (path, merge) = match self {
            RulesSource::File(path) => {
                match Rules::from_file_with(path, KeySources::Given) {
                    Ok(rules) => loaded.compiled.push((path.clone(), rules)),
                    Err(errors) => loaded.failed.push((path.clone(), errors.to_string())),
                }
                return loaded;
            }
            RulesSource::Directory { path, merge } => (path, *merge),
        };
        let files = match rules_files(path) {
            Ok(files) => files,
            Err(error) => {
                loaded.failed.push((path.clone(), error));
                return loaded;
            }
        };
        // Each file alone first: its own mistakes are its own, and it says its domain.
        let mut by_domain: BTreeMap<String, Vec<(PathBuf, Rules)>> = BTreeMap::new();
        for file in files {
            match Rules::from_file_with(&file, KeySources::Given) {
                Ok(rules) => by_domain
                    .entry(rules.domain().to_owned())
                    .or_default()
                    .push((file, rules)),
                Err(errors) => loaded.failed.push((file, errors.to_string())),
            }
        }
        for (domain, mut files) in by_domain {
            if files.len() == 1 {
                loaded.compiled.extend(files.pop());
                continue;
            }
            let paths: Vec<&Path> = files.iter().map(|(file, _)| file.as_path()).collect();
            if merge {
                match Rules::from_files_with(&paths, KeySources::Given) {
                    Ok(rules) => loaded.compiled.push((paths[0].to_owned(), rules)),
                    Err(errors) => {
                        let failed = paths.iter().map(|p| (p.to_path_buf(), errors.to_string()));
                        loaded.failed.extend(failed);
                    }
                }
                continue;
            }
            // As envoyproxy/ratelimit refuses a second file of a domain.
            let first = paths[0].display().to_string();
            for (file, _) in files {
                let message = format!(
                    "{}: duplicate domain `{domain}` (also in {first}): one file a domain, unless MERGE_DOMAIN_CONFIG=true merges them",
                    file.display()
                );
                loaded.failed.push((file, message));
            }
        }
        loaded
    }
}

/// The rules files of `directory`: its `*.yaml` and `*.yml` files, by name.
fn rules_files(directory: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(directory)
        .map_err(|error| format!("cannot read {}: {error}", directory.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_file())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "yaml" || extension == "yml")
        })
        .collect();
    files.sort();
    Ok(files)
}
