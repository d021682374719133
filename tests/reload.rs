//! Hot reload over real TCP: an axum server on a loopback port, a hyper client, and a rules
//! file in a fresh directory, changed the ways operators change it (written in place,
//! replaced by a rename, swapped through a Kubernetes ConfigMap's `..data` symlink).
//!
//! The store's clock is a manual one, so counters change only with requests. Reloads happen
//! on the watcher's thread: each test polls until the new rules answer, up to a generous
//! deadline, and never relies on a fixed sleep.
#![cfg(feature = "reload")]

mod common;

use axum::routing::get;
use axum::Router;
use common::server::{request, serve};
use http::{Method, StatusCode};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tollgate::clock::ManualClock;
use tollgate::reload::{ReloadOutcome, ReloadStats, RulesWatcher, RulesWatcherBuilder};
use tollgate::rules::Rules;
use tollgate::store::MemoryStore;
use tollgate::{Limiter, RateLimitLayer};

/// How long a reload may take on a loaded machine before a test fails.
const DEADLINE: Duration = Duration::from_secs(5);

/// GET: 3 a minute in every version (its counter must survive reloads); POST: `post` a minute.
fn rules(post: u32) -> String {
    format!(
        r#"domain: reload
descriptors:
  - key: method
    value: GET
    rate_limit: {{ unit: minute, requests_per_unit: 3 }}
  - key: method
    value: POST
    rate_limit: {{ unit: minute, requests_per_unit: {post} }}
"#
    )
}

/// How the rules file is laid out and replaced.
#[derive(Clone, Copy)]
enum Layout {
    /// `rules.yaml`, rewritten in place (truncated, then written).
    InPlace,
    /// `rules.yaml`, replaced by renaming a new file over it, as editors and `mv` do.
    Rename,
    /// A Kubernetes ConfigMap volume: `rules.yaml -> ..data/rules.yaml`,
    /// `..data -> ..<version>`; a new version is a new directory and `..data` re-pointed
    /// atomically (a temporary symlink renamed over it), the old directory then removed.
    #[cfg(unix)]
    ConfigMap,
}

/// A rules file in a fresh directory.
struct RulesDir {
    dir: tempfile::TempDir,
    layout: Layout,
    versions: u32,
}

impl RulesDir {
    fn new(layout: Layout, content: &str) -> RulesDir {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut rules_dir = RulesDir {
            dir,
            layout,
            versions: 0,
        };
        #[cfg(unix)]
        if let Layout::ConfigMap = layout {
            symlink("..data/rules.yaml", &rules_dir.path());
        }
        rules_dir.replace(content);
        rules_dir
    }

    /// The path the server is given.
    fn path(&self) -> PathBuf {
        self.dir.path().join("rules.yaml")
    }

    /// Makes `content` the file's content, the way the layout does it.
    fn replace(&mut self, content: &str) {
        self.versions += 1;
        match self.layout {
            Layout::InPlace => std::fs::write(self.path(), content).expect("write rules"),
            Layout::Rename => rename_over(&self.path(), content),
            #[cfg(unix)]
            Layout::ConfigMap => {
                let dir = self.dir.path();
                let version = format!("..2026_v{}", self.versions);
                std::fs::create_dir(dir.join(&version)).expect("version dir");
                std::fs::write(dir.join(&version).join("rules.yaml"), content)
                    .expect("write rules");
                let old = std::fs::read_link(dir.join("..data")).ok();
                repoint(&dir.join("..data"), Path::new(&version));
                if let Some(old) = old {
                    std::fs::remove_dir_all(dir.join(old)).expect("remove old version");
                }
            }
        }
    }
}

/// Replaces `path` by a new file holding `content`, renamed over it.
fn rename_over(path: &Path, content: &str) {
    let new = beside(path);
    std::fs::write(&new, content).expect("write new rules");
    std::fs::rename(&new, path).expect("rename over rules");
}

/// A temporary name beside `path`, to rename over it.
fn beside(path: &Path) -> PathBuf {
    let mut name = path.file_name().expect("a file name").to_owned();
    name.push(".new");
    path.with_file_name(name)
}

#[cfg(unix)]
fn symlink(target: impl AsRef<Path>, link: &Path) {
    std::os::unix::fs::symlink(target, link).expect("symlink");
}

/// Points the symlink `link` at `target` atomically: a new symlink renamed over it.
#[cfg(unix)]
fn repoint(link: &Path, target: &Path) {
    let new = beside(link);
    symlink(target, &new);
    std::fs::rename(&new, link).expect("re-point the symlink");
}

/// `store/v1/rules.yaml` holding [`rules(1)`](rules) and `store/v2/rules.yaml` to be
/// written: two versions, each in a directory of its own.
#[cfg(unix)]
fn versions(store: &Path) -> [PathBuf; 2] {
    let [v1, v2] = ["v1", "v2"].map(|version| {
        std::fs::create_dir(store.join(version)).expect("version dir");
        store.join(version).join("rules.yaml")
    });
    std::fs::write(&v1, rules(1)).expect("write rules");
    [v1, v2]
}

/// Does `step` every 20 ms on a thread of its own until dropped.
struct Busy {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Busy {
    fn start(step: impl Fn() + Send + 'static) -> Busy {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                step();
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Busy {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the busy thread ends");
        }
    }
}

/// An axum server on a loopback port whose limiter follows a rules file.
struct Server {
    addr: SocketAddr,
    watcher: RulesWatcher,
}

impl Server {
    async fn start(
        path: &Path,
        configure: impl FnOnce(RulesWatcherBuilder) -> RulesWatcherBuilder,
    ) -> Server {
        let rules = Rules::from_file(path).expect("valid rules");
        let limiter = Limiter::with_store(rules, MemoryStore::with_clock(ManualClock::new()));
        let watcher = configure(RulesWatcher::builder(path))
            .watch(limiter.clone())
            .expect("watch");
        let app = Router::new()
            .route("/", get(|| async { "ok" }).post(|| async { "posted" }))
            .layer(RateLimitLayer::new(limiter));
        let addr = serve(app).await;
        Server { addr, watcher }
    }

    /// The status and the `X-Ratelimit-Limit` and `-Remaining` headers of one request.
    async fn send(&self, method: Method) -> (StatusCode, u64, u64) {
        let reply = request(self.addr, method, "/", &[]).await;
        let number = |name: &str| -> u64 {
            reply
                .headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.parse().ok())
                .unwrap_or_else(|| panic!("no number in {name}"))
        };
        (
            reply.status,
            number("x-ratelimit-limit"),
            number("x-ratelimit-remaining"),
        )
    }

    /// The POST limit in force (each look costs one POST).
    async fn post_limit(&self) -> u64 {
        self.send(Method::POST).await.1
    }

    /// Waits until POST requests are limited to `limit` a minute; how long that took.
    async fn until_post_limit(&self, limit: u64) -> Duration {
        let start = Instant::now();
        loop {
            let seen = self.post_limit().await;
            if seen == limit {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < DEADLINE,
                "POST still limited to {seen}, not {limit}, after {DEADLINE:?}; {:?}",
                self.watcher.stats()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until the watcher has counted `failed` failures; the stats then.
    async fn until_failed(&self, failed: u64) -> ReloadStats {
        let start = Instant::now();
        loop {
            let stats = self.watcher.stats();
            if stats.failed >= failed {
                return stats;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "{failed} failure(s) not counted after {DEADLINE:?}: {stats:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A new POST limit is enforced after the file changes, and the unchanged GET limit keeps
/// its counter across the reload.
async fn new_limit_enforced_and_unchanged_limit_keeps_count(
    layout: Layout,
    configure: impl FnOnce(RulesWatcherBuilder) -> RulesWatcherBuilder,
) -> Duration {
    let mut file = RulesDir::new(layout, &rules(1));
    let server = Server::start(&file.path(), configure).await;
    assert_eq!(server.send(Method::GET).await, (StatusCode::OK, 3, 2));
    assert_eq!(server.send(Method::GET).await, (StatusCode::OK, 3, 1));
    assert_eq!(server.post_limit().await, 1);

    file.replace(&rules(5));
    let latency = server.until_post_limit(5).await;

    assert_eq!(
        server.send(Method::GET).await,
        (StatusCode::OK, 3, 0),
        "the GET counter survives"
    );
    assert_eq!(
        server.send(Method::GET).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    let stats = server.watcher.stats();
    assert!(stats.applied >= 2, "{stats:?}");
    latency
}

#[tokio::test]
async fn a_file_rewritten_in_place_is_reloaded() {
    let latency = new_limit_enforced_and_unchanged_limit_keeps_count(Layout::InPlace, |b| b).await;
    eprintln!(
        "in place: enforced {} ms after the write",
        latency.as_millis()
    );
}

#[tokio::test]
async fn a_file_renamed_over_the_rules_is_reloaded() {
    let latency = new_limit_enforced_and_unchanged_limit_keeps_count(Layout::Rename, |b| b).await;
    eprintln!(
        "rename: enforced {} ms after the rename",
        latency.as_millis()
    );
}

/// Where close events are reported (Linux), a file written in place is read once its writer
/// closes it: a writer pausing mid-file, longer than the debounce and than the cap on waiting
/// for quiet (but not than the 5 s wait for a writer), never has its prefix applied, even
/// when that prefix is valid rules.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[tokio::test]
async fn a_write_paused_mid_file_is_applied_only_once_the_writer_closes_it() {
    let file = RulesDir::new(Layout::InPlace, &rules(1));
    // Debounce 20 ms: waiting for quiet is capped at 200 ms, well within the pause.
    let server = Server::start(&file.path(), |b| b.debounce(Duration::from_millis(20))).await;
    assert_eq!(server.send(Method::GET).await, (StatusCode::OK, 3, 2));
    assert_eq!(server.send(Method::GET).await, (StatusCode::OK, 3, 1));

    // The new rules list POST first: cut after it, they are valid rules without the GET
    // limit, whose counter applying them would drop.
    let post_first = "domain: reload\ndescriptors:\n  - key: method\n    value: POST\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n";
    let then_get =
        "  - key: method\n    value: GET\n    rate_limit: { unit: minute, requests_per_unit: 3 }\n";
    let prefix = Rules::from_yaml(post_first).expect("the first chunk alone is valid");
    assert_eq!(prefix.limits().len(), 1);

    let mut writer = std::fs::File::create(file.path()).expect("open for writing");
    writer
        .write_all(post_first.as_bytes())
        .expect("first chunk");
    let pause = Instant::now();
    while pause.elapsed() < Duration::from_millis(600) {
        assert_eq!(server.post_limit().await, 1, "the prefix was applied");
        assert_eq!(server.watcher.stats().applied, 1);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    writer.write_all(then_get.as_bytes()).expect("second chunk");
    drop(writer);

    server.until_post_limit(5).await;
    assert_eq!(
        server.send(Method::GET).await,
        (StatusCode::OK, 3, 0),
        "the GET counter survives: the prefix was never in force"
    );
    let stats = server.watcher.stats();
    assert_eq!((stats.applied, stats.failed), (2, 0), "{stats:?}");
}

/// Where close events are reported (Linux), a writer that never closes the file holds
/// reloads back only for the poll interval: the file is then read once it stays the same.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[tokio::test]
async fn a_writer_keeping_the_file_open_holds_reloads_back_only_for_the_poll_interval() {
    let file = RulesDir::new(Layout::InPlace, &rules(1));
    let configure = |b: RulesWatcherBuilder| {
        b.debounce(Duration::from_millis(20))
            .poll_interval(Duration::from_millis(300))
    };
    let server = Server::start(&file.path(), configure).await;
    assert_eq!(server.post_limit().await, 1);

    let mut writer = std::fs::File::create(file.path()).expect("open for writing");
    writer.write_all(rules(5).as_bytes()).expect("write rules");
    writer.flush().expect("flush");
    let latency = server.until_post_limit(5).await;
    eprintln!(
        "file kept open: enforced {} ms after the write",
        latency.as_millis()
    );
    drop(writer);
}

#[tokio::test]
async fn another_file_written_every_20_ms_does_not_hold_reloads_back() {
    let mut file = RulesDir::new(Layout::InPlace, &rules(1));
    let server = Server::start(&file.path(), |b| b).await;
    let noise = file.dir.path().join("access.log");
    let busy = Busy::start(move || std::fs::write(&noise, "GET /\n").expect("write noise"));

    file.replace(&rules(5));
    let latency = server.until_post_limit(5).await;
    eprintln!(
        "busy directory: enforced {} ms after the write",
        latency.as_millis()
    );
    drop(busy);
}

#[tokio::test]
async fn a_rules_file_replaced_every_20_ms_is_still_reloaded() {
    let file = RulesDir::new(Layout::Rename, &rules(1));
    let server = Server::start(&file.path(), |b| b).await;
    let path = file.path();
    // The file never stays quiet for a debounce: the cap on waiting for quiet gets it read.
    let busy = Busy::start(move || rename_over(&path, &rules(5)));

    let latency = server.until_post_limit(5).await;
    eprintln!(
        "never quiet: enforced {} ms after the first rename",
        latency.as_millis()
    );
    drop(busy);
}

#[cfg(unix)]
#[tokio::test]
async fn a_configmap_symlink_swap_is_reloaded_again_and_again() {
    let mut file = RulesDir::new(Layout::ConfigMap, &rules(1));
    let server = Server::start(&file.path(), |b| b).await;
    assert_eq!(server.send(Method::GET).await, (StatusCode::OK, 3, 2));
    for (post, get_remaining) in [(5, 1), (7, 0)] {
        file.replace(&rules(post));
        let latency = server.until_post_limit(post.into()).await;
        eprintln!(
            "ConfigMap swap: enforced {} ms after the swap",
            latency.as_millis()
        );
        assert_eq!(
            server.send(Method::GET).await,
            (StatusCode::OK, 3, get_remaining)
        );
    }
}

#[cfg(unix)]
#[tokio::test]
async fn a_symlink_into_another_directory_is_followed_when_re_pointed() {
    let home = tempfile::tempdir().expect("temp dir");
    let elsewhere = tempfile::tempdir().expect("temp dir");
    let path = home.path().join("rules.yaml");
    let [v1, v2] = versions(elsewhere.path());
    symlink(&v1, &path);
    let server = Server::start(&path, |b| b).await;

    // Only the watch on the far directory hears an edit made there in place.
    std::fs::write(&v1, rules(5)).expect("write rules");
    server.until_post_limit(5).await;

    std::fs::write(&v2, rules(7)).expect("write rules");
    repoint(&path, &v2);
    server.until_post_limit(7).await;

    // The watch moved to the new target's directory.
    std::fs::write(&v2, rules(9)).expect("write rules");
    server.until_post_limit(9).await;
}

/// `rules.yaml -> middle/current.yaml -> store/v1/rules.yaml`, each in a directory of its
/// own: re-pointing the middle symlink is heard, and so are edits at the new end.
#[cfg(unix)]
#[tokio::test]
async fn a_two_hop_symlink_chain_is_followed_when_the_middle_hop_is_re_pointed() {
    let [home, middle, store] = [(), (), ()].map(|()| tempfile::tempdir().expect("temp dir"));
    let path = home.path().join("rules.yaml");
    let current = middle.path().join("current.yaml");
    let [v1, v2] = versions(store.path());
    symlink(&v1, &current);
    symlink(&current, &path);
    let server = Server::start(&path, |b| b).await;

    std::fs::write(&v2, rules(7)).expect("write rules");
    repoint(&current, &v2);
    server.until_post_limit(7).await;

    std::fs::write(&v2, rules(9)).expect("write rules");
    server.until_post_limit(9).await;
}

#[tokio::test]
async fn a_poll_interval_reloads_without_file_system_events() {
    let configure =
        |b: RulesWatcherBuilder| b.events(false).poll_interval(Duration::from_millis(100));
    let latency =
        new_limit_enforced_and_unchanged_limit_keeps_count(Layout::Rename, configure).await;
    eprintln!(
        "poll every 100 ms: enforced {} ms after the rename",
        latency.as_millis()
    );
}

#[tokio::test]
async fn invalid_and_half_written_files_keep_the_old_rules_serving() {
    let mut file = RulesDir::new(Layout::Rename, &rules(1));
    let server = Server::start(&file.path(), |b| b).await;
    assert_eq!(server.send(Method::GET).await, (StatusCode::OK, 3, 2));

    file.replace(&rules(5).replace("requests_per_unit: 5", "requests_per_unit: lots"));
    let stats = server.until_failed(1).await;
    let error = stats.last_error.expect("the failure is kept").to_string();
    assert!(error.contains("rules.yaml:8:"), "line and column: {error}");
    assert_eq!(server.post_limit().await, 1, "the old rules serve on");
    assert_eq!(server.send(Method::GET).await, (StatusCode::OK, 3, 1));

    let whole = rules(5);
    let half = &whole[..whole.len() - 20];
    assert!(Rules::from_yaml(half).is_err(), "the cut must be invalid");
    file.replace(half);
    server.until_failed(2).await;
    assert_eq!(server.post_limit().await, 1, "the old rules serve on");

    file.replace(&rules(7));
    server.until_post_limit(7).await;
    assert_eq!(server.send(Method::GET).await, (StatusCode::OK, 3, 0));
    let stats = server.watcher.stats();
    assert_eq!((stats.failed, stats.last_error), (2, None));
}

#[tokio::test]
async fn an_invalid_file_written_in_place_is_refused() {
    let mut file = RulesDir::new(Layout::InPlace, &rules(1));
    let server = Server::start(&file.path(), |b| b).await;
    file.replace("domain: reload\ndescriptors:\n  - key: method\n    rate_limit: {");
    server.until_failed(1).await;
    assert_eq!(server.post_limit().await, 1);
}

#[tokio::test]
async fn reload_applies_at_once_and_only_what_changed() {
    let mut file = RulesDir::new(Layout::InPlace, &rules(1));
    let server = Server::start(&file.path(), |b| b.events(false)).await;
    assert_eq!(server.watcher.reload(), Ok(ReloadOutcome::Unchanged));

    file.replace(&rules(5));
    assert_eq!(
        server.post_limit().await,
        1,
        "nothing reads the file by itself"
    );
    assert_eq!(server.watcher.reload(), Ok(ReloadOutcome::Applied));
    assert_eq!(server.post_limit().await, 5);
    assert_eq!(server.watcher.reload(), Ok(ReloadOutcome::Unchanged));

    file.replace("domain: [");
    let error = server.watcher.reload().expect_err("invalid");
    assert!(error.to_string().contains("rules.yaml:1:"), "{error}");
    assert_eq!(server.post_limit().await, 5);
    let stats = server.watcher.stats();
    assert_eq!(
        (stats.applied, stats.failed),
        (2, 1),
        "the start and one change"
    );
}

#[test]
fn a_missing_directory_cannot_be_watched() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("nowhere").join("rules.yaml");
    let limiter = Limiter::new(Rules::from_yaml(&rules(1)).expect("valid rules"));
    let error = RulesWatcher::builder(&path)
        .watch(limiter)
        .expect_err("no directory to watch");
    assert_eq!(error.kind(), std::io::ErrorKind::NotFound, "{error}");
}
