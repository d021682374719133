//! Local-first limits (`sync_every`): decided from local counts, agreed with the fleet
//! through a shared store every interval.
//!
//! Each server keeps, per key, the fleet's totals at its last sync and what it admitted
//! since, and decides against the limit on their sum. Every interval it sends what it
//! admitted and takes back the fleet's totals, which include every server's counts sent so
//! far. Without fresh totals (the shared store unreachable, or a key this server has not
//! synced yet) it also keeps to its share: the limit divided among the servers last seen,
//! counted on its own admissions.
//!
//! The windows (fixed window, sliding window counter) send counts per window; GCRA and the
//! token bucket (kept as GCRA's timestamp) share one schedule: a server's bookings since the
//! last sync fold into two numbers, applied to the fleet's schedule exactly as one by one.

mod table;
mod view;

pub(crate) use table::{Admission, Outgoing, SyncTable};
pub(crate) use view::{Bookings, Payload, Totals};
