//! DNS UPDATE (RFC 2136, RFC 3007) applied to the zones the store keeps:
//! the transports hand each UPDATE here (`pharos_transport::updates`);
//! its TSIG is checked with the keys of the snapshot served, the policy
//! of `[[store_zones.update]]` asked, and the update applied as an edit
//! of the control plane, against the state as it stands when the edit
//! runs, so that an update and any other change never interleave. The
//! reply leaves once the zone's new version is committed to the store and
//! served (or once the update is refused, nothing changed).
//!
//! A zone from a file is not changed by UPDATE (REFUSED, saying so), nor
//! a secondary zone (REFUSED: its primary takes updates), nor a name that
//! is a service (REFUSED: the control API changes those). The rules are
//! the configuration's at start: a reload does not change them.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use domain::base::iana::Rtype;
use pharos_answer::{RequestSignature, Snapshot, check_request};
use pharos_control::zones;
use pharos_model::spec::service_name;
use pharos_model::{Change, ControlError, State};
use pharos_transport::updates::{Reply, UpdateRequest, Updates};
use pharos_update::{Policy, Refusal, RuleConfig, Update, apply, parse, response};
use pharos_wire::{name, rcode, types};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::runtime::Handle;

use crate::config::Config;
use crate::data::unix_millis;
use crate::driver::thread::ControlThread;

/// RFC 8914 section 4.24 (Invalid Data) is for answers; a store that
/// cannot be written is "Other" with the reason.
const EDE_OTHER: u16 = 0;

/// The types a signer makes (RFC 4034, RFC 5155): never written by
/// UPDATE.
const SIGNERS_TYPES: [u16; 4] = [types::RRSIG, types::NSEC, types::NSEC3, types::NSEC3PARAM];

/// How many times in all an update is tried while other nodes of a fleet
/// keep changing the state first (each try is itself tried a few times by
/// the control plane, `pharos_control::retry`), each after a random pause
/// of `BEHIND_PAUSE_MS`, so that nodes writing at once fall out of step.
const BEHIND_TRIES: u32 = 6;
const BEHIND_PAUSE_MS: std::ops::Range<u64> = 5..60;

/// Applies the UPDATEs the transports hand over, on `runtime`.
#[derive(Clone)]
pub struct UpdateApplier {
    control: ControlThread,
    runtime: Handle,
    rules: Arc<[RuleConfig]>,
    /// The origins (wire form) of the zones this node is a secondary of.
    secondaries: Arc<[Box<[u8]>]>,
}

impl UpdateApplier {
    /// The applier of `config`'s `[[store_zones.update]]` rules.
    pub fn new(control: ControlThread, runtime: Handle, config: &Config) -> UpdateApplier {
        let secondaries = config.all_zones().filter(|zone| !zone.primaries.is_empty());
        let secondaries = secondaries.filter_map(|zone| name::from_dotted(&zone.origin).ok()).map(Box::from).collect();
        UpdateApplier { control, runtime, rules: config.store_zones.update.as_slice().into(), secondaries }
    }
}

impl std::fmt::Debug for UpdateApplier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpdateApplier").field("rules", &self.rules).finish_non_exhaustive()
    }
}

impl Updates for UpdateApplier {
    fn submit(&self, request: UpdateRequest, reply: Reply) {
        let applier = self.clone();
        self.runtime.spawn(async move {
            if let Some(bytes) = applier.answer(&request).await {
                reply(bytes);
            }
        });
    }
}

impl UpdateApplier {
    /// The reply to `request`: its TSIG checked, then the update applied
    /// or refused; signed as the request was. `None` for a message that
    /// gets no reply (one that is itself a response).
    async fn answer(&self, request: &UpdateRequest) -> Option<Vec<u8>> {
        let message = &request.message;
        let update = match parse(message) {
            Ok(update) => update,
            Err(malformed) => return refusal_reply(message, &Refusal::malformed(&malformed)),
        };
        let now = unix_millis() / 1000;
        let snapshot = self.control.snapshot().load();
        match check_request(message, update.tsig_at, &snapshot.settings.tsig_keys, now) {
            RequestSignature::Unsigned => outcome_reply(message, &self.outcome(request, &update, None, &snapshot).await),
            RequestSignature::Signed(signed) => {
                let key = name::Display(signed.key_name()).to_string().trim_end_matches('.').to_owned();
                let outcome = self.outcome(request, &update, Some(&key), &snapshot).await;
                let mut reply = outcome_reply(message, &outcome)?;
                signed.sign(&mut reply, now);
                Some(reply)
            }
            RequestSignature::Refused(refused) => {
                let extended = refused.extended_error();
                let mut reply = response(message, rcode::NOTAUTH, Some((extended.info_code, extended.extra_text)))?;
                refused.append_to(&mut reply, now);
                Some(reply)
            }
            RequestSignature::Malformed => refusal_reply(message, &Refusal::new(rcode::FORMERR, "TSIG record malformed")),
        }
    }

    /// Applies `update` from `request`'s client, signed with `key`:
    /// `Ok` once committed and served, or the refusal.
    async fn outcome(&self, request: &UpdateRequest, update: &Update, key: Option<&str>, served: &Snapshot) -> Result<(), Refusal> {
        self.permitted(&self.control.state(), served, update, key, request.client.ip())?;
        let author = match key {
            Some(key) => format!("UPDATE signed with key {key} from {}", request.client.ip()),
            None => format!("UPDATE from {}", request.client.ip()),
        };
        for _ in 1..BEHIND_TRIES {
            match self.commit(&author, update).await {
                Err(Committed::Failed(ControlError::Behind { .. })) => {
                    let pause = SmallRng::from_os_rng().random_range(BEHIND_PAUSE_MS);
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                }
                outcome => return outcome.map_err(Committed::into_refusal),
            }
        }
        self.commit(&author, update).await.map_err(Committed::into_refusal)
    }

    /// One try at applying `update` as an edit of the control plane.
    async fn commit(&self, author: &str, update: &Update) -> Result<(), Committed> {
        let refused: Arc<Mutex<Option<Refusal>>> = Arc::default();
        let (update, kept) = (update.clone(), refused.clone());
        let edit = move |state: &State| {
            apply_to_state(state, &update).map_err(|refusal| {
                let error = ControlError::invalid("update", refusal.reason.clone());
                *kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(refusal);
                error
            })
        };
        let committed = self.control.edit(author.to_owned(), Box::new(edit)).await;
        let refusal = refused.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
        match (committed, refusal) {
            (Ok(_), _) => Ok(()),
            (Err(_), Some(refusal)) => Err(Committed::Refused(refusal)),
            (Err(error), None) => Err(Committed::Failed(error)),
        }
    }

    /// Refuses an update to a zone the store does not keep, or that the
    /// zone's rules do not allow `key` from `source`.
    fn permitted(&self, state: &State, served: &Snapshot, update: &Update, key: Option<&str>, source: IpAddr) -> Result<(), Refusal> {
        let zone = name::Display(&update.zone).to_string();
        if state.zone(&zone).is_none() {
            let served = served.zones.zone_for(&update.zone).is_some_and(|zone| *zone.origin == *update.zone);
            // RFC 2136 section 6 lets a secondary forward an update to its
            // primary; Pharos refuses it, naming where it should go, as
            // Knot DNS does unless told to forward.
            return Err(match (served, self.secondaries.contains(&update.zone)) {
                (true, true) => Refusal::refused(format!("zone {zone} is a secondary here: send the update to its primary")),
                (true, false) => Refusal::refused(format!("zone {zone} is served from a file; UPDATE changes the zones the store keeps")),
                (false, _) => Refusal::not_authoritative(&update.zone),
            });
        }
        // A change outside the zone is NOTZONE whoever asks (RFC 2136
        // section 3.4.1.3), as Knot DNS answers it: no rule could cover
        // it, and the answer says nothing of the zone.
        if update.changes.iter().any(|change| !name::is_at_or_below(change.owner(), &update.zone)) {
            return Ok(());
        }
        let rules: Vec<RuleConfig> = self.rules.iter().filter(|rule| covers_in(rule, &update.zone)).cloned().collect();
        let policy = Policy::new(&update.zone, &rules).map_err(|error| Refusal::refused(error.to_string()))?;
        policy.check(key, source, update)
    }
}

/// The changes `update` makes to the store zone it names in `state`.
fn apply_to_state(state: &State, update: &Update) -> Result<Vec<Change>, Refusal> {
    let zone = name::Display(&update.zone).to_string();
    let spec = state.zone(&zone).ok_or_else(|| Refusal::not_authoritative(&update.zone))?;
    let records = zones::records(spec).map_err(|error| Refusal::new(rcode::SERVFAIL, error.to_string()))?;
    let services: Vec<Box<[u8]>> = state.services.iter().filter_map(|service| service_name(&service.name).ok()).collect();
    let guard = |owner: &[u8], rtype: u16| {
        if services.iter().any(|service| **service == *owner) {
            return Err(Refusal::refused(format!("{} is a service: change it through the control API", name::Display(owner))));
        }
        if SIGNERS_TYPES.contains(&rtype) {
            return Err(Refusal::refused(format!("{} records are made by a signer, not by UPDATE", Rtype::from_int(rtype))));
        }
        Ok(())
    };
    let applied = apply(&update.zone, &records, update, guard)?;
    if !applied.changed {
        return Ok(Vec::new());
    }
    zones::put_changed(spec, &records, applied.records).map(|change| vec![change]).map_err(|error| Refusal::refused(error.to_string()))
}

/// Whether `rule` is one of the zone at `origin`'s: the name it covers is
/// inside the zone.
fn covers_in(rule: &RuleConfig, origin: &[u8]) -> bool {
    let named = rule.name.as_ref().or(rule.below.as_ref()).or(rule.at_or_below.as_ref());
    named.and_then(|text| name::from_dotted(text).ok()).is_some_and(|wire| name::is_at_or_below(&wire, origin))
}

/// Why a try at an update failed.
enum Committed {
    /// The update itself: a prerequisite, a rule of RFC 2136.
    Refused(Refusal),
    /// The commit: the zone it made does not read as a zone, the store
    /// cannot be written, or other nodes kept changing the state first.
    Failed(ControlError),
}

impl Committed {
    /// The reply's refusal: the update's own, REFUSED for a zone that
    /// would not read, else SERVFAIL saying why.
    fn into_refusal(self) -> Refusal {
        match self {
            Committed::Refused(refusal) => refusal,
            Committed::Failed(error @ (ControlError::Invalid { .. } | ControlError::Conflict { .. })) => {
                Refusal::refused(error.to_string())
            }
            Committed::Failed(error) => Refusal { rcode: rcode::SERVFAIL, extended_error: Some(EDE_OTHER), reason: error.to_string() },
        }
    }
}

fn outcome_reply(message: &[u8], outcome: &Result<(), Refusal>) -> Option<Vec<u8>> {
    match outcome {
        Ok(()) => response(message, rcode::NOERROR, None),
        Err(refusal) => refusal_reply(message, refusal),
    }
}

fn refusal_reply(message: &[u8], refusal: &Refusal) -> Option<Vec<u8>> {
    response(message, refusal.rcode, refusal.extended())
}
