//! The query path of Pharos (docs/architecture.md, "The query path"):
//! decode the query, look the name up, encode the answer. A plain function from bytes to
//! bytes over an immutable [`Snapshot`]; every transport (UDP, TCP, TLS,
//! HTTPS and QUIC) is a thin loop around [`respond`] or [`respond_with`]
//! (or [`respond_parsed`], after [`prefetch_batch`]), and learns what it
//! sent from the [`Answered`] they return, without reading it back. The
//! kernel fast path pre-encodes routed answers with [`write_decision`],
//! the encoder the query path uses. Zone transfers out, many messages
//! for one query, come from [`respond_transfer`] (module `transfer`), and
//! the NOTIFYs that tell secondaries a zone changed from
//! [`notify_message`] (module `notify`). A signed message, over any
//! transport, has its TSIG checked and its response signed (module `tsig`).

mod notify;
mod service;
mod shared;
mod signed;
mod transfer;
mod tsig;

use std::net::IpAddr;

pub use notify::{NotifyAcl, notified_zone, notify_message, notify_reply};
use pharos_dnssec::NXNAME;
use pharos_route::Routes;
use pharos_route::prefix::PrefixMap;
use pharos_wire::edns::{
    CLIENT_COOKIE_LEN, EDNS_CO, EDNS_DO, ExtendedError, MAX_PADDING_OPTION_LEN, OPTION_COOKIE, OPTION_NSID, write_keepalive, write_padding,
};
use pharos_wire::query::Question;
use pharos_wire::{Edns, HEADER_LEN, MAX_STREAM_MESSAGE, MIN_UDP_PAYLOAD, MessageWriter, flags, rcode, types};
pub use pharos_wire::{Query, Reject, parse_query, query_read};
use pharos_zone::encode::{answer_flags, fit, smallest_ttl, write_answer};
use pharos_zone::lookup::routed_nodata;
use pharos_zone::{Body, Fitted, Lookup, ZoneSet};
use rand::Rng;
pub use service::write_decision;
pub use shared::SharedSnapshot;
pub use signed::{RefusedRequest, RequestSignature, SignedRequest, append_tsig, check_request};
pub use transfer::{Sent, TransferAcl, TransferRule, Transferred, is_transfer, respond_transfer, routed_records};
pub use tsig::{Algorithm as TsigAlgorithm, TsigKey};

/// The UDP payload size Pharos advertises unless configured otherwise:
/// the DNS Flag Day 2020 value, which avoids IP fragmentation.
pub const DEFAULT_UDP_PAYLOAD: u16 = 1232;

/// Everything an answer depends on, frozen. A change builds a new snapshot
/// and swaps it in whole.
#[derive(Debug)]
pub struct Snapshot {
    /// Shared between snapshots while the zones and service names stay
    /// the same: a policy update does not rebuild the zones.
    pub zones: std::sync::Arc<ZoneSet>,
    /// Services answered by policy, and the regions their policies use.
    pub routes: Routes,
    pub settings: Settings,
}

/// Operator settings that shape every response.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Returned in the NSID option (RFC 5001) when a client asks for it.
    pub nsid: Option<Box<[u8]>>,
    /// Largest UDP response Pharos sends and advertises.
    pub udp_payload: u16,
    /// Resolvers whose EDNS Client Subnet is believed; `None` trusts all.
    /// From anyone else the subnet is ignored (answered with scope 0).
    pub trusted_subnet_senders: Option<PrefixMap<()>>,
    /// Who may transfer which zone ([`respond_transfer`]); a zone not
    /// listed is transferred to nobody.
    pub transfer_acls: Vec<TransferAcl>,
    /// Who may transfer each zone kept in the store (`[store_zones]`):
    /// the snapshot's builder lists every such zone in `transfer_acls`.
    pub store_zone_transfers: Option<TransferRule>,
    /// The TSIG keys requests may be signed with: every query's is
    /// checked, a transfer's included.
    pub tsig_keys: Vec<TsigKey>,
    /// Who may NOTIFY Pharos of a change to which secondary zone.
    pub notify_acls: Vec<NotifyAcl>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            nsid: None,
            udp_payload: DEFAULT_UDP_PAYLOAD,
            trusted_subnet_senders: None,
            transfer_acls: Vec::new(),
            store_zone_transfers: None,
            tsig_keys: Vec::new(),
            notify_acls: Vec::new(),
        }
    }
}

/// How the query arrived: it decides how large a response may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Udp,
    /// TCP, TLS, HTTPS or QUIC: a response may take up to 65535 octets.
    Stream,
}

/// Who asked, and how.
#[derive(Debug, Clone, Copy)]
pub struct Client {
    pub address: IpAddr,
    pub transport: Transport,
}

/// What a connection adds to the OPT record of its responses, each only
/// when the query asks for it. The default adds nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResponseOptions {
    /// The idle timeout, in units of 100 ms, to tell queries that carry an
    /// edns-tcp-keepalive option (RFC 7828). For TCP and TLS only: UDP
    /// has no connection and QUIC forbids the option (RFC 9250 section 5.5.2).
    pub keepalive: Option<u16>,
    /// Pad the responses to padded queries to a multiple of 468 octets
    /// (RFC 7830 section 4, RFC 8467 section 4.1). Only where the transport
    /// is encrypted: padding in the clear hides nothing (RFC 7830 section 6).
    pub pad: bool,
    /// The server's side of a COOKIE option (RFC 7873), for a query that
    /// carried one, as its transport made it (it holds the secret and the
    /// clock).
    pub cookie: Option<CookieReply>,
    /// The time (Unix seconds) a signed query's TSIG is checked and its
    /// response signed at. The transport reads its clock for it only
    /// when the query is signed (`Query::tsig_at`), once per batch or read:
    /// an unsigned query needs no time.
    pub now: u64,
}

/// What a server says to a query's COOKIE option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookieReply {
    /// A fresh server cookie (RFC 9018: version, reserved, time, hash).
    pub server: [u8; SERVER_COOKIE_LEN],
    /// The query echoed a server cookie that is not ours, or too old: it
    /// is answered BADCOOKIE (RFC 7873 section 5.2.4), with the fresh one.
    pub bad: bool,
}

/// The length of the server cookies Pharos makes (RFC 9018 section 4).
pub const SERVER_COOKIE_LEN: usize = 16;
/// RFC 7873 section 8: the extended RCODE of a bad server cookie.
const BADCOOKIE: u16 = 23;
/// Why, for clients that read Extended DNS Errors (RFC 8914 has no code
/// of its own for it).
const BAD_SERVER_COOKIE: ExtendedError = ExtendedError::other("bad or expired server cookie");

/// What a response says, for its transport to act on without reading it
/// back: DNS over HTTPS makes the cache lifetime of its HTTP response from
/// it, and every transport counts it (`pharos_transport::metrics`).
#[derive(Debug, Clone, Copy)]
pub struct Answered<'s> {
    /// The RCODE, extended RCODEs included.
    pub rcode: u16,
    /// The smallest TTL among the records, the OPT pseudo-record aside;
    /// `None` when there is no record.
    pub smallest_ttl: Option<u32>,
    /// The length of the response in octets.
    pub len: usize,
    /// The question's type; `None` when the query had no readable question.
    pub qtype: Option<u16>,
    /// The routing core's decision, when a service's policy chose the answer.
    pub routed: Option<RoutedTo<'s>>,
    /// Where the response's OPT record starts, when it has one: a
    /// rate-limited response keeps it (`pharos_transport::rrl`).
    pub opt_at: Option<usize>,
    /// The name does not exist, though the RCODE may say NOERROR: a
    /// compact denial (RFC 9824). Rate limiting counts it as NXDOMAIN.
    pub nonexistent: bool,
    /// What the query's TSIG record said; `None` for an unsigned query.
    pub tsig: Option<Tsig>,
}

/// What a signed query's TSIG record said, for its transport to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tsig {
    /// The signature checked out; the response is signed.
    Verified,
    /// Refused with NOTAUTH and a TSIG error (RFC 8945 section 3).
    BadSig,
    BadKey,
    BadTime,
    BadTrunc,
    /// The TSIG record could not be read: FORMERR.
    Malformed,
}

impl Tsig {
    /// Every outcome, in the order of their values.
    pub const ALL: [Tsig; 6] = [Tsig::Verified, Tsig::BadSig, Tsig::BadKey, Tsig::BadTime, Tsig::BadTrunc, Tsig::Malformed];

    /// How metrics name it: the TSIG error, as RFC 8945 spells it.
    pub fn name(self) -> &'static str {
        match self {
            Tsig::Verified => "verified",
            Tsig::BadSig => "BADSIG",
            Tsig::BadKey => "BADKEY",
            Tsig::BadTime => "BADTIME",
            Tsig::BadTrunc => "BADTRUNC",
            Tsig::Malformed => "FORMERR",
        }
    }
}

/// Where a routed answer sends its client: what the routing door decided,
/// returned for the caller to count, so that no counter lives here.
#[derive(Debug, Clone, Copy)]
pub struct RoutedTo<'s> {
    pub service: &'s pharos_route::Service,
    /// The region the client was placed in.
    pub region: pharos_route::RegionId,
    /// The replica answered first, as an index into the service's.
    pub first_replica: usize,
}

/// What a response's OPT record is made from besides the query's own:
/// the operator's settings and the connection's options.
#[derive(Clone, Copy)]
struct OptSource<'a> {
    settings: &'a Settings,
    options: &'a ResponseOptions,
}

/// Answers one query. Appends the response to `out` and says what it
/// answered, or returns `None` (with `out` untouched) when the packet
/// deserves no answer. `rng` draws the random choices of routing policies.
/// It knows no time: a signed query, checked as of the Unix epoch, is
/// BADTIME; a server answers through [`respond_with`] and its options'
/// [`ResponseOptions::now`].
pub fn respond<'s>(packet: &[u8], client: &Client, snapshot: &'s Snapshot, rng: &mut impl Rng, out: &mut Vec<u8>) -> Option<Answered<'s>> {
    respond_with(packet, client, &ResponseOptions::default(), snapshot, rng, out)
}

/// Like [`respond`], for a connection whose responses carry `options`.
pub fn respond_with<'s>(
    packet: &[u8],
    client: &Client,
    options: &ResponseOptions,
    snapshot: &'s Snapshot,
    rng: &mut impl Rng,
    out: &mut Vec<u8>,
) -> Option<Answered<'s>> {
    respond_parsed(parse_query(packet), client, options, snapshot, rng, out)
}

/// Like [`respond_with`], for a packet its server has already parsed (with
/// [`parse_query`]), as the UDP worker does to [`prefetch_batch`].
pub fn respond_parsed<'s>(
    parsed: Result<Query<'_>, Reject<'_>>,
    client: &Client,
    options: &ResponseOptions,
    snapshot: &'s Snapshot,
    rng: &mut impl Rng,
    out: &mut Vec<u8>,
) -> Option<Answered<'s>> {
    // A signed query is rare: its checking and signing are out of line.
    if let Some(query) = signed_query(&parsed) {
        return Some(signed::respond(&query, parsed, client, options, snapshot, rng, out));
    }
    respond_as_parsed(parsed, client, options, snapshot, rng, 0, out)
}

/// True when a parsed packet is a query with a TSIG record (RFC 8945),
/// to be answered at [`ResponseOptions::now`].
pub fn is_signed(parsed: &Result<Query<'_>, Reject<'_>>) -> bool {
    signed_query(parsed).is_some()
}

fn signed_query<'q>(parsed: &Result<Query<'q>, Reject<'q>>) -> Option<Query<'q>> {
    // Without a question the query is malformed before its signature
    // counts: FORMERR, unsigned, as Knot DNS and NSD answer.
    query_read(parsed).filter(|query| query.tsig_at.is_some() && query.question.is_some()).copied()
}

/// Answers a parsed query, leaving `reserved` octets of its size limit for
/// a record appended after (a TSIG record).
fn respond_as_parsed<'s>(
    parsed: Result<Query<'_>, Reject<'_>>,
    client: &Client,
    options: &ResponseOptions,
    snapshot: &'s Snapshot,
    rng: &mut impl Rng,
    reserved: usize,
    out: &mut Vec<u8>,
) -> Option<Answered<'s>> {
    let opt = OptSource { settings: &snapshot.settings, options };
    match parsed {
        Ok(query) if options.cookie.is_some_and(|cookie| cookie.bad) => {
            Some(write_refusal(&query, BADCOOKIE, Some(BAD_SERVER_COOKIE), opt, out))
        }
        Ok(query) => Some(answer_query(&query, client, opt, snapshot, rng, reserved, out)),
        Err(Reject::Drop) => None,
        Err(Reject::Respond { query, rcode }) => Some(write_refusal(&query, rcode, None, opt, out)),
        // RFC 7873 section 5.4: with a COOKIE option, to a server that
        // makes cookies, an empty question asks for a server cookie alone.
        Err(Reject::NoQuestion { query }) => {
            let asks_for_a_cookie = query.edns.is_some_and(|edns| cookie_for(&edns, options).is_some());
            let rcode = if asks_for_a_cookie { rcode::NOERROR } else { rcode::FORMERR };
            Some(write_refusal(&query, rcode, None, opt, out))
        }
    }
}

/// Readies a batch of parsed queries for answering one by one: where the
/// snapshot's routing data is large enough to miss the cache, starts
/// fetching what answering each query will read first, so that the first
/// misses of the whole batch overlap instead of each query waiting for its
/// own. Otherwise does nothing, not even iterate.
pub fn prefetch_batch<'b, 'q: 'b>(queries: impl IntoIterator<Item = (&'b Query<'q>, &'b Client)>, snapshot: &Snapshot) {
    let proximity = &snapshot.routes.proximity;
    if !proximity.prefetches() {
        return;
    }
    for (query, client) in queries {
        proximity.prefetch(service::asker(client, query.edns, &snapshot.settings).address);
    }
}

/// Answers a datagram that was longer than the receive buffer: FORMERR
/// from the header alone, or nothing if even that is not a query.
pub fn respond_oversized(packet: &[u8], out: &mut Vec<u8>) -> Option<Answered<'static>> {
    let parsed = parse_query(&packet[..packet.len().min(HEADER_LEN)]);
    let header_only = Query { question: None, edns: None, ..*query_read(&parsed)? };
    let opt = OptSource { settings: &Settings::default(), options: &ResponseOptions::default() };
    Some(write_refusal(&header_only, rcode::FORMERR, None, opt, out))
}

fn answer_query<'s>(
    query: &Query<'_>,
    client: &Client,
    opt: OptSource<'_>,
    snapshot: &'s Snapshot,
    rng: &mut impl Rng,
    reserved: usize,
    out: &mut Vec<u8>,
) -> Answered<'s> {
    let question = query.question.expect("a parsed query has its question");
    if query.opcode() == pharos_wire::query::OPCODE_NOTIFY {
        let (flags, rcode, extended) = notify::taken(query, &question, client, &snapshot.settings);
        return write_question_only(query, flags, rcode, extended, opt, out);
    }
    if let Some((rcode, extended)) = unanswerable(query, &question, client.transport, snapshot) {
        return write_refusal(query, rcode, extended, opt, out);
    }
    let mut qname = [0u8; pharos_wire::name::MAX_NAME_LEN];
    let qname = &mut qname[..question.name_len];
    pharos_wire::name::lowercase_into(query.qname(), qname);
    let settings = &snapshot.settings;
    let limit = message_limit(query.edns, client.transport, settings) - reserved;
    let room = limit - HEADER_LEN - question.name_len - 4 - opt_room(query.edns, opt);
    let mut writer = MessageWriter::new(out);
    writer.question(query.question_bytes());
    let dnssec_ok = query.edns.is_some_and(|edns| edns.dnssec_ok);
    let routed = snapshot.routes.service(qname).and_then(|routed| Some((routed, service::family_of(routed, question.qtype)?)));
    let mut denied_routed = None;
    if let Some((routed_service, family)) = routed {
        let asker = service::asker(client, query.edns, settings);
        // Only a DO=1 query looks for its zone's signer: the others need no zone here.
        let signed_zone = dnssec_ok.then(|| snapshot.zones.zone_for(qname)).flatten().filter(|zone| zone.signer.is_some());
        let signing = signed_zone.and_then(|zone| Some((zone.signer.as_deref()?, &*qname)));
        let written = service::write_addresses(&mut writer, routed_service, family, &asker, snapshot, rng, room, signing);
        if let Some((fitted, written)) = written {
            let service::Written { scope, ttl, region, first_replica } = written;
            // A subnet that was not used says nothing about this answer's reach.
            let scope = if asker.from_client_subnet { scope } else { 0 };
            let truncation = if fitted.truncated { flags::TC } else { 0 };
            let counts = [1, fitted.counts[0], 0, 0];
            let outcome = Outcome { flags: flags::AA | truncation, rcode: rcode::NOERROR, counts, scope, extended: None };
            let opt_at = finish(&mut writer, query, &outcome, opt);
            let smallest_ttl = (fitted.counts[0] > 0).then_some(ttl);
            let routed = Some(RoutedTo { service: routed_service, region, first_replica });
            let qtype = Some(question.qtype);
            return Answered {
                rcode: rcode::NOERROR,
                smallest_ttl,
                len: writer.len(),
                qtype,
                routed,
                opt_at,
                nonexistent: false,
                tsig: None,
            };
        }
        // No replica chosen: NODATA, whose signed proof must not list the type denied.
        denied_routed = signed_zone.map(|zone| Lookup::Resolved(routed_nodata(zone, qname, service::routed_type(routed_service, family))));
    }
    let lookup = denied_routed.unwrap_or_else(|| snapshot.zones.lookup(qname, question.qtype, dnssec_ok));
    let extended = extended_error(&lookup);
    let compact_nxdomain = match &lookup {
        Lookup::Built(body) => body.compact_nxdomain,
        Lookup::Resolved(answer) => answer.compact_nxdomain,
        Lookup::NotAuthoritative | Lookup::Expired => false,
    };
    let room = room - extended.filter(|_| query.edns.is_some()).map_or(0, |extended| extended.option_len());
    let (header_flags, rcode, fitted, smallest_ttl) = match lookup {
        Lookup::Built(body) => copy_body(&mut writer, body, room),
        Lookup::Resolved(answer) => {
            let body_start = writer.len();
            let mut cuts = Vec::new();
            write_answer(&answer, &mut writer, &mut cuts);
            let fitted = fit(&cuts, room);
            writer.truncate(body_start + fitted.len);
            (answer_flags(&answer), answer.rcode, fitted, smallest_ttl(&cuts, &fitted))
        }
        Lookup::NotAuthoritative => (0, rcode::REFUSED, Fitted { len: 0, counts: [0; 3], truncated: false }, None),
        Lookup::Expired => (0, rcode::SERVFAIL, Fitted { len: 0, counts: [0; 3], truncated: false }, None),
    };
    // RFC 9824 section 5: a query with Compact Answers OK learns from the
    // RCODE that the name does not exist, beside the same signed proof.
    let rcode = if compact_nxdomain && query.edns.is_some_and(|edns| edns.compact_ok) { rcode::NXDOMAIN } else { rcode };
    let truncation = if fitted.truncated { flags::TC } else { 0 };
    // RFC 1034 section 3.7.1: answers to QCLASS=* are never authoritative.
    let header_flags = if question.qclass == types::CLASS_ANY { header_flags & !flags::AA } else { header_flags };
    let counts = [1, fitted.counts[0], fitted.counts[1], fitted.counts[2]];
    let opt_at = finish(&mut writer, query, &Outcome { flags: header_flags | truncation, rcode, counts, scope: 0, extended }, opt);
    let nonexistent = compact_nxdomain || rcode == rcode::NXDOMAIN;
    Answered { rcode, smallest_ttl, len: writer.len(), qtype: Some(question.qtype), routed: None, opt_at, nonexistent, tsig: None }
}

/// Questions answered with an error before any lookup, and why if the
/// references say why. Other meta types (OPT, MAILA, ...) simply have no
/// data: NODATA, as Knot DNS and NSD say.
fn unanswerable(query: &Query<'_>, question: &Question, transport: Transport, snapshot: &Snapshot) -> Option<(u16, Option<ExtendedError>)> {
    // A class not served is refused whatever the type, as Knot DNS and NSD
    // refuse it.
    if question.qclass != types::CLASS_IN && question.qclass != types::CLASS_ANY {
        return Some((rcode::REFUSED, Some(ExtendedError::NOT_SUPPORTED)));
    }
    match question.qtype {
        // A transfer takes a stream (RFC 5936 section 4.2): over UDP,
        // NOTIMP, with no reason given, as Knot DNS says it.
        types::AXFR if transport == Transport::Udp => Some((rcode::NOTIMP, None)),
        // Only a zone's apex can be transferred, over any transport.
        types::AXFR | types::IXFR if transfer::zone_named(query, snapshot).is_none() => {
            let (rcode, extended) = transfer::NOT_A_ZONE;
            Some((rcode, Some(extended)))
        }
        // Transfers are answered over TCP and TLS (`respond_transfer`),
        // not over HTTPS or QUIC, nor as one message over UDP.
        types::AXFR | types::IXFR => Some((rcode::REFUSED, Some(TRANSFER_NEEDS_TCP))),
        // RFC 9824 section 3.5: NXNAME only ever marks a compact denial's
        // bitmap, and a server that makes them MUST answer a query for it
        // FORMERR, signed zone or not, with the Extended DNS Error it names.
        NXNAME => Some((rcode::FORMERR, Some(ExtendedError::INVALID_QUERY_TYPE))),
        _ => None,
    }
}

/// Why a transfer query got no zone.
const TRANSFER_NEEDS_TCP: ExtendedError = ExtendedError { info_code: 21, extra_text: "zone transfers are answered over TCP and TLS" };

/// Why a secondary zone is answered SERVFAIL: no primary confirmed its
/// copy within the SOA's expire time (RFC 1034 section 4.3.5), or there
/// was none yet.
pub(crate) const ZONE_EXPIRED: ExtendedError = ExtendedError::other("zone expired: no primary reached");

/// Why a lookup ended in an error, where the response can say so: a name
/// in no served zone (as Knot DNS and NSD say), or a DNAME substitution
/// longer than a name may be (as NSD says).
fn extended_error(lookup: &Lookup<'_>) -> Option<ExtendedError> {
    const DNAME_TOO_LONG: ExtendedError = ExtendedError::other("DNAME substitution is longer than a name may be");
    match lookup {
        Lookup::NotAuthoritative => Some(ExtendedError::NOT_AUTHORITATIVE),
        Lookup::Expired => Some(ZONE_EXPIRED),
        Lookup::Built(body) if body.rcode == rcode::YXDOMAIN => Some(DNAME_TOO_LONG),
        Lookup::Resolved(answer) if answer.rcode == rcode::YXDOMAIN => Some(DNAME_TOO_LONG),
        _ => None,
    }
}

fn copy_body(writer: &mut MessageWriter<'_>, body: &Body, room: usize) -> (u16, u16, Fitted, Option<u32>) {
    let fitted = body.fit(room);
    writer.raw(&body.bytes[..fitted.len]);
    (body.flags, body.rcode, fitted, body.smallest_ttl(&fitted))
}

/// The largest response this query may get (RFC 6891 section 6.2.5).
fn message_limit(edns: Option<Edns>, transport: Transport, settings: &Settings) -> usize {
    match (transport, edns) {
        (Transport::Stream, _) => MAX_STREAM_MESSAGE,
        (Transport::Udp, None) => MIN_UDP_PAYLOAD as usize,
        (Transport::Udp, Some(edns)) => edns.udp_payload.clamp(MIN_UDP_PAYLOAD, settings.udp_payload.max(MIN_UDP_PAYLOAD)) as usize,
    }
}

/// A response with no records: the RCODE and, if readable, the question.
fn write_refusal(
    query: &Query<'_>,
    rcode: u16,
    extended: Option<ExtendedError>,
    opt: OptSource<'_>,
    out: &mut Vec<u8>,
) -> Answered<'static> {
    write_question_only(query, 0, rcode, extended, opt, out)
}

/// A response of the question alone with header `flags` (AA) and `rcode`.
fn write_question_only(
    query: &Query<'_>,
    flags: u16,
    rcode: u16,
    extended: Option<ExtendedError>,
    opt: OptSource<'_>,
    out: &mut Vec<u8>,
) -> Answered<'static> {
    let mut writer = MessageWriter::new(out);
    writer.question(query.question_bytes());
    let counts = [u16::from(query.question.is_some()), 0, 0, 0];
    let opt_at = finish(&mut writer, query, &Outcome { flags, rcode, counts, scope: 0, extended }, opt);
    let qtype = query.question.map(|question| question.qtype);
    Answered { rcode, smallest_ttl: None, len: writer.len(), qtype, routed: None, opt_at, nonexistent: false, tsig: None }
}

/// What a response says besides its records.
struct Outcome {
    /// AA and TC, as the answer sets them.
    flags: u16,
    rcode: u16,
    /// Records per section, the OPT record aside.
    counts: [u16; 4],
    /// The ECS scope of the answer (0: valid for every client).
    scope: u8,
    /// Why the response is an error, for clients that read EDNS.
    extended: Option<ExtendedError>,
}

/// Fills in the header and appends the OPT record if the query had one;
/// returns where that record starts.
fn finish(writer: &mut MessageWriter<'_>, query: &Query<'_>, outcome: &Outcome, opt: OptSource<'_>) -> Option<usize> {
    // CD is cleared, signed zones included: RFC 4035 section 3.1.6 says an
    // authoritative response SHOULD clear it (copying it is a recursive
    // server's duty, section 3.2.2), as Knot DNS and NSD do.
    let echoed = query.flags & (flags::OPCODE_MASK | flags::RD);
    writer.set_id(query.id);
    writer.set_flags(flags::QR | echoed | outcome.flags | (outcome.rcode & 0xF));
    let mut counts = outcome.counts;
    let opt_at = query.edns.map(|edns| {
        let opt_at = writer.len();
        write_opt(writer, &edns, outcome, opt);
        counts[3] += 1;
        opt_at
    });
    writer.set_counts(counts);
    opt_at
}

/// Room to keep for the OPT record `write_opt` will append: its size,
/// with as much padding as any message could need.
fn opt_room(edns: Option<Edns>, opt: OptSource<'_>) -> usize {
    match edns {
        None => 0,
        Some(edns) => {
            let nsid = nsid_for(&edns, opt.settings).map_or(0, |nsid| 4 + nsid.len());
            let subnet = edns.client_subnet.map_or(0, |subnet| 4 + subnet.echo_len());
            let keepalive = keepalive_for(&edns, opt.options).map_or(0, |_| 6);
            let padding = if pads(&edns, opt.options) { MAX_PADDING_OPTION_LEN } else { 0 };
            let cookie = cookie_for(&edns, opt.options).map_or(0, |_| 4 + CLIENT_COOKIE_LEN + SERVER_COOKIE_LEN);
            11 + nsid + subnet + keepalive + padding + cookie
        }
    }
}

fn nsid_for<'s>(edns: &Edns, settings: &'s Settings) -> Option<&'s [u8]> {
    settings.nsid.as_deref().filter(|_| edns.wants_nsid)
}

/// The client cookie to echo and the server cookie to give, when the
/// query carried a COOKIE option and its transport made a reply.
fn cookie_for(edns: &Edns, options: &ResponseOptions) -> Option<([u8; CLIENT_COOKIE_LEN], [u8; SERVER_COOKIE_LEN])> {
    Some((edns.cookie?.client, options.cookie?.server))
}

fn keepalive_for(edns: &Edns, options: &ResponseOptions) -> Option<u16> {
    options.keepalive.filter(|_| edns.wants_keepalive)
}

/// Only padded queries get padded responses (RFC 7830 section 4 makes it a
/// MUST for them, and RFC 8467 pads "responses to padded queries"): a
/// client that did not pad its query has already shown its size, and would
/// pay hundreds of octets per answer for padding that hides little.
fn pads(edns: &Edns, options: &ResponseOptions) -> bool {
    options.pad && edns.padded
}

/// The response's OPT record (RFC 6891 section 6.1.3): our payload size,
/// the upper RCODE bits, version 0, the DO and CO bits echoed, NSID if
/// asked for, the client subnet echoed with the answer's scope (RFC 7871
/// section 7.2.1), the Extended DNS Error of an error response (RFC 8914),
/// the client's cookie with a server cookie (RFC 7873), then what the
/// connection adds: the keepalive timeout and, last because
/// it measures the whole message, the padding.
fn write_opt(writer: &mut MessageWriter<'_>, edns: &Edns, outcome: &Outcome, opt: OptSource<'_>) {
    let settings = opt.settings;
    // DO echoed (RFC 3225), and CO: Pharos makes compact answers (RFC 9824 section 5).
    let echoed_flags = if edns.dnssec_ok { EDNS_DO } else { 0 } | if edns.compact_ok { EDNS_CO } else { 0 };
    writer.raw(&[0]);
    writer.u16(types::OPT);
    writer.u16(settings.udp_payload);
    writer.u32(u32::from(outcome.rcode >> 4) << 24 | echoed_flags);
    writer.length_prefixed(|options| {
        if let Some(nsid) = nsid_for(edns, settings) {
            options.u16(OPTION_NSID);
            options.u16(nsid.len() as u16);
            options.raw(nsid);
        }
        if let Some(subnet) = edns.client_subnet {
            subnet.write_echo(outcome.scope, options);
        }
        if let Some(extended) = outcome.extended {
            extended.write(options);
        }
        if let Some((client, server)) = cookie_for(edns, opt.options) {
            options.u16(OPTION_COOKIE);
            options.u16((CLIENT_COOKIE_LEN + SERVER_COOKIE_LEN) as u16);
            options.raw(&client);
            options.raw(&server);
        }
        if let Some(timeout) = keepalive_for(edns, opt.options) {
            write_keepalive(options, timeout);
        }
        if pads(edns, opt.options) {
            write_padding(options);
        }
    });
}
