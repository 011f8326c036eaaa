//! Zones Pharos copies from a primary (it is their secondary), without
//! I/O: the server's task sends the messages and keeps the time.
//!
//! - [`request`]: the SOA query a refresh starts with, and the IXFR
//!   (RFC 1995, the zone's current SOA in the authority section) or AXFR
//!   (RFC 5936) request that follows when the primary's serial is newer;
//!   each signed with the zone's TSIG key if it has one (RFC 8945).
//! - [`assemble`]: the transfer's response messages, taken one at a time
//!   as they arrive, checked (the ID, the RCODE, the question, every
//!   owner inside the zone, the serials, every message's TSIG when a key
//!   is configured) and assembled into the zone's new records, or a
//!   reason why not. A refused transfer leaves the zone as it was.
//! - [`refresh`]: when to look again: the SOA's refresh, retry and
//!   expire timers (clamped), a NOTIFY that asks to look now, the
//!   primaries tried in order, and the zone expired when no primary could
//!   be reached for the SOA's expire time.

pub mod assemble;
pub mod refresh;
pub mod request;

pub use assemble::{Assembled, Assembler, Progress, TransferError};
pub use refresh::{Action, Clamps, Refresh, SoaTimers};
pub use request::{Kind, Request, TsigKey};
