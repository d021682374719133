use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use parking_lot::Mutex;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Symlinks followed at most on the way to the rules file, as Linux does before `ELOOP`.
const MAX_LINKS: usize = 40;

/// Whether the platform's events report a writer closing a file (inotify does; FSEvents,
/// kqueue and Windows do not). Only then can a write in progress be told from a finished one.
const REPORTS_CLOSE: bool = cfg!(any(target_os = "linux", target_os = "android"));

/// What an event says about the rules file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    /// Bytes were written to the file in place, and more may follow until the writer closes
    /// it. Only where [close events are reported](REPORTS_CLOSE); elsewhere a write is `Other`.
    Written,
    /// No write to the file is in progress any more: its writer closed it, or the file (or a
    /// symlink on the way to it) was replaced.
    WriteEnded,
    /// Anything else that may have changed what the path reads, such as its permissions.
    Other,
}

/// File-system events about the rules file.
///
/// The directory holding the file is watched, not the file: editors and `mv` replace the file
/// by renaming another over it, and a Kubernetes ConfigMap swaps a `..data` symlink beside
/// it; a watch on the file itself would stay on the replaced inode and hear nothing more.
/// When the path leads through symlinks, the directory of each of them and of the file they
/// lead to is watched too (see [`DirectoryEvents::follow`]). Only events about those paths
/// count: other files in the same directories, however busy, are ignored.
pub(super) struct DirectoryEvents {
    watcher: RecommendedWatcher,
    /// The path given, its directory resolved: where every walk down the symlinks starts.
    path: PathBuf,
    /// The directories watched.
    dirs: Vec<PathBuf>,
    /// The paths whose events concern the rules file ([`links`]); read on notify's thread.
    links: Arc<Mutex<Vec<PathBuf>>>,
}

impl DirectoryEvents {
    /// Starts calling `on_change` (on notify's thread) after each event that may have changed
    /// what `path` reads; our own readings of the file are not such events.
    ///
    /// Fails when the directory of `path` cannot be watched.
    pub(super) fn start(
        path: &Path,
        on_change: impl Fn(Change) + Send + 'static,
    ) -> io::Result<DirectoryEvents> {
        let name = path
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
        let home = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => std::fs::canonicalize(parent)?,
            _ => std::env::current_dir()?,
        };
        let links = Arc::new(Mutex::new(Vec::new()));
        let relevant = Arc::clone(&links);
        let mut watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
            let change = match event {
                Ok(event) => {
                    let links = relevant.lock();
                    concerning(&event, &links)
                }
                // An error may have hidden anything, a close among it: waiting for that
                // close could stall reloads until the next edit.
                Err(_) => Some(Change::WriteEnded),
            };
            if let Some(change) = change {
                on_change(change);
            }
        })
        .map_err(into_io)?;
        watcher
            .watch(&home, RecursiveMode::NonRecursive)
            .map_err(into_io)?;
        let mut events = DirectoryEvents {
            watcher,
            path: home.join(name),
            dirs: vec![home],
            links,
        };
        events.follow();
        Ok(events)
    }

    /// Walks the symlinks from the path to the file again, and watches the directory of each
    /// (no longer those left behind); call it before each reading, since a symlink may have
    /// been re-pointed.
    pub(super) fn follow(&mut self) {
        let links = links(&self.path);
        let mut dirs = Vec::new();
        for dir in links.iter().filter_map(|link| link.parent()) {
            push_new(&mut dirs, dir.to_path_buf());
        }
        // Before watching, so that the first events of a new directory already count.
        *self.links.lock() = links;
        for dir in dirs.iter().filter(|dir| !self.dirs.contains(dir)) {
            if let Err(error) = self.watcher.watch(dir, RecursiveMode::NonRecursive) {
                tracing::warn!(
                    directory = %dir.display(),
                    "cannot watch a directory the rules file links through: {error}"
                );
            }
        }
        for old in self.dirs.iter().filter(|old| !dirs.contains(old)) {
            // Fails when the directory is gone, and its watch with it: nothing to undo then.
            let _ = self.watcher.unwatch(old);
        }
        self.dirs = dirs;
    }
}

/// The paths that decide what `path` reads: `path` itself, each symlink met on the way to
/// the file (at most [`MAX_LINKS`], so that a loop ends), and the file reached (which may not
/// exist). The directory of `path` must be resolved already.
fn links(path: &Path) -> Vec<PathBuf> {
    let mut links = vec![path.to_path_buf()];
    let (mut dir, mut rest) = match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => (dir.to_path_buf(), PathBuf::from(name)),
        _ => return links,
    };
    let mut followed = 0;
    while let Some(first) = rest.components().next() {
        let tail: PathBuf = rest.components().skip(1).collect();
        match first {
            Component::Prefix(_) | Component::RootDir => dir.push(first),
            Component::CurDir => {}
            Component::ParentDir => {
                dir.pop();
            }
            Component::Normal(name) => {
                let next = dir.join(name);
                match std::fs::read_link(&next) {
                    Ok(target) if followed < MAX_LINKS => {
                        followed += 1;
                        if target.is_absolute() {
                            dir = PathBuf::new();
                        }
                        push_new(&mut links, next);
                        rest = target.join(tail);
                        continue;
                    }
                    _ => dir = next,
                }
            }
        }
        rest = tail;
    }
    push_new(&mut links, dir);
    links
}

fn push_new(paths: &mut Vec<PathBuf>, path: PathBuf) {
    if !paths.contains(&path) {
        paths.push(path);
    }
}

/// What `event` says about the rules file, if it concerns one of its `links`.
fn concerning(event: &Event, links: &[PathBuf]) -> Option<Change> {
    if event.need_rescan() {
        // The kernel's queue overflowed: events were lost, a close perhaps among them.
        return Some(Change::WriteEnded);
    }
    if !event.paths.iter().any(|path| links.contains(path)) {
        return None;
    }
    change(event.kind)
}

/// What an event of this kind about the file means: opening and reading it change nothing.
fn change(kind: EventKind) -> Option<Change> {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => Some(Change::WriteEnded),
        EventKind::Access(_) => None,
        EventKind::Modify(ModifyKind::Data(_)) if REPORTS_CLOSE => Some(Change::Written),
        EventKind::Create(_) | EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_)) => {
            Some(Change::WriteEnded)
        }
        _ => Some(Change::Other),
    }
}

fn into_io(error: notify::Error) -> io::Error {
    match error.kind {
        notify::ErrorKind::Io(error) => error,
        notify::ErrorKind::PathNotFound => io::Error::new(io::ErrorKind::NotFound, error),
        _ => io::Error::other(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, DataChange, RenameMode};

    #[test]
    fn reading_the_file_is_not_a_change_but_writing_closing_and_renaming_are() {
        let close = |mode| EventKind::Access(AccessKind::Close(mode));
        assert_eq!(
            change(EventKind::Access(AccessKind::Open(AccessMode::Any))),
            None
        );
        assert_eq!(change(close(AccessMode::Read)), None);
        assert_eq!(change(close(AccessMode::Write)), Some(Change::WriteEnded));
        let rename = EventKind::Modify(ModifyKind::Name(RenameMode::To));
        assert_eq!(change(rename), Some(Change::WriteEnded));
        let created = EventKind::Create(CreateKind::File);
        assert_eq!(change(created), Some(Change::WriteEnded));
        let written = change(EventKind::Modify(ModifyKind::Data(DataChange::Any)));
        let expected = if REPORTS_CLOSE {
            Change::Written
        } else {
            Change::Other
        };
        assert_eq!(written, Some(expected));
    }

    #[test]
    fn only_events_about_the_links_count() {
        let links = [PathBuf::from("/etc/tollgate/rules.yaml")];
        let written = |path: &str| {
            Event::new(EventKind::Access(AccessKind::Close(AccessMode::Write)))
                .add_path(path.into())
        };
        assert_eq!(
            concerning(&written("/etc/tollgate/other.log"), &links),
            None
        );
        let ours = concerning(&written("/etc/tollgate/rules.yaml"), &links);
        assert_eq!(ours, Some(Change::WriteEnded));
        let renamed = Event::new(EventKind::Modify(ModifyKind::Name(RenameMode::Both)))
            .add_path("/etc/tollgate/.rules.yaml.new".into())
            .add_path("/etc/tollgate/rules.yaml".into());
        assert_eq!(concerning(&renamed, &links), Some(Change::WriteEnded));
        let overflow = Event::new(EventKind::Other).set_flag(notify::event::Flag::Rescan);
        assert_eq!(concerning(&overflow, &links), Some(Change::WriteEnded));
    }

    #[cfg(unix)]
    #[test]
    fn links_lists_every_symlink_on_the_way_and_the_file() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().expect("temp dir");
        let root = std::fs::canonicalize(dir.path()).expect("resolve");
        for sub in ["home", "middle", "store/v1"] {
            std::fs::create_dir_all(root.join(sub)).expect("dir");
        }
        // home/rules.yaml -> ../middle/current.yaml -> (absolute) store/..data/rules.yaml,
        // with ..data -> v1 as in a ConfigMap.
        symlink("v1", root.join("store/..data")).expect("symlink");
        symlink(
            root.join("store/..data/rules.yaml"),
            root.join("middle/current.yaml"),
        )
        .expect("symlink");
        symlink("../middle/current.yaml", root.join("home/rules.yaml")).expect("symlink");
        let expected: Vec<PathBuf> = [
            "home/rules.yaml",
            "middle/current.yaml",
            "store/..data",
            "store/v1/rules.yaml",
        ]
        .iter()
        .map(|path| root.join(path))
        .collect();
        assert_eq!(links(&root.join("home/rules.yaml")), expected);
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_loop_ends_the_walk() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().expect("temp dir");
        let root = std::fs::canonicalize(dir.path()).expect("resolve");
        symlink("b", root.join("a")).expect("symlink");
        symlink("a", root.join("b")).expect("symlink");
        assert_eq!(links(&root.join("a")), [root.join("a"), root.join("b")]);
    }
}
