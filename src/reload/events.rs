use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use std::io;
use std::path::{Path, PathBuf};

/// File-system events that may mean the rules file changed.
///
/// The directory holding the file is watched, not the file: editors and `mv` replace the file
/// by renaming another over it, and a Kubernetes ConfigMap swaps a `..data` symlink beside
/// it; a watch on the file itself would stay on the replaced inode and hear nothing more.
/// When the file is a symlink into another directory, that directory is watched too (see
/// [`DirectoryEvents::follow`]), so that edits made in place at the far end are heard.
pub(super) struct DirectoryEvents {
    watcher: RecommendedWatcher,
    /// The directory holding the path, resolved, to tell whether a symlink leads elsewhere.
    home: PathBuf,
    /// The directory of the file the path resolves to, when it is not `home`.
    target: Option<PathBuf>,
}

impl DirectoryEvents {
    /// Starts calling `on_change` (on notify's thread) after each event in the directory of
    /// `path` that may have changed it; our own readings of the file are not such events.
    pub(super) fn start(
        path: &Path,
        on_change: impl Fn() + Send + 'static,
    ) -> io::Result<DirectoryEvents> {
        let mut watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
            // An error (e.g. the kernel's event queue overflowed) may have hidden a change.
            if event.map_or(true, |event| may_change_content(event.kind)) {
                on_change();
            }
        })
        .map_err(into_io)?;
        let home = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        watcher
            .watch(home, RecursiveMode::NonRecursive)
            .map_err(into_io)?;
        let mut events = DirectoryEvents {
            watcher,
            home: std::fs::canonicalize(home)?,
            target: None,
        };
        events.follow(path);
        Ok(events)
    }

    /// Watches the directory that `path` now resolves to, when a symlink leads out of its own
    /// directory; call it before each reading, since the symlink may have been re-pointed.
    pub(super) fn follow(&mut self, path: &Path) {
        let target = std::fs::canonicalize(path)
            .ok()
            .and_then(|file| file.parent().map(Path::to_path_buf))
            .filter(|dir| *dir != self.home);
        if target == self.target {
            return;
        }
        if let Some(old) = self.target.take() {
            // Fails when the directory is gone, and its watch with it: nothing to undo then.
            let _ = self.watcher.unwatch(&old);
        }
        if let Some(dir) = target {
            match self.watcher.watch(&dir, RecursiveMode::NonRecursive) {
                Ok(()) => self.target = Some(dir),
                Err(error) => tracing::warn!(
                    directory = %dir.display(),
                    "cannot watch the directory the rules file links to: {error}"
                ),
            }
        }
    }
}

/// Whether an event of this kind may have changed a file's content: anything but opening
/// and reading, except that closing a file written to marks the end of a write.
fn may_change_content(kind: EventKind) -> bool {
    match kind {
        EventKind::Access(access) => access == AccessKind::Close(AccessMode::Write),
        _ => true,
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
    use notify::event::{CreateKind, ModifyKind, RenameMode};

    #[test]
    fn reading_the_file_is_not_a_change_but_writing_and_renaming_are() {
        assert!(!may_change_content(EventKind::Access(AccessKind::Open(
            AccessMode::Any
        ))));
        assert!(!may_change_content(EventKind::Access(AccessKind::Close(
            AccessMode::Read
        ))));
        assert!(may_change_content(EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(may_change_content(EventKind::Modify(ModifyKind::Name(
            RenameMode::To
        ))));
        assert!(may_change_content(EventKind::Create(CreateKind::File)));
    }
}
