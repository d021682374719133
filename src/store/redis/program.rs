//! The Redis side of the store, `library.lua`: loaded once as a library of functions (Redis
//! 7's `FUNCTION LOAD`, called with `FCALL`), or, on a Redis without functions, run as
//! scripts of the same text (`EVALSHA`).
//!
//! A library's helpers are defined when it is loaded; a script defines them again at every
//! call, which costs Redis about as much as the decision itself. The library's name carries
//! the hash of its text, so that the servers of two versions of tollgate (a rolling upgrade)
//! each call their own functions in one Redis.

use redis::{RedisError, Script};
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicBool, Ordering};

/// The library's text, without its header and the registration of its functions.
const LIBRARY: &str = include_str!("library.lua");

/// What a call runs: one of the library's functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Entry {
    /// Decides the checks of one request, all or nothing.
    Acquire,
    /// Decides one fixed window kept as one integer, charged when admitted.
    AcquireCounter,
    /// Decides one token bucket, charged when admitted.
    AcquireTokenBucket,
    /// Decides one sliding window log kept as a sorted set, charged when admitted.
    AcquireLog,
    /// Decides the requests of several clients, each as its own call would.
    AcquireBatch,
    /// Gives charges back.
    Refund,
    /// Sends a server's counts of local-first limits and takes the fleet's totals.
    Sync,
    /// Takes the slots of a request's concurrency limits, as leases.
    TakeSlots,
    /// Gives slots back.
    ReleaseSlots,
    /// Renews leases still held.
    RenewSlots,
    /// Settles what a request turned out to cost.
    Settle,
}

impl Entry {
    const ALL: [Entry; 11] = [
        Entry::Acquire,
        Entry::AcquireCounter,
        Entry::AcquireTokenBucket,
        Entry::AcquireLog,
        Entry::AcquireBatch,
        Entry::Refund,
        Entry::Sync,
        Entry::TakeSlots,
        Entry::ReleaseSlots,
        Entry::RenewSlots,
        Entry::Settle,
    ];

    /// The function's name in `library.lua`.
    fn lua_name(self) -> &'static str {
        match self {
            Entry::Acquire => "acquire",
            Entry::AcquireCounter => "acquire_counter",
            Entry::AcquireTokenBucket => "acquire_token_bucket",
            Entry::AcquireLog => "acquire_log",
            Entry::AcquireBatch => "acquire_batch",
            Entry::Refund => "refund",
            Entry::Sync => "sync",
            Entry::TakeSlots => "take_slots",
            Entry::ReleaseSlots => "release_slots",
            Entry::RenewSlots => "renew_slots",
            Entry::Settle => "settle",
        }
    }

    /// How `acquire_batch` names this entry, when it takes it: the decisions and the slots.
    pub(super) fn batch_code(self) -> Option<i64> {
        match self {
            Entry::Acquire => Some(1),
            Entry::AcquireCounter => Some(2),
            Entry::AcquireTokenBucket => Some(3),
            Entry::AcquireLog => Some(4),
            Entry::TakeSlots => Some(5),
            Entry::ReleaseSlots => Some(6),
            Entry::Settle => Some(7),
            Entry::AcquireBatch | Entry::Refund | Entry::Sync | Entry::RenewSlots => None,
        }
    }
}

/// The library, its functions' names in Redis, and the same entries as scripts.
pub(super) struct Program {
    /// The text `FUNCTION LOAD` takes.
    library: String,
    /// By [`Entry`], in [`Entry::ALL`]'s order: the function's name in Redis.
    names: [String; 11],
    /// By [`Entry`]: the script of the same text, for a Redis without functions.
    scripts: [Script; 11],
    /// Whether the Redis has functions (else the scripts run).
    functions: AtomicBool,
}

impl Program {
    pub(super) fn new() -> Self {
        let digest = Sha256::digest(LIBRARY.as_bytes());
        let version: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        let library_name = format!("tollgate_{version}");
        let names = Entry::ALL.map(|entry| format!("{library_name}_{}", entry.lua_name()));
        let mut library = format!("#!lua name={library_name}\n{LIBRARY}\n");
        for (entry, name) in Entry::ALL.iter().zip(&names) {
            library.push_str(&format!(
                "redis.register_function('{name}', {})\n",
                entry.lua_name()
            ));
        }
        let scripts = Entry::ALL.map(|entry| {
            Script::new(&format!(
                "{LIBRARY}\nreturn {}(KEYS, ARGV)\n",
                entry.lua_name()
            ))
        });
        Program {
            library,
            names,
            scripts,
            functions: AtomicBool::new(false),
        }
    }

    /// `FUNCTION LOAD REPLACE` of the library (on every master of a cluster).
    pub(super) fn load_command(&self) -> redis::Cmd {
        let mut command = redis::cmd("FUNCTION");
        command.arg("LOAD").arg("REPLACE").arg(&self.library);
        command
    }

    /// Notes whether the library is loaded: after a load that worked, or that failed because
    /// the Redis has no functions (before Redis 7), whose scripts then run instead.
    pub(super) fn loaded(&self, loaded: bool) {
        self.functions.store(loaded, Ordering::Relaxed);
    }

    /// Whether calls run the library's functions (else scripts).
    pub(super) fn uses_functions(&self) -> bool {
        self.functions.load(Ordering::Relaxed)
    }

    /// The function's name in Redis.
    pub(super) fn name(&self, entry: Entry) -> &str {
        &self.names[entry as usize]
    }

    /// The script of `entry`, for a Redis without functions.
    pub(super) fn script(&self, entry: Entry) -> &Script {
        &self.scripts[entry as usize]
    }
}

/// Whether `error` says the Redis has no functions at all (before Redis 7).
pub(super) fn has_no_functions(error: &RedisError) -> bool {
    error
        .to_string()
        .to_ascii_lowercase()
        .contains("unknown command")
}

/// Whether `error` says the library is not loaded (a `FUNCTION FLUSH`, a new master): it is
/// loaded again, and the call made again.
pub(super) fn is_function_missing(error: &RedisError) -> bool {
    error
        .to_string()
        .to_ascii_lowercase()
        .contains("function not found")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_is_registered_under_a_versioned_name() {
        let program = Program::new();
        for entry in Entry::ALL {
            let name = program.name(entry);
            assert!(name.starts_with("tollgate_"), "{name}");
            assert!(
                program
                    .library
                    .contains(&format!("'{name}', {})", entry.lua_name())),
                "{name}"
            );
        }
        assert!(program.library.starts_with("#!lua name=tollgate_"));
    }
}
