//! What the kernel needs to answer routed names: for each service's A and
//! AAAA question whose decision depends on the client through its region
//! only ([`pharos_route::route_variants`]), every class's variants with
//! their thresholds, each reply pre-encoded by the query path's own
//! encoder ([`pharos_answer::write_decision`]); the client address
//! blocks that put clients in classes ([`pharos_route::client_blocks`]),
//! with the ECS scope of each; and the senders whose Client Subnet the
//! kernel believes.

use std::fmt;
use std::net::IpAddr;

use pharos_answer::{Snapshot, write_decision};
use pharos_route::{Family, PerQuery, Routes, Service, Variant, client_blocks, route_variants};
use pharos_wire::{MessageWriter, flags, rcode, types};

use crate::maps::{
    Answer, AnswerKey, CLASS_PREFIX_BITS, ClassData, ClassValue, Draw, DrawKey, EVERYONE, MAX_BODY, MAX_VARIANTS, ROUTED_VARIANTS,
};

/// Most client blocks per address family.
pub const MAX_BLOCKS: usize = 1 << 16;
/// Most draws per snapshot: half the map (the other half holds the
/// other generation). A routed question has a draw at least, so there
/// are no more routed questions than draws.
pub const MAX_DRAWS: usize = 32768;

/// Why a routed question passes up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotRouted {
    /// The kernel answers a service's A and AAAA questions only.
    OtherType,
    PerQuery(PerQuery),
    TooManyVariants(usize),
    TooLarge,
}

impl fmt::Display for NotRouted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotRouted::OtherType => f.write_str("the kernel answers a service's A and AAAA questions only"),
            NotRouted::PerQuery(reason) => reason.fmt(f),
            NotRouted::TooManyVariants(count) => write!(f, "{count} variants for one class, more than the kernel's {MAX_VARIANTS}"),
            NotRouted::TooLarge => f.write_str("reply larger than the kernel's 1024-octet limit"),
        }
    }
}

/// One routed question as the kernel holds it (generation 0): per class
/// (a region, or [`EVERYONE`]), the variants with their 32-bit thresholds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutedQuestion {
    pub question: AnswerKey,
    pub classes: Vec<(u32, Vec<(u32, Answer)>)>,
    /// Whether the reply's ECS scope is the client's class's.
    pub scoped: bool,
}

impl RoutedQuestion {
    pub fn variants(&self) -> usize {
        self.classes.iter().map(|(_, variants)| variants.len()).sum()
    }

    /// Whether clients must be classed to answer it: by region, or for
    /// the ECS scope of their class.
    pub fn by_region(&self) -> bool {
        self.scoped || self.classes.iter().any(|&(class, _)| class != EVERYONE)
    }
}

/// The kernel's form of `service`'s answers to `qtype` at `name`
/// (lowercase wire form), or why it passes up. Says nothing of the client
/// blocks: see [`client_classes`].
pub fn routed_question(service: &Service, name: &[u8], qtype: u16) -> Result<RoutedQuestion, NotRouted> {
    let family = match (qtype, service.redirectors_family()) {
        (types::A | types::AAAA, Some(redirectors)) => redirectors,
        (types::A, None) => Family::V4,
        (types::AAAA, None) => Family::V6,
        _ => return Err(NotRouted::OtherType),
    };
    let listed = route_variants(service, family).map_err(NotRouted::PerQuery)?;
    let question = AnswerKey::new(name, qtype, types::CLASS_IN).ok_or(NotRouted::TooLarge)?;
    let regions = listed.by_region.iter().map(|(region, variants)| (*region, variants));
    let mut classes = Vec::new();
    for (class, variants) in regions.chain([(EVERYONE, &listed.default)]) {
        if variants.len() > MAX_VARIANTS {
            return Err(NotRouted::TooManyVariants(variants.len()));
        }
        let encoded = variants.iter().map(|variant| Some(((variant.threshold >> 32) as u32, encode(service, &question, variant)?)));
        classes.push((class, encoded.collect::<Option<Vec<_>>>().ok_or(NotRouted::TooLarge)?));
    }
    Ok(RoutedQuestion { question, classes, scoped: listed.scoped })
}

/// The reply body of `variant` to `question`, by the query path's encoder.
fn encode(service: &Service, question: &AnswerKey, variant: &Variant) -> Option<Answer> {
    let name_len = question.name.iter().position(|&octet| octet == 0)? + 1;
    let mut message = Vec::new();
    let mut writer = MessageWriter::new(&mut message);
    writer.question(&[&question.name[..name_len], &question.qtype, &question.qclass].concat());
    let body_start = writer.len();
    let fitted = write_decision(&mut writer, service, &variant.replicas, variant.ttl, MAX_BODY)?;
    Answer::new(flags::AA | rcode::NOERROR, fitted.counts, &message[body_start..])
}

/// A `classes` trie entry: prefix length, key data, region and scope.
pub type ClassEntry = (u32, ClassData, ClassValue);

/// The `classes` trie's entries (generation 0): every client address
/// block of both families with its region and scope; or why they cannot
/// be listed.
pub fn client_classes(routes: &Routes) -> Result<Vec<ClassEntry>, PerQuery> {
    let mut entries = Vec::new();
    for family in [Family::V4, Family::V6] {
        for block in client_blocks(routes, family, MAX_BLOCKS)? {
            let class = ClassValue { region: block.region, scope: u32::from(block.scope) };
            entries.push((CLASS_PREFIX_BITS + u32::from(block.length), class_data(block.network), class));
        }
    }
    Ok(entries)
}

/// An address as the `classes` and `trusted` tries key it, in generation 0.
fn class_data(network: IpAddr) -> ClassData {
    let mut data: ClassData = [0; 20];
    match network {
        IpAddr::V4(v4) => data[2..6].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => {
            data[1] = 1;
            data[2..18].copy_from_slice(&v6.octets());
        }
    }
    data
}

/// The senders whose Client Subnet is believed, as `trusted` trie keys
/// (prefix length, data) in generation 0; `None` when all are.
pub fn trusted_senders(snapshot: &Snapshot) -> Option<Vec<(u32, ClassData)>> {
    let senders = snapshot.settings.trusted_subnet_senders.as_ref()?;
    let prefixes: Vec<(IpAddr, u8)> = senders.prefixes().into_iter().map(|(network, length, ())| (network, length)).collect();
    Some(prefix_keys(&prefixes))
}

/// Address prefixes (network, length) as keys of a trie keyed as
/// `classes` is, in generation 0.
pub fn prefix_keys(prefixes: &[(IpAddr, u8)]) -> Vec<(u32, ClassData)> {
    prefixes.iter().map(|&(network, length)| (CLASS_PREFIX_BITS + u32::from(length), class_data(network))).collect()
}

/// Everything routed the kernel answers from a snapshot, in generation 0.
#[derive(Debug, Default)]
pub struct RoutedFill {
    /// The questions, each marked routed in the `answers` map.
    pub questions: Vec<AnswerKey>,
    pub draws: Vec<(DrawKey, Draw)>,
    /// By id, from 0.
    pub variants: Vec<(u32, Answer)>,
    pub classes: Vec<ClassEntry>,
    /// Routed questions left out for want of room in the maps.
    pub left_out: usize,
}

/// Every routed question of `snapshot` the kernel can answer, services
/// in name order, variants numbered in that order.
pub fn fill_routed(snapshot: &Snapshot) -> RoutedFill {
    let routes = &snapshot.routes;
    let mut services: Vec<(&[u8], &Service)> = routes.services.iter().map(|(name, service)| (&name[..], &**service)).collect();
    services.sort_by_key(|(name, _)| *name);
    let mut fill = RoutedFill::default();
    // Computed once, when a question first needs regions.
    let mut classes: Option<Result<Vec<ClassEntry>, PerQuery>> = None;
    for (name, service) in services {
        for qtype in [types::A, types::AAAA] {
            let Ok(routed) = routed_question(service, name, qtype) else { continue };
            if routed.by_region() && classes.get_or_insert_with(|| client_classes(routes)).is_err() {
                continue;
            }
            if fill.draws.len() + routed.classes.len() > MAX_DRAWS || fill.variants.len() + routed.variants() > ROUTED_VARIANTS {
                fill.left_out += 1;
                continue;
            }
            fill.add(routed);
        }
    }
    if fill.draws.iter().any(|(key, draw)| key.region != EVERYONE || draw.scoped == 1) {
        fill.classes = classes.and_then(Result::ok).unwrap_or_default();
    }
    fill
}

impl RoutedFill {
    fn add(&mut self, routed: RoutedQuestion) {
        self.questions.push(routed.question);
        let question = routed.question.in_generation(0);
        for (class, variants) in routed.classes {
            let scoped = u32::from(routed.scoped);
            let mut draw = Draw { count: variants.len() as u32, scoped, thresholds: [0; MAX_VARIANTS], variants: [0; MAX_VARIANTS] };
            for (slot, (threshold, answer)) in variants.into_iter().enumerate() {
                let id = self.variants.len() as u32;
                self.variants.push((id, answer));
                draw.thresholds[slot] = threshold;
                draw.variants[slot] = id;
            }
            self.draws.push((DrawKey { question, region: class }, draw));
        }
    }
}
