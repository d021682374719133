//! Hot reload over real TCP: an axum server on a loopback port, a hyper client, and a rules
//! file in a fresh directory, changed the ways operators change it (written in place,
//! replaced by a rename, swapped through a Kubernetes ConfigMap's `..data` symlink).
//!
//! The store's clock is a manual one, so counters change only with requests. Reloads happen
//! on the watcher's thread: each test polls until the new rules answer, up to a generous
//! deadline, and never relies on a fixed sleep.
#![cfg(feature = "reload")]

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::StatusCode;
use http_body_util::Empty;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
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
        if let Layout::ConfigMap = layout {
            std::os::unix::fs::symlink("..data/rules.yaml", rules_dir.path())
                .expect("symlink rules.yaml");
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
        let dir = self.dir.path();
        self.versions += 1;
        match self.layout {
            Layout::InPlace => std::fs::write(self.path(), content).expect("write rules"),
            Layout::Rename => {
                let new = dir.join(".rules.yaml.new");
                std::fs::write(&new, content).expect("write new rules");
                std::fs::rename(&new, self.path()).expect("rename over rules");
            }
            Layout::ConfigMap => {
                let version = format!("..2026_v{}", self.versions);
                std::fs::create_dir(dir.join(&version)).expect("version dir");
                std::fs::write(dir.join(&version).join("rules.yaml"), content)
                    .expect("write rules");
                let old = std::fs::read_link(dir.join("..data")).ok();
                std::os::unix::fs::symlink(&version, dir.join("..data_tmp"))
                    .expect("temporary symlink");
                std::fs::rename(dir.join("..data_tmp"), dir.join("..data"))
                    .expect("re-point ..data");
                if let Some(old) = old {
                    std::fs::remove_dir_all(dir.join(old)).expect("remove old version");
                }
            }
        }
    }
}

/// An axum server on a loopback port whose limiter follows a rules file.
struct Server {
    addr: SocketAddr,
    client: Client<HttpConnector, Empty<Bytes>>,
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
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("local addr");
        tokio::spawn(async move {
            axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await
        });
        let client = Client::builder(TokioExecutor::new()).build_http();
        Server {
            addr,
            client,
            watcher,
        }
    }

    /// The status and the `X-Ratelimit-Limit` and `-Remaining` headers of one request.
    async fn send(&self, method: &str) -> (StatusCode, u64, u64) {
        let request = http::Request::builder()
            .method(method)
            .uri(format!("http://{}/", self.addr))
            .body(Empty::new())
            .expect("request");
        let response = self.client.request(request).await.expect("response");
        let number = |name: &str| -> u64 {
            response
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.parse().ok())
                .unwrap_or_else(|| panic!("no number in {name}"))
        };
        (
            response.status(),
            number("x-ratelimit-limit"),
            number("x-ratelimit-remaining"),
        )
    }

    /// The POST limit in force (each look costs one POST).
    async fn post_limit(&self) -> u64 {
        self.send("POST").await.1
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
    assert_eq!(server.send("GET").await, (StatusCode::OK, 3, 2));
    assert_eq!(server.send("GET").await, (StatusCode::OK, 3, 1));
    assert_eq!(server.post_limit().await, 1);

    file.replace(&rules(5));
    let latency = server.until_post_limit(5).await;

    assert_eq!(
        server.send("GET").await,
        (StatusCode::OK, 3, 0),
        "the GET counter survives"
    );
    assert_eq!(server.send("GET").await.0, StatusCode::TOO_MANY_REQUESTS);
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

#[tokio::test]
async fn a_configmap_symlink_swap_is_reloaded_again_and_again() {
    let mut file = RulesDir::new(Layout::ConfigMap, &rules(1));
    let server = Server::start(&file.path(), |b| b).await;
    assert_eq!(server.send("GET").await, (StatusCode::OK, 3, 2));
    for (post, get_remaining) in [(5, 1), (7, 0)] {
        file.replace(&rules(post));
        let latency = server.until_post_limit(post.into()).await;
        eprintln!(
            "ConfigMap swap: enforced {} ms after the swap",
            latency.as_millis()
        );
        assert_eq!(server.send("GET").await, (StatusCode::OK, 3, get_remaining));
    }
}

#[tokio::test]
async fn a_symlink_into_another_directory_is_followed_when_re_pointed() {
    let home = tempfile::tempdir().expect("temp dir");
    let elsewhere = tempfile::tempdir().expect("temp dir");
    let path = home.path().join("rules.yaml");
    let target = |version: &str| elsewhere.path().join(version).join("rules.yaml");
    for version in ["v1", "v2"] {
        std::fs::create_dir(elsewhere.path().join(version)).expect("version dir");
    }
    std::fs::write(target("v1"), rules(1)).expect("write rules");
    std::os::unix::fs::symlink(target("v1"), &path).expect("symlink");
    let server = Server::start(&path, |b| b).await;

    // Only the watch on the far directory hears an edit made there in place.
    std::fs::write(target("v1"), rules(5)).expect("write rules");
    server.until_post_limit(5).await;

    std::fs::write(target("v2"), rules(7)).expect("write rules");
    let new_link = home.path().join("rules.yaml.new");
    std::os::unix::fs::symlink(target("v2"), &new_link).expect("symlink");
    std::fs::rename(&new_link, &path).expect("re-point");
    server.until_post_limit(7).await;

    // The watch moved to the new target's directory.
    std::fs::write(target("v2"), rules(9)).expect("write rules");
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
    assert_eq!(server.send("GET").await, (StatusCode::OK, 3, 2));

    file.replace(&rules(5).replace("requests_per_unit: 5", "requests_per_unit: lots"));
    let stats = server.until_failed(1).await;
    let error = stats.last_error.expect("the failure is kept").to_string();
    assert!(error.contains("rules.yaml:8:"), "line and column: {error}");
    assert_eq!(server.post_limit().await, 1, "the old rules serve on");
    assert_eq!(server.send("GET").await, (StatusCode::OK, 3, 1));

    let whole = rules(5);
    let half = &whole[..whole.len() - 20];
    assert!(Rules::from_yaml(half).is_err(), "the cut must be invalid");
    file.replace(half);
    server.until_failed(2).await;
    assert_eq!(server.post_limit().await, 1, "the old rules serve on");

    file.replace(&rules(7));
    server.until_post_limit(7).await;
    assert_eq!(server.send("GET").await, (StatusCode::OK, 3, 0));
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
fn dropping_the_watcher_stops_watching() {
    let mut file = RulesDir::new(Layout::Rename, &rules(1));
    let limiter = Limiter::from_file(file.path()).expect("valid rules");
    let watcher = RulesWatcher::builder(file.path())
        .poll_interval(Duration::from_millis(10))
        .watch(limiter.clone())
        .expect("watch");
    drop(watcher);
    file.replace(&rules(5));
    // Ten poll intervals: a watcher still running would have reloaded by then.
    std::thread::sleep(Duration::from_millis(100));
    let post = limiter.rules().limits()[1]
        .quota()
        .map(|quota| quota.limit());
    assert_eq!(post, Some(1));
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
