use super::events::DirectoryEvents;
use super::reloader::{ReloadOutcome, ReloadStats, Reloader};
use crate::rules::RuleErrors;
use crate::store::Store;
use crate::Limiter;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the directory must stay quiet after an event before the file is read, unless
/// [`RulesWatcherBuilder::debounce`] says otherwise.
const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(150);

/// Keeps a limiter's rules in step with a rules file; see the [module docs](crate::reload).
///
/// Watching stops when the watcher is dropped: keep it for as long as the server runs.
#[must_use = "dropping the watcher stops watching"]
#[derive(Debug)]
pub struct RulesWatcher {
    reloader: Arc<Reloader>,
    signals: Sender<Signal>,
    thread: Option<JoinHandle<()>>,
}

/// Configures a [`RulesWatcher`]; made by [`RulesWatcher::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct RulesWatcherBuilder {
    path: PathBuf,
    debounce: Duration,
    poll_interval: Option<Duration>,
    events: bool,
}

/// What the watching thread is told.
enum Signal {
    /// Something in a watched directory changed.
    Changed,
    /// The watcher was dropped.
    Stop,
}

impl RulesWatcher {
    /// Starts configuring a watcher of the rules file at `path`.
    pub fn builder(path: impl Into<PathBuf>) -> RulesWatcherBuilder {
        RulesWatcherBuilder {
            path: path.into(),
            debounce: DEFAULT_DEBOUNCE,
            poll_interval: None,
            events: true,
        }
    }

    /// Reads the file now, on the calling thread, and puts its rules in force if its content
    /// changed. Reading and compiling block (typically well under a millisecond for a small
    /// file); from async code, call it in `tokio::task::spawn_blocking` if that matters.
    ///
    /// # Errors
    ///
    /// The file could not be read or its rules are invalid, with line and column. The rules
    /// in force stay; the failure is logged and counted like one the watcher found.
    pub fn reload(&self) -> Result<ReloadOutcome, RuleErrors> {
        self.reloader.reload()
    }

    /// How reloads went so far.
    pub fn stats(&self) -> ReloadStats {
        self.reloader.stats()
    }

    /// The watched file.
    pub fn path(&self) -> &Path {
        self.reloader.path()
    }
}

impl Drop for RulesWatcher {
    fn drop(&mut self) {
        // The thread may have stopped already; there is then nobody to tell.
        let _ = self.signals.send(Signal::Stop);
        if let Some(thread) = self.thread.take() {
            // A panic on the thread was already reported by the panic hook.
            let _ = thread.join();
        }
    }
}

impl RulesWatcherBuilder {
    /// How long the directory must stay quiet after a change before the file is read
    /// (default 150 ms), so that a burst of events (an editor's save, a ConfigMap swap) costs
    /// one reading, taken once the writer is done.
    pub fn debounce(mut self, quiet: Duration) -> Self {
        self.debounce = quiet;
        self
    }

    /// Also reads the file every `interval` (after the last reading), for filesystems that
    /// report no events, such as some network and FUSE mounts (default: never). The content
    /// is compared byte for byte, so an unchanged file costs one read.
    ///
    /// # Panics
    ///
    /// When `interval` is zero.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        assert!(!interval.is_zero(), "the poll interval must not be zero");
        self.poll_interval = Some(interval);
        self
    }

    /// Whether to listen for file-system events (default `true`). Turned off, only the
    /// [poll interval](Self::poll_interval) and [`RulesWatcher::reload`] read the file.
    pub fn events(mut self, listen: bool) -> Self {
        self.events = listen;
        self
    }

    /// Reads the file once now and puts its rules in force on `limiter` (when they compile:
    /// otherwise the limiter keeps its rules, and the failure is logged and counted), then
    /// keeps watching on a thread of its own. New rules are read and compiled on that thread,
    /// never on a request, and swapped in with [`Limiter::set_rules`]: requests being decided
    /// finish under the rules they started with, and unchanged limits keep their counters.
    ///
    /// # Errors
    ///
    /// The file's directory cannot be watched (it does not exist, or the system's limit of
    /// watches is reached) and no poll interval is set, or the thread cannot be started.
    pub fn watch<St: Store>(self, limiter: Limiter<St>) -> io::Result<RulesWatcher> {
        let (signals, inbox) = mpsc::channel();
        let events = match self.start_events(signals.clone()) {
            Ok(events) => events,
            Err(error) if self.poll_interval.is_some() => {
                tracing::warn!(
                    path = %self.path.display(),
                    "no file-system events for the rules file, polling only: {error}"
                );
                None
            }
            Err(error) => return Err(error),
        };
        let reloader = Arc::new(Reloader::new(self.path, move |rules| {
            limiter.set_rules(rules)
        }));
        // Logged and counted; a bad file at start leaves the limiter its rules.
        let _ = reloader.reload();
        let watch = Watch {
            reloader: Arc::clone(&reloader),
            events,
            inbox,
            debounce: self.debounce,
            poll_interval: self.poll_interval,
        };
        let thread = std::thread::Builder::new()
            .name("tollgate-rules-watcher".to_owned())
            .spawn(move || watch.run())?;
        Ok(RulesWatcher {
            reloader,
            signals,
            thread: Some(thread),
        })
    }

    fn start_events(&self, signals: Sender<Signal>) -> io::Result<Option<DirectoryEvents>> {
        if !self.events {
            return Ok(None);
        }
        // A closed channel means the watching thread has stopped: nobody to tell.
        let on_change = move || {
            let _ = signals.send(Signal::Changed);
        };
        DirectoryEvents::start(&self.path, on_change).map(Some)
    }
}

/// The watching thread: reads the file after a change has settled, or when a poll is due.
struct Watch {
    reloader: Arc<Reloader>,
    /// Dropped with the thread, which stops notify's own thread.
    events: Option<DirectoryEvents>,
    inbox: Receiver<Signal>,
    debounce: Duration,
    poll_interval: Option<Duration>,
}

impl Watch {
    fn run(mut self) {
        loop {
            let signal = match self.poll_interval {
                Some(interval) => self.inbox.recv_timeout(interval),
                None => self.inbox.recv().map_err(RecvTimeoutError::from),
            };
            match signal {
                Ok(Signal::Changed) => {
                    if !self.settle() {
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Ok(Signal::Stop) | Err(RecvTimeoutError::Disconnected) => return,
            }
            // Before reading: a change made after the reading must not go unheard.
            if let Some(events) = &mut self.events {
                events.follow(self.reloader.path());
            }
            // Logged and counted by the reloader.
            let _ = self.reloader.reload();
        }
    }

    /// Waits until no change came for the debounce time; `false` when told to stop instead.
    fn settle(&self) -> bool {
        loop {
            match self.inbox.recv_timeout(self.debounce) {
                Ok(Signal::Changed) => {}
                Err(RecvTimeoutError::Timeout) => return true,
                Ok(Signal::Stop) | Err(RecvTimeoutError::Disconnected) => return false,
            }
        }
    }
}
