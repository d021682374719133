//! envoyproxy/ratelimit's settings, read from the environment as it reads them, for a
//! `tollgate serve` started without `--rules`: a drop-in for its container. Each setting is
//! honoured, or has no effect for a reason said at start, or, when it asks for something
//! tollgate does not do, stops the start with a message naming it; none is ignored
//! silently.

use super::rls::Headers;
use super::stats::StatsdTarget;
use super::store::{RedisOptions, RedisTarget};
use super::tls::GrpcTls;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The environment, as envoyproxy/ratelimit reads it.
pub(crate) struct Upstream {
    vars: BTreeMap<String, String>,
}

/// A setting tollgate reads but that changes nothing in it, and why.
const WITHOUT_EFFECT: [(&str, &str); 22] = [
    (
        "LOG_LEVEL",
        "tollgate serve logs what it does to standard output and error",
    ),
    (
        "LOG_FORMAT",
        "tollgate serve logs what it does to standard output and error",
    ),
    (
        "DEBUG_HOST",
        "there is no debug listener: GET /metrics, and --admin, serve what it did",
    ),
    (
        "DEBUG_PORT",
        "there is no debug listener: GET /metrics, and --admin, serve what it did",
    ),
    (
        "REDIS_POOL_SIZE",
        "one multiplexed connection serves every call",
    ),
    (
        "REDIS_PIPELINE_WINDOW",
        "calls are batched while the connection is busy",
    ),
    (
        "REDIS_PIPELINE_LIMIT",
        "calls are batched while the connection is busy",
    ),
    (
        "REDIS_CLUSTER_PIPELINE_PARALLELISM",
        "calls are batched while the connection is busy",
    ),
    (
        "REDIS_POOL_ON_EMPTY_BEHAVIOR",
        "one multiplexed connection serves every call",
    ),
    (
        "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION",
        "GET /healthcheck is OK from when the rules loaded and Redis first answered",
    ),
    (
        "REDIS_STARTUP_INITIAL_INTERVAL",
        "Redis is tried again after 100 ms, twice as long each time up to 5 s, without end",
    ),
    (
        "REDIS_STARTUP_MAX_INTERVAL",
        "Redis is tried again after 100 ms, twice as long each time up to 5 s, without end",
    ),
    (
        "REDIS_STARTUP_MAX_ELAPSED_TIME",
        "Redis is tried again after 100 ms, twice as long each time up to 5 s, without end",
    ),
    (
        "GRPC_MAX_CONNECTION_AGE",
        "a gRPC connection lasts until its client closes it",
    ),
    (
        "GRPC_MAX_CONNECTION_AGE_GRACE",
        "a gRPC connection lasts until its client closes it",
    ),
    (
        "REDIS_TIMEOUT",
        "a Redis call that takes longer than 50 ms is a store error",
    ),
    (
        "EXPIRATION_JITTER_MAX_SECONDS",
        "a key expires when its state no longer matters",
    ),
    (
        "LOCAL_CACHE_SIZE_IN_BYTES",
        "the over-limit cache is always on, and bounded",
    ),
    ("NEAR_LIMIT_RATIO", "near_limit counts past 0.8 of a limit"),
    (
        "STATS_FLUSH_INTERVAL",
        "each call's statistics are sent at once",
    ),
    (
        "RUNTIME_WATCH_ROOT",
        "the rules directory is read every second",
    ),
    (
        "RUNTIME_IGNOREDOTFILES",
        "only *.yaml and *.yml files are read",
    ),
];

impl Upstream {
    /// The environment of this process.
    pub(crate) fn from_env() -> Self {
        Upstream {
            vars: std::env::vars().collect(),
        }
    }

    /// The value of `name`, if set.
    fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// The boolean `name`, as envoyproxy/ratelimit parses it (`true`, `1`, `t`...).
    fn flag(&self, name: &str) -> Result<Option<bool>, String> {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        match value {
            "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(Some(true)),
            "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(Some(false)),
            other => Err(format!("{name}={other}: not a boolean (true or false)")),
        }
    }

    /// The address of `host` and `port` (`GRPC_HOST`, `GRPC_PORT`), by default `0.0.0.0`
    /// and `default_port`, as envoyproxy/ratelimit listens.
    pub(crate) fn listen(
        &self,
        host: &str,
        port: &str,
        default_port: u16,
    ) -> Result<SocketAddr, String> {
        let host_value = self.get(host).unwrap_or("0.0.0.0");
        let port_value = match self.get(port) {
            Some(port_value) => port_value
                .parse::<u16>()
                .map_err(|_| format!("{port}={port_value}: not a port"))?,
            None => default_port,
        };
        format!("{host_value}:{port_value}")
            .parse()
            .or_else(|_| format!("[{host_value}]:{port_value}").parse())
            .map_err(|_| format!("{host}={host_value}: not an IP address"))
    }

    /// The store the settings ask for: `None` for the memory store (`BACKEND_TYPE=memory`,
    /// tollgate's own), else Redis (`BACKEND_TYPE=redis`, the default) as `REDIS_TYPE`,
    /// `REDIS_SOCKET_TYPE`, `REDIS_URL`, `REDIS_AUTH`, `REDIS_SENTINEL_AUTH` and `REDIS_TLS`
    /// (with `REDIS_TLS_CACERT`, `REDIS_TLS_CLIENT_CERT` and `REDIS_TLS_CLIENT_KEY`) say, its
    /// keys starting with `CACHE_KEY_PREFIX`.
    pub(crate) fn store(&self) -> Result<(Option<RedisTarget>, RedisOptions), String> {
        let mut options = RedisOptions::default();
        match self.get("BACKEND_TYPE").unwrap_or("redis") {
            "redis" | "" => {}
            "memory" => return Ok((None, options)),
            other => {
                return Err(format!(
                    "BACKEND_TYPE={other}: tollgate serve keeps its state in Redis (redis) or in memory (memory)"
                ))
            }
        }
        let tls = self.flag("REDIS_TLS")?.unwrap_or(false);
        if tls {
            options.ca = self.path("REDIS_TLS_CACERT");
            options.client = match (
                self.path("REDIS_TLS_CLIENT_CERT"),
                self.path("REDIS_TLS_CLIENT_KEY"),
            ) {
                (Some(cert), Some(key)) => Some((cert, key)),
                (None, None) => None,
                _ => {
                    return Err(
                        "REDIS_TLS_CLIENT_CERT and REDIS_TLS_CLIENT_KEY go together".to_owned()
                    )
                }
            };
        }
        options.key_prefix = match self.get("CACHE_KEY_PREFIX") {
            Some(prefix) if prefix.contains(['{', '}']) => {
                return Err(format!(
                    "CACHE_KEY_PREFIX={prefix}: may not contain braces (they place keys in a Redis Cluster)"
                ))
            }
            Some(prefix) if !prefix.is_empty() => Some(prefix.to_owned()),
            _ => None,
        };
        let socket = self.get("REDIS_SOCKET_TYPE").unwrap_or("unix");
        let url = self
            .get("REDIS_URL")
            .unwrap_or("/var/run/nutcracker/ratelimit.sock");
        let auth = |auth: Option<&str>| match auth {
            Some(auth) if auth.contains(':') => format!("{auth}@"),
            Some(auth) if !auth.is_empty() => format!(":{auth}@"),
            _ => String::new(),
        };
        let scheme = if tls { "rediss" } else { "redis" };
        let node = |address: &str, auth: &str| -> Result<String, String> {
            match socket {
                "tcp" => Ok(format!("{scheme}://{auth}{}", address.trim())),
                "unix" if !tls => Ok(format!("redis+unix://{}", address.trim())),
                "unix" => {
                    Err("REDIS_TLS=true with REDIS_SOCKET_TYPE=unix: TLS runs over tcp".to_owned())
                }
                other => Err(format!("REDIS_SOCKET_TYPE={other}: tcp or unix")),
            }
        };
        let password = auth(self.get("REDIS_AUTH"));
        let target = match self
            .get("REDIS_TYPE")
            .unwrap_or("single")
            .to_ascii_lowercase()
            .as_str()
        {
            "single" | "" => RedisTarget::Server(node(url, &password)?),
            "cluster" => {
                let nodes: Result<Vec<String>, String> = url
                    .split(',')
                    .map(|address| node(address, &password))
                    .collect();
                RedisTarget::Cluster(nodes?)
            }
            "sentinel" => {
                // Upstream's form: the master's name, then the sentinels.
                let mut parts = url.split(',');
                let master = parts.next().unwrap_or_default().trim().to_owned();
                let sentinel_auth = auth(self.get("REDIS_SENTINEL_AUTH"));
                let sentinels: Result<Vec<String>, String> =
                    parts.map(|address| node(address, &sentinel_auth)).collect();
                let sentinels = sentinels?;
                if master.is_empty() || sentinels.is_empty() {
                    return Err(format!("REDIS_URL={url}: with REDIS_TYPE=sentinel, the master's name then its sentinels (mymaster,host:26379,...)"));
                }
                options.master_auth =
                    self.get("REDIS_AUTH")
                        .filter(|auth| !auth.is_empty())
                        .map(|auth| match auth.split_once(':') {
                            Some((user, password)) => (user.to_owned(), password.to_owned()),
                            None => ("default".to_owned(), auth.to_owned()),
                        });
                RedisTarget::Sentinel(master, sentinels)
            }
            other => return Err(format!("REDIS_TYPE={other}: single, cluster or sentinel")),
        };
        Ok((Some(target), options))
    }

    /// The path `name` holds, if set.
    fn path(&self, name: &str) -> Option<PathBuf> {
        self.get(name)
            .filter(|path| !path.is_empty())
            .map(PathBuf::from)
    }

    /// The headers answers carry: envoyproxy/ratelimit's, under the names it is told, with
    /// `LIMIT_RESPONSE_HEADERS_ENABLED`; else none.
    pub(crate) fn headers(&self) -> Result<Headers, String> {
        if !self
            .flag("LIMIT_RESPONSE_HEADERS_ENABLED")?
            .unwrap_or(false)
        {
            return Ok(Headers::None);
        }
        let name = |setting: &str, default: &str| self.get(setting).unwrap_or(default).to_owned();
        Ok(Headers::Upstream {
            limit: name("LIMIT_LIMIT_HEADER", "RateLimit-Limit"),
            remaining: name("LIMIT_REMAINING_HEADER", "RateLimit-Remaining"),
            reset: name("LIMIT_RESET_HEADER", "RateLimit-Reset"),
        })
    }

    /// The gRPC listener's TLS, with `GRPC_SERVER_USE_TLS`: `GRPC_SERVER_TLS_CERT` and
    /// `GRPC_SERVER_TLS_KEY`, and for mutual TLS `GRPC_CLIENT_TLS_CACERT` and
    /// `GRPC_CLIENT_TLS_SAN`.
    pub(crate) fn grpc_tls(&self) -> Result<Option<GrpcTls>, String> {
        if !self.flag("GRPC_SERVER_USE_TLS")?.unwrap_or(false) {
            return Ok(None);
        }
        let file = |name: &str| match self.get(name) {
            Some(path) if !path.is_empty() => Ok(PathBuf::from(path)),
            _ => Err(format!("GRPC_SERVER_USE_TLS=true needs {name}")),
        };
        let optional = |name: &str| self.get(name).filter(|value| !value.is_empty());
        Ok(Some(GrpcTls {
            cert: file("GRPC_SERVER_TLS_CERT")?,
            key: file("GRPC_SERVER_TLS_KEY")?,
            client_ca: optional("GRPC_CLIENT_TLS_CACERT").map(PathBuf::from),
            client_san: optional("GRPC_CLIENT_TLS_SAN").map(str::to_owned),
        }))
    }

    /// Where envoyproxy/ratelimit's statistics go: `$STATSD_HOST:$STATSD_PORT`
    /// (`localhost:8125`), with the tags of `EXTRA_TAGS` (`name:value,...`), unless
    /// `USE_STATSD=false` or `DISABLE_STATS=true`.
    pub(crate) fn statsd(&self) -> Result<Option<StatsdTarget>, String> {
        if !self.flag("USE_STATSD")?.unwrap_or(true) || self.flag("DISABLE_STATS")? == Some(true) {
            return Ok(None);
        }
        let host = self.get("STATSD_HOST").unwrap_or("localhost").to_owned();
        let port = match self.get("STATSD_PORT") {
            Some(port) => port
                .parse()
                .map_err(|_| format!("STATSD_PORT={port}: not a port"))?,
            None => 8125,
        };
        let tags = self
            .get("EXTRA_TAGS")
            .unwrap_or_default()
            .split(',')
            .filter(|pair| !pair.is_empty())
            .map(|pair| match pair.split_once(':') {
                Some((name, value)) => Ok((name.to_owned(), value.to_owned())),
                None => Err(format!("EXTRA_TAGS: `{pair}` is not name:value")),
            })
            .collect::<Result<_, _>>()?;
        Ok(Some(StatsdTarget { host, port, tags }))
    }

    /// Whether every limit only reports (`SHADOW_MODE`).
    pub(crate) fn shadow_mode(&self) -> Result<bool, String> {
        Ok(self.flag("SHADOW_MODE")?.unwrap_or(false))
    }

    /// Checks the settings tollgate does not honour: an error naming the first that asks
    /// for something tollgate does not do; else a line for each set that changes nothing.
    pub(crate) fn unsupported(&self) -> Result<Vec<String>, String> {
        let asked_for = |name: &str, why: &str| Err(format!("{name}: {why}"));
        let on = |name: &str| self.flag(name).map(|flag| flag == Some(true));
        if self.get("BACKEND_TYPE") == Some("memcache")
            || self
                .get("MEMCACHE_HOST_PORT")
                .is_some_and(|v| !v.is_empty())
        {
            return asked_for(
                "BACKEND_TYPE=memcache",
                "tollgate serve keeps its state in Redis or in memory, not memcached",
            );
        }
        if self.get("CONFIG_TYPE").is_some_and(|v| v != "FILE") {
            return asked_for(
                "CONFIG_TYPE",
                "tollgate serve reads its rules from files (FILE), not from an xDS server",
            );
        }
        for (name, why) in [
            (
                "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
                "the Redis server's certificate is always verified, its name too",
            ),
            (
                "REDIS_PERSECOND",
                "one Redis keeps every limit; a second one for per-second limits is not supported",
            ),
            (
                "USE_DOG_STATSD",
                "DogStatsD metrics are not supported: read GET /metrics",
            ),
            (
                "USE_PROMETHEUS",
                "tollgate serves its Prometheus metrics on GET /metrics of the HTTP port",
            ),
            (
                "QUOTA_MODE",
                "quota mode for every descriptor is not supported: write quota_mode: true on each",
            ),
            (
                "TRACING_ENABLED",
                "OpenTelemetry tracing is not supported: tollgate logs its decisions",
            ),
            (
                "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
                "GET /healthcheck is OK once the rules loaded",
            ),
            (
                "FORCE_START_WITHOUT_INITIAL_CONFIG",
                "tollgate serve starts only with valid rules",
            ),
        ] {
            if on(name)? {
                return asked_for(name, why);
            }
        }
        if self.get("GRPC_UDS").is_some_and(|v| !v.is_empty()) {
            return asked_for(
                "GRPC_UDS",
                "the gRPC listener is a TCP address (GRPC_HOST, GRPC_PORT)",
            );
        }
        let notices = WITHOUT_EFFECT
            .iter()
            .filter(|(name, _)| self.get(name).is_some())
            .map(|(name, why)| format!("{name} has no effect: {why}"))
            .collect();
        Ok(notices)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(vars: &[(&str, &str)]) -> Upstream {
        Upstream {
            vars: vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn addresses_and_redis_are_read_as_upstream_reads_them() {
        let defaults = upstream(&[]);
        assert_eq!(
            defaults.listen("GRPC_HOST", "GRPC_PORT", 8081),
            Ok("0.0.0.0:8081".parse().unwrap())
        );
        let set = upstream(&[("GRPC_HOST", "127.0.0.1"), ("GRPC_PORT", "9000")]);
        assert_eq!(
            set.listen("GRPC_HOST", "GRPC_PORT", 8081),
            Ok("127.0.0.1:9000".parse().unwrap())
        );
        let bad = upstream(&[("PORT", "http")]).listen("HOST", "PORT", 8080);
        assert_eq!(bad, Err("PORT=http: not a port".to_owned()));

        let unix = |target: (Option<RedisTarget>, RedisOptions)| target.0.map(|t| t.to_string());
        assert_eq!(
            unix(defaults.store().unwrap()).as_deref(),
            Some("Redis at redis+unix:///var/run/nutcracker/ratelimit.sock")
        );
        let tcp = upstream(&[
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", "redis:6379"),
            ("REDIS_AUTH", "secret"),
            ("REDIS_TLS", "true"),
        ]);
        assert_eq!(
            unix(tcp.store().unwrap()).as_deref(),
            Some("Redis at rediss://***@redis:6379")
        );
        let cluster = upstream(&[
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_TYPE", "cluster"),
            ("REDIS_URL", "a:1,b:2"),
        ]);
        assert_eq!(
            unix(cluster.store().unwrap()).as_deref(),
            Some("the Redis Cluster at redis://a:1, redis://b:2")
        );
        assert!(upstream(&[("BACKEND_TYPE", "memory")])
            .store()
            .unwrap()
            .0
            .is_none());
        let sentinel = upstream(&[
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_TYPE", "sentinel"),
            ("REDIS_URL", "mymaster,s1:26379,s2:26379"),
            ("REDIS_AUTH", "secret"),
        ]);
        let (target, options) = sentinel.store().unwrap();
        assert_eq!(
            target.map(|t| t.to_string()).as_deref(),
            Some("Redis master `mymaster` of the sentinels at redis://s1:26379, redis://s2:26379")
        );
        let auth = Some(("default".to_owned(), "secret".to_owned()));
        assert_eq!(options.master_auth, auth);

        let prefixed = upstream(&[("CACHE_KEY_PREFIX", "prefix:")])
            .store()
            .unwrap();
        assert_eq!(prefixed.1.key_prefix.as_deref(), Some("prefix:"));
        let braces = upstream(&[("CACHE_KEY_PREFIX", "{x}")]).store();
        assert!(braces.err().is_some_and(|why| why.contains("braces")));
    }

    #[test]
    fn a_setting_tollgate_does_not_honour_stops_the_start_or_is_said() {
        let refused = upstream(&[("BACKEND_TYPE", "memcache")]).unsupported();
        assert!(refused.unwrap_err().starts_with("BACKEND_TYPE=memcache"));
        let refused = upstream(&[("USE_DOG_STATSD", "true")]).unsupported();
        assert!(refused.unwrap_err().starts_with("USE_DOG_STATSD"));
        assert_eq!(
            upstream(&[("USE_STATSD", "true")]).unsupported(),
            Ok(Vec::new())
        );
        let statsd = upstream(&[
            ("STATSD_HOST", "stats"),
            ("STATSD_PORT", "9125"),
            ("EXTRA_TAGS", "foo:bar,a:b"),
        ])
        .statsd();
        let tags = [("a", "b"), ("foo", "bar")].map(|(k, v)| (k.to_owned(), v.to_owned()));
        let expected = StatsdTarget {
            host: "stats".to_owned(),
            port: 9125,
            tags: tags.into(),
        };
        assert_eq!(statsd, Ok(Some(expected)));
        assert_eq!(upstream(&[("USE_STATSD", "false")]).statsd(), Ok(None));
        assert_eq!(upstream(&[("DISABLE_STATS", "true")]).statsd(), Ok(None));
        let bad = upstream(&[("EXTRA_TAGS", "foo")]).statsd();
        assert_eq!(bad, Err("EXTRA_TAGS: `foo` is not name:value".to_owned()));
        // What tollgate always does.
        let stop = upstream(&[("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true")]);
        assert_eq!(stop.unsupported(), Ok(Vec::new()));
        let notices = upstream(&[("LOG_LEVEL", "debug")]).unsupported().unwrap();
        assert_eq!(notices.len(), 1);
        assert!(notices[0].starts_with("LOG_LEVEL has no effect"));
        assert!(upstream(&[("SHADOW_MODE", "maybe")]).shadow_mode().is_err());
    }
}
