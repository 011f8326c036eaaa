//! DNS UPDATE (RFC 2136) with its authorisation (RFC 3007), as plain
//! functions over bytes and records: no sockets, clocks or store. The
//! server reads a message, checks its TSIG and the zone's policy, applies
//! it to the zone's records and stores what comes out, then replies.
//!
//! - [`parse`]: an UPDATE message into an [`Update`]: its zone, its
//!   [`Prerequisite`]s and its [`Change`]s by what their classes mean,
//!   names decompressed and lowercased (owners, and the names in record
//!   data in canonical form, as Knot DNS keeps them), FORMERR ([`Malformed`]) for a
//!   record whose TTL, data or class does not fit its meaning.
//! - [`Policy`]: who may change what, from [`RuleConfig`]s.
//! - [`apply`]: the update against a zone's records, all or nothing:
//!   [`Applied`] records, or a [`Refusal`] with its RCODE.
//! - [`response`]: the reply.
//! - [`write`]: UPDATE messages written record by record, for clients.
//!
//! # The update policy
//!
//! A zone accepts no UPDATE unless a rule allows it. Each rule is a table
//! in the zone's configuration, `[[zone.update]]` in `pharos.toml`:
//!
//! ```toml
//! # cert-manager may set ACME DNS-01 challenges for the zone and its names.
//! [[zone.update]]
//! key = "acme"
//! at_or_below = "example.test."
//! acme_only = true
//!
//! # ExternalDNS may change addresses and TXT below k8s.example.test,
//! # from the cluster's network.
//! [[zone.update]]
//! key = "external-dns"
//! below = "k8s.example.test."
//! types = ["A", "AAAA", "TXT"]
//! from = ["10.0.0.0/8", "fd00::/8"]
//!
//! # The DHCP server, unsigned, from its own address.
//! [[zone.update]]
//! below = "dhcp.example.test."
//! types = ["A", "PTR"]
//! from = ["192.0.2.10/32"]
//! ```
//!
//! - `key`: the TSIG key (`[[tsig_key]]` name) the update must be signed
//!   with, or `"*"` for any key the server knows. Without `key`, the rule
//!   is for unsigned updates, and must list the sources in `from`.
//! - `from`: the source prefixes (CIDR) the update may come from; empty or
//!   absent: anywhere.
//! - exactly one of `name` (that name), `below` (every name strictly
//!   below it) and `at_or_below` (it and every name below it), inside the
//!   zone.
//! - `acme_only`: only the TXT records at `_acme-challenge.NAME`, for
//!   each NAME the rule covers (RFC 8555 section 8.4).
//! - `types`: the record types that may be changed; empty or absent: all.
//!   Deleting every RRset of a name (class ANY, type ANY) needs all.
//!
//! An update is allowed when every one of its changes is allowed by some
//! rule; otherwise it is REFUSED, saying which rule is missing, and
//! nothing changes. The policy is checked before the prerequisites, as
//! Knot DNS checks its ACL, so that a client without the right learns
//! nothing of the zone from their answers.

mod apply;
mod message;
mod policy;
mod response;
pub mod write;

pub use apply::{Applied, Refusal, apply};
pub use message::{Change, Malformed, OPCODE_UPDATE, Prerequisite, Update, parse};
pub use policy::{Policy, PolicyError, RuleConfig, RuleError};
pub use response::response;
