//! The query path of a signed message (RFC 8945), out of the unsigned
//! one's way: its TSIG checked at the time its transport gave
//! ([`ResponseOptions::now`]), a refusal answered NOTAUTH (or FORMERR for
//! a record that cannot be read) with its TSIG error and the Extended DNS
//! Error that says why, and any other response, whatever its RCODE,
//! answered as an unsigned query would be, with room kept for its TSIG
//! record, and signed (section 5.3). Each query on a stream is its own
//! request: its response is signed as a first message.

use pharos_wire::edns::ExtendedError;
use pharos_wire::{Query, Reject, rcode};
use rand::Rng;

use crate::tsig::{self, Checked, Signing, TsigKey};
use crate::{Answered, Client, OptSource, ResponseOptions, Snapshot, Tsig, respond_as_parsed, write_refusal};

/// Answers `query` (as `parsed`), which carries a TSIG record, into `out`.
pub(crate) fn respond<'s>(
    query: &Query<'_>,
    parsed: Result<Query<'_>, Reject<'_>>,
    client: &Client,
    options: &ResponseOptions,
    snapshot: &'s Snapshot,
    rng: &mut impl Rng,
    out: &mut Vec<u8>,
) -> Answered<'s> {
    let start = out.len();
    let opt = OptSource { settings: &snapshot.settings, options };
    let mut signing = match checked(query, &snapshot.settings.tsig_keys, options.now, opt, out) {
        Ok(Some(signing)) => signing,
        Ok(None) => unreachable!("a query with a TSIG record is signed"),
        Err(refused) => return refused,
    };
    let answered = respond_as_parsed(parsed, client, options, snapshot, rng, signing.record_len(), out)
        .expect("a query with a readable TSIG record is answered");
    signing.sign(out, start, options.now);
    Answered { len: out.len() - start, tsig: Some(Tsig::Verified), ..answered }
}

/// Appends to `response`, a response to `query` alone in the vector, the
/// TSIG record [`crate::respond_parsed`] gave it at `now`: for a response
/// cut down after it was answered (a slipped one, `pharos_transport::rrl`),
/// which lost its record. The query's signature is checked again: only a
/// slipped response to a signed query pays for it.
pub fn append_tsig(query: &Query<'_>, snapshot: &Snapshot, now: u64, response: &mut Vec<u8>) {
    match tsig::check(query.packet, query.tsig_at, &snapshot.settings.tsig_keys, now) {
        Checked::Signed(mut signing) => signing.sign(response, 0, now),
        Checked::Refused(refusal) => refusal.append_to(response, 0, now),
        Checked::Unsigned | Checked::Malformed => {}
    }
}

/// Checks the TSIG record of `query` against `keys` at `now`: how its
/// responses are signed (`None` for an unsigned query), or, for a
/// request refused, its refusal appended to `out`, and what it said.
pub(crate) fn checked<'k>(
    query: &Query<'_>,
    keys: &'k [TsigKey],
    now: u64,
    opt: OptSource<'_>,
    out: &mut Vec<u8>,
) -> Result<Option<Signing<'k>>, Answered<'static>> {
    let start = out.len();
    match tsig::check(query.packet, query.tsig_at, keys, now) {
        Checked::Unsigned => Ok(None),
        Checked::Signed(signing) => Ok(Some(signing)),
        Checked::Malformed => {
            let answered = write_refusal(query, rcode::FORMERR, Some(tsig::MALFORMED), opt, out);
            Err(Answered { tsig: Some(Tsig::Malformed), ..answered })
        }
        Checked::Refused(refusal) => {
            let answered = write_refusal(query, rcode::NOTAUTH, Some(refusal.extended_error()), opt, out);
            refusal.append_to(out, start, now);
            Err(Answered { len: out.len() - start, tsig: Some(refusal.outcome()), ..answered })
        }
    }
}

/// What the TSIG record of a request that is not a query (a DNS UPDATE,
/// which the control plane applies) says, for its reply to follow.
#[derive(Debug)]
pub enum RequestSignature<'k> {
    Unsigned,
    /// Signed rightly and in time: the reply is signed with the same key.
    Signed(SignedRequest<'k>),
    /// Refused: NOTAUTH with this TSIG error.
    Refused(RefusedRequest<'k>),
    /// The TSIG record cannot be read: FORMERR.
    Malformed,
}

/// A request signed rightly, and how its reply is signed.
#[derive(Debug)]
pub struct SignedRequest<'k>(Signing<'k>);

/// A request whose signature is refused, and the TSIG record its reply
/// carries.
#[derive(Debug)]
pub struct RefusedRequest<'k>(tsig::Refusal<'k>);

/// Checks the TSIG record at `tsig_at` (the last additional record's
/// offset, if it is a TSIG) of `packet` against `keys` at `now`.
pub fn check_request<'k>(packet: &[u8], tsig_at: Option<usize>, keys: &'k [TsigKey], now: u64) -> RequestSignature<'k> {
    let Some(tsig_at) = tsig_at.and_then(|at| u16::try_from(at).ok()) else { return RequestSignature::Unsigned };
    match tsig::check(packet, Some(tsig_at), keys, now) {
        Checked::Unsigned => RequestSignature::Unsigned,
        Checked::Signed(signing) => RequestSignature::Signed(SignedRequest(signing)),
        Checked::Refused(refusal) => RequestSignature::Refused(RefusedRequest(refusal)),
        Checked::Malformed => RequestSignature::Malformed,
    }
}

impl SignedRequest<'_> {
    /// The key's name, lowercase wire form.
    pub fn key_name(&self) -> &[u8] {
        self.0.key_name()
    }

    /// Signs `reply`, the whole vector, at `now`.
    pub fn sign(mut self, reply: &mut Vec<u8>, now: u64) {
        self.0.sign(reply, 0, now);
    }
}

impl RefusedRequest<'_> {
    /// Why, for clients that read Extended DNS Errors.
    pub fn extended_error(&self) -> ExtendedError {
        self.0.extended_error()
    }

    /// Appends the refusal's TSIG record to `reply` (a NOTAUTH), the whole
    /// vector, at `now`.
    pub fn append_to(&self, reply: &mut Vec<u8>, now: u64) {
        self.0.append_to(reply, 0, now);
    }
}
