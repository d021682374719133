use super::events::{Change, DirectoryEvents};
use super::reloader::{ReloadOutcome, ReloadStats, Reloader};
use crate::rules::KeySources;
use crate::rules::RuleErrors;
use crate::store::Store;
use crate::Limiter;
use std::convert::Infallible;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the file must stay quiet before a reading of new content is confirmed by another,
/// unless [`RulesWatcherBuilder::debounce`] says otherwise.
const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(150);

/// After this many debounces from a change, a file that never goes quiet is read anyway,
/// once a debounce, until two readings agree.
const QUIET_WAITS: u32 = 10;

/// How long a writer may keep the file open before it is read anyway, when no poll interval
/// is set (with one, the poll interval): long enough for a script or an editor to finish,
/// short enough that a writer that never closes the file does not stop reloads for good.
const WRITE_WAIT: Duration = Duration::from_secs(5);

/// Keeps a limiter's rules in step with a rules file; see the [module docs](crate::reload).
///
/// Watching stops when the watcher is dropped: keep it for as long as the server runs.
/// Dropping it waits for its thread to end, which is at once unless the thread is reading
/// the file: then as long as that reading takes (well under a millisecond for a small local
/// file, longer on a slow network filesystem). From async code, drop it in
/// `tokio::task::spawn_blocking` if that matters.
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
    keys: KeySources,
}

/// What the watching thread is told.
enum Signal {
    /// An event concerned the rules file.
    Changed(Change),
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
            keys: KeySources::Request,
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
    /// How long the file must stay quiet after a reading that found new content before it
    /// is read again to confirm it (default 150 ms): the new content is put in force only
    /// when both readings agree, so that a burst of events (an editor's save, a ConfigMap
    /// swap) or a write in progress is not taken for the final content. A file that is
    /// never quiet is read again every `quiet` from `10 × quiet` after a change on.
    pub fn debounce(mut self, quiet: Duration) -> Self {
        self.debounce = quiet;
        self
    }

    /// Also reads the file every `interval` (after the last reading), for filesystems that
    /// report no events, such as some network and FUSE mounts (default: never). The content
    /// is compared byte for byte, so an unchanged file costs one read.
    ///
    /// The interval also bounds the wait for a writer to close the file (5 s without one):
    /// see the [module docs](crate::reload).
    ///
    /// # Panics
    ///
    /// When `interval` is zero.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        assert!(!interval.is_zero(), "the poll interval must not be zero");
        self.poll_interval = Some(interval);
        self
    }

    /// Where the rules' descriptor keys take their values (default
    /// [`KeySources::Request`]): [`KeySources::Given`] compiles the file as
    /// [`Rules::from_file_with`](crate::rules::Rules::from_file_with) does, for a rate limit
    /// service.
    pub fn key_sources(mut self, keys: KeySources) -> Self {
        self.keys = keys;
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
        let path = self.path.clone();
        let keys = self.keys;
        self.start(Reloader::new(path, keys, move |rules| {
            limiter.set_rules(rules)
        }))
    }

    /// Starts watching with `reloader`, which reads the builder's path.
    fn start(self, reloader: Reloader) -> io::Result<RulesWatcher> {
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
        let reloader = Arc::new(reloader);
        // Logged and counted; a bad file at start leaves the limiter its rules.
        let _ = reloader.reload();
        let watch = Watch {
            reloader: Arc::clone(&reloader),
            events,
            inbox,
            debounce: self.debounce,
            poll_interval: self.poll_interval,
            writing: Writing::No,
        };
        let thread = std::thread::Builder::new()
            .name("tollgate-rules-watcher".to_owned())
            .spawn(move || {
                let Err(Stopped) = watch.run();
            })?;
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
        let on_change = move |change| {
            let _ = signals.send(Signal::Changed(change));
        };
        DirectoryEvents::start(&self.path, on_change).map(Some)
    }
}

/// The watching thread: reads the file after a change, or when a poll is due, and puts its
/// content in force once it is stable (see [`Watch::reload_when_stable`]).
struct Watch {
    reloader: Arc<Reloader>,
    /// Dropped with the thread, which stops notify's own thread.
    events: Option<DirectoryEvents>,
    inbox: Receiver<Signal>,
    debounce: Duration,
    poll_interval: Option<Duration>,
    writing: Writing,
}

/// Whether the file is being written in place, as far as close events tell (only where they
/// are reported: Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writing {
    /// No write is in progress.
    No,
    /// Bytes were written to the file in place and the writer has not closed it yet.
    Open,
    /// As `Open`, but the writer kept the file open longer than [`Watch::write_wait`]: the
    /// file is read as where no close events are reported, until the writer closes it.
    Overdue,
}

/// The watcher was dropped: the thread ends.
struct Stopped;

impl Watch {
    /// Watches until the watcher is dropped.
    fn run(mut self) -> Result<Infallible, Stopped> {
        loop {
            let next_poll = self.poll_interval.map(|interval| Instant::now() + interval);
            if let Some(change) = self.wait(next_poll)? {
                self.note(change);
            }
            self.reload_when_stable()?;
        }
    }

    /// How long to wait for a writer to close the file before reading it anyway.
    fn write_wait(&self) -> Duration {
        self.poll_interval.unwrap_or(WRITE_WAIT)
    }

    /// Reads the file, and puts its content in force once two readings agree, the second
    /// taken after the file was quiet for a debounce; a reading equal to the content in force
    /// needs no second one. Nothing is read while a write to the file is open, for up to
    /// [`Watch::write_wait`]. A file that never goes quiet is read again every debounce from
    /// `10 × debounce` on, until two readings agree.
    fn reload_when_stable(&mut self) -> Result<(), Stopped> {
        let deadline = Instant::now() + self.debounce * QUIET_WAITS;
        let mut previous = None;
        loop {
            self.until_write_ends()?;
            // Before reading: a change made after the reading must not go unheard.
            if let Some(events) = &mut self.events {
                events.follow();
            }
            // Logged and counted by the reloader.
            match self
                .reloader
                .reload_if(|reading| previous.as_ref() == Some(reading))
            {
                Ok(_) => return Ok(()),
                Err(reading) => previous = Some(reading),
            }
            self.settle(deadline)?;
        }
    }

    /// Waits until no change came for a debounce, or, past `deadline`, for a debounce
    /// whatever came.
    fn settle(&mut self, deadline: Instant) -> Result<(), Stopped> {
        let start = Instant::now();
        let latest = deadline.max(start + self.debounce);
        let mut ready = start + self.debounce;
        while let Some(change) = self.wait(Some(ready))? {
            self.note(change);
            ready = (Instant::now() + self.debounce).min(latest);
        }
        Ok(())
    }

    /// Waits while a write is open, until the writer closes the file or it is replaced:
    /// reading it before could see a prefix, which may well be valid rules with limits
    /// missing. A writer that keeps the file open (a log-like writer, a stuck editor) must not
    /// stop reloads: after [`Watch::write_wait`] the wait ends with a warning, and the
    /// writing is [overdue](Writing::Overdue).
    fn until_write_ends(&mut self) -> Result<(), Stopped> {
        let give_up = Instant::now() + self.write_wait();
        while self.writing == Writing::Open {
            match self.wait(Some(give_up))? {
                Some(change) => self.note(change),
                None => {
                    tracing::warn!(
                        path = %self.reloader.path().display(),
                        "the rules file has been open for writing for {:?}: reading it \
                         anyway, once two readings a debounce apart agree",
                        self.write_wait()
                    );
                    self.writing = Writing::Overdue;
                }
            }
        }
        Ok(())
    }

    fn note(&mut self, change: Change) {
        self.writing = match (change, self.writing) {
            // The same writer, as far as events tell: it is not waited for again.
            (Change::Written, Writing::Overdue) => Writing::Overdue,
            (Change::Written, _) => Writing::Open,
            (Change::WriteEnded, _) => Writing::No,
            (Change::Other, writing) => writing,
        };
    }

    /// Waits for a change, until `deadline` if any (`None`: the deadline came first).
    fn wait(&self, deadline: Option<Instant>) -> Result<Option<Change>, Stopped> {
        let signal = match deadline {
            Some(deadline) => self
                .inbox
                .recv_timeout(deadline.saturating_duration_since(Instant::now())),
            None => self.inbox.recv().map_err(RecvTimeoutError::from),
        };
        match signal {
            Ok(Signal::Changed(change)) => Ok(Some(change)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Ok(Signal::Stop) | Err(RecvTimeoutError::Disconnected) => Err(Stopped),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_the_watcher_ends_its_thread() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("rules.yaml");
        std::fs::write(&path, "domain: t\ndescriptors: []\n").expect("write rules");
        // The thread holds the reloader, and the reloader this probe: once the thread has
        // ended, only the test does.
        let probe = Arc::new(());
        let held = Arc::clone(&probe);
        let reloader = Reloader::new(path.clone(), KeySources::Request, move |_rules| {
            let _held = &held;
        });
        let watcher = RulesWatcher::builder(&path)
            .poll_interval(Duration::from_millis(10))
            .start(reloader)
            .expect("watch");
        assert_eq!(Arc::strong_count(&probe), 2);
        drop(watcher);
        assert_eq!(Arc::strong_count(&probe), 1, "the thread still runs");
    }

    #[test]
    fn a_writer_is_waited_for_a_poll_interval_or_else_five_seconds() {
        let watch = |poll_interval| Watch {
            reloader: Arc::new(Reloader::new(
                PathBuf::from("rules.yaml"),
                KeySources::Request,
                |_rules| {},
            )),
            events: None,
            inbox: mpsc::channel().1,
            debounce: DEFAULT_DEBOUNCE,
            poll_interval,
            writing: Writing::No,
        };
        let interval = Duration::from_millis(250);
        assert_eq!(watch(Some(interval)).write_wait(), interval);
        assert_eq!(watch(None).write_wait(), Duration::from_secs(5));
    }
}
