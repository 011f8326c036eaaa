//! Who may change what in a zone by UPDATE (RFC 3007 section 3: an update
//! is authorised by its signature and by local policy), in the spirit of
//! BIND's `update-policy` and Knot DNS's ACL with `update-owner`. See the
//! crate's documentation for the configuration.

use std::net::IpAddr;

use domain::base::iana::Rtype;
use pharos_route::prefix::{ListedPrefixError, PrefixMap, prefix_set};
use pharos_wire::name::{self, Display, is_at_or_below};
use pharos_wire::types;
use serde::Deserialize;

use crate::apply::Refusal;
use crate::message::Update;

/// The label that names the TXT records of an ACME DNS-01 challenge
/// (RFC 8555 section 8.4).
const ACME_LABEL: &[u8] = b"\x0f_acme-challenge";

/// One rule as a configuration writes it (a `[[zone.update]]` table).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// The TSIG key that must sign the update: a key's name, or "*" for
    /// any key the server verified. Absent: the rule is for unsigned
    /// updates, and `from` must say where they may come from.
    pub key: Option<String>,
    /// Source prefixes (CIDR) the update may come from; empty: any.
    #[serde(default)]
    pub from: Vec<String>,
    /// The names the rule covers: exactly this one...
    pub name: Option<String>,
    /// ...or every name strictly below this one...
    pub below: Option<String>,
    /// ...or this one and every name below it.
    pub at_or_below: Option<String>,
    /// Only the TXT records at `_acme-challenge.NAME` for each NAME
    /// covered, as an ACME DNS-01 solver needs.
    #[serde(default)]
    pub acme_only: bool,
    /// The types that may be changed (e.g. "TXT", "TYPE65534"); empty:
    /// all. A deletion of every RRset of a name needs all.
    #[serde(default)]
    pub types: Vec<String>,
}

/// A rule that cannot be used, with its place in the list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("update rule {index}: {why}")]
pub struct PolicyError {
    /// From 0, in the order given.
    pub index: usize,
    pub why: RuleError,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("give exactly one of name, below and at_or_below")]
    Names,
    #[error("{0:?} is not a domain name")]
    BadName(String),
    #[error("{name} is not in the zone {zone}")]
    Outside { name: String, zone: String },
    #[error("a rule without a key is for unsigned updates and must list the prefixes they may come `from`")]
    UnsignedFromAnywhere,
    #[error("an empty key name (use \"*\" for any key)")]
    EmptyKey,
    #[error("{0:?} is not a record type")]
    BadType(String),
    #[error("{0} is a meta type, which no record has")]
    MetaType(String),
    #[error("acme_only allows TXT records alone, not {0}")]
    AcmeType(String),
    #[error(transparent)]
    Prefix(#[from] ListedPrefixError),
}

/// Whose updates a rule is for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Signer {
    /// Signed with this key (lowercase, no trailing dot).
    Key(String),
    AnyKey,
    Unsigned,
}

/// Which names a rule covers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Names {
    Exactly(Vec<u8>),
    Below(Vec<u8>),
    AtOrBelow(Vec<u8>),
}

#[derive(Debug, Clone)]
struct Rule {
    signer: Signer,
    /// `None`: from anywhere.
    from: Option<PrefixMap<()>>,
    names: Names,
    acme_only: bool,
    /// Empty: every type.
    types: Vec<u16>,
}

/// A zone's update rules, ready to be asked. No rules: no updates.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    rules: Vec<Rule>,
}

impl Policy {
    /// The rules for the zone at `origin` (lowercase wire form), checked.
    pub fn new(origin: &[u8], rules: &[RuleConfig]) -> Result<Policy, PolicyError> {
        let rules = rules.iter().enumerate().map(|(index, rule)| Rule::new(origin, rule).map_err(|why| PolicyError { index, why }));
        Ok(Policy { rules: rules.collect::<Result<_, _>>()? })
    }

    /// Whether an update signed with `key` (its name, if signed and
    /// verified) from `source` may change the `rtype` records at `owner`
    /// (ANY: every RRset of the name); REFUSED saying which rule is
    /// missing if not.
    pub fn permits(&self, key: Option<&str>, source: IpAddr, owner: &[u8], rtype: u16) -> Result<(), Refusal> {
        let source = source.to_canonical();
        let key = key.map(normal_key);
        let signer = match &key {
            Some(key) => format!("key {key}"),
            None => "an unsigned update".to_string(),
        };
        let for_signer: Vec<&Rule> = self.rules.iter().filter(|rule| rule.signed_by(key.as_deref())).collect();
        if for_signer.is_empty() {
            return Err(Refusal::refused(format!("no update rule of this zone is for {signer}")));
        }
        let from_source: Vec<&Rule> = for_signer.into_iter().filter(|rule| rule.comes_from(source)).collect();
        if from_source.is_empty() {
            return Err(Refusal::refused(format!("no update rule lets {signer} come from {source}")));
        }
        let covering: Vec<&Rule> = from_source.into_iter().filter(|rule| rule.covers(owner)).collect();
        if covering.is_empty() {
            return Err(Refusal::refused(format!("no update rule lets {signer} from {source} change {}", Display(owner))));
        }
        if covering.iter().any(|rule| rule.allows_type(rtype)) {
            return Ok(());
        }
        let what = if rtype == types::ANY { "every RRset".to_string() } else { format!("the {} records", Rtype::from_int(rtype)) };
        Err(Refusal::refused(format!("no update rule lets {signer} from {source} change {what} at {}", Display(owner))))
    }

    /// [`Policy::permits`] for every change of `update`, in order; the
    /// first refusal is the update's.
    pub fn check(&self, key: Option<&str>, source: IpAddr, update: &Update) -> Result<(), Refusal> {
        update.changes.iter().try_for_each(|change| self.permits(key, source, change.owner(), change.rtype()))
    }
}

/// A key name as compared: lowercase, without the trailing dot.
fn normal_key(key: &str) -> String {
    key.trim_end_matches('.').to_ascii_lowercase()
}

impl Rule {
    fn new(origin: &[u8], config: &RuleConfig) -> Result<Rule, RuleError> {
        let signer = match config.key.as_deref() {
            None if config.from.is_empty() => return Err(RuleError::UnsignedFromAnywhere),
            None => Signer::Unsigned,
            Some("*") => Signer::AnyKey,
            Some(key) if normal_key(key).is_empty() => return Err(RuleError::EmptyKey),
            Some(key) => Signer::Key(normal_key(key)),
        };
        let from = (!config.from.is_empty()).then(|| prefix_set("from", &config.from)).transpose()?;
        let names = match (&config.name, &config.below, &config.at_or_below) {
            (Some(exactly), None, None) => Names::Exactly(zone_name(origin, exactly)?),
            (None, Some(below), None) => Names::Below(zone_name(origin, below)?),
            (None, None, Some(at_or_below)) => Names::AtOrBelow(zone_name(origin, at_or_below)?),
            _ => return Err(RuleError::Names),
        };
        let types = config.types.iter().map(|text| record_type(text, config.acme_only)).collect::<Result<_, _>>()?;
        Ok(Rule { signer, from, names, acme_only: config.acme_only, types })
    }

    fn signed_by(&self, key: Option<&str>) -> bool {
        match (&self.signer, key) {
            (Signer::Key(name), Some(key)) => name == key,
            (Signer::AnyKey, Some(_)) | (Signer::Unsigned, None) => true,
            _ => false,
        }
    }

    fn comes_from(&self, source: IpAddr) -> bool {
        self.from.as_ref().is_none_or(|prefixes| prefixes.lookup(source).value.is_some())
    }

    /// `owner` is one of the rule's names, or under `acme_only` the
    /// `_acme-challenge` name of one.
    fn covers(&self, owner: &[u8]) -> bool {
        let covered = if self.acme_only {
            match owner.strip_prefix(ACME_LABEL) {
                Some(named) => named,
                None => return false,
            }
        } else {
            owner
        };
        match &self.names {
            Names::Exactly(name) => covered == &name[..],
            Names::Below(name) => covered != &name[..] && is_at_or_below(covered, name),
            Names::AtOrBelow(name) => is_at_or_below(covered, name),
        }
    }

    fn allows_type(&self, rtype: u16) -> bool {
        if self.acme_only {
            return rtype == types::TXT;
        }
        self.types.is_empty() || self.types.contains(&rtype)
    }
}

/// A configured name, which must be in the zone.
fn zone_name(origin: &[u8], text: &str) -> Result<Vec<u8>, RuleError> {
    let wire = name::from_dotted(text).map_err(|_| RuleError::BadName(text.into()))?;
    if !is_at_or_below(&wire, origin) {
        return Err(RuleError::Outside { name: text.into(), zone: Display(origin).to_string() });
    }
    Ok(wire)
}

fn record_type(text: &str, acme_only: bool) -> Result<u16, RuleError> {
    let rtype = text.parse::<Rtype>().map_err(|_| RuleError::BadType(text.into()))?.to_int();
    if types::is_meta(rtype) {
        return Err(RuleError::MetaType(text.into()));
    }
    if acme_only && rtype != types::TXT {
        return Err(RuleError::AcmeType(text.into()));
    }
    Ok(rtype)
}
