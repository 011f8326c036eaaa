//! The decision: which replicas answer a located client, in what order,
//! for how long, and for how much of the address space (ECS scope).

use rand::Rng;

use crate::RegionId;
use crate::explain::Explanation;
use crate::locate::{Asker, Location, Unpartitioned};
use crate::model::Service;
use crate::policy::{Order, Policy, choose, describe_prepared};
use crate::prepared::PreparedOrders;
use crate::proximity::Proximity;
use crate::replica::Family;

/// The answer to "which replicas for this client?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Indexes into the service's replicas, in answer order, capped.
    pub replicas: Order,
    pub ttl: u32,
    /// Leading client-address bits the decision depended on: 0 when the
    /// policy ignores who asks.
    pub scope: u8,
}

/// Decides the answer of `service` for a client at `location` asking for
/// `family` addresses. Replicas that are disabled or down are left out;
/// if that leaves none, every enabled one is answered (fail open) rather
/// than nothing. An explanation, when asked for, notes each step of the
/// very branch the query path takes: prepared orders where the service
/// has them, the policy's own draw elsewhere.
pub fn decide(
    service: &Service,
    family: Family,
    location: &Location,
    proximity: &Proximity,
    rng: &mut impl Rng,
    mut explanation: Option<&mut Explanation>,
) -> Decision {
    let candidates = service.candidates(family);
    if let Some(explanation) = explanation.as_deref_mut() {
        note_candidates(service, family, explanation);
    }
    let decision = match service.prepared(family).for_region(location.region) {
        Some(orders) => {
            if let Some(explanation) = explanation.as_deref_mut() {
                describe_prepared(&service.policy, &service.replicas, &candidates.indexes, location, explanation);
                explanation.note(format!("order drawn from the {} orders prepared for this row", orders.len()));
            }
            decide_prepared(service, orders.draw(rng), location)
        }
        None => decide_by_policy(service, &candidates.indexes, location, proximity, rng, explanation.as_deref_mut()),
    };
    if let Some(explanation) = explanation {
        note_answer(service, &decision, explanation);
    }
    decision
}

/// The policy draws the order itself: for policies whose orders depend on
/// more than the client's region, or are too many to enumerate.
fn decide_by_policy(
    service: &Service,
    candidates: &[usize],
    location: &Location,
    proximity: &Proximity,
    rng: &mut impl Rng,
    explanation: Option<&mut Explanation>,
) -> Decision {
    let choice = choose(&service.policy, &service.replicas, candidates, location, proximity, rng, explanation);
    decide_by_order(service, choice.order, choice.ttl, choice.scope)
}

/// The decision for a policy's `order`: cut to the service's cap, with the
/// policy's TTL or else the service's, capped.
fn decide_by_order(service: &Service, mut replicas: Order, ttl: Option<u32>, scope: u8) -> Decision {
    if service.max_answers > 0 {
        replicas.truncate(service.max_answers);
    }
    Decision { replicas, ttl: capped(service, ttl.unwrap_or(service.ttl)), scope }
}

/// Notes who the policy chooses among, who is left out and why, and the policy.
fn note_candidates(service: &Service, family: Family, explanation: &mut Explanation) {
    let candidates = service.candidates(family);
    let ids: Vec<&str> = candidates.indexes.iter().map(|&index| service.replicas[index].id.as_str()).collect();
    explanation.note(match (candidates.failing_open, ids.is_empty()) {
        (true, _) => format!("no {family:?} replica is serving: failing open to all enabled ({})", ids.join(", ")),
        (false, true) => format!("no {family:?} replica is serving, and the service answers none then (NODATA)"),
        (false, false) => format!("{family:?} replicas serving: {}", ids.join(", ")),
    });
    note_left_out(service, family, explanation);
    explanation.note(format!("policy: {}", service.policy.name()));
}

/// Notes the TTL cap, if any, and the answer.
fn note_answer(service: &Service, decision: &Decision, explanation: &mut Explanation) {
    if let Some(cap) = service.ttl_cap {
        explanation.note(format!("TTL capped at {cap} s: probes could change a replica's state that soon"));
    }
    let ids: Vec<&str> = decision.replicas.iter().map(|&index| service.replicas[index].id.as_str()).collect();
    explanation.note(format!("answer: [{}], TTL {}, ECS scope /{}", ids.join(", "), decision.ttl, decision.scope));
}

/// Notes the replicas of `family` left out, and why (explanations only:
/// the query path never lists them).
fn note_left_out(service: &Service, family: Family, explanation: &mut Explanation) {
    let of_family = service.replicas.iter().filter(|replica| family.holds(replica.address));
    let left_out: Vec<String> = of_family
        .filter(|replica| !replica.is_serving())
        .map(|replica| match (&replica.down_because, replica.enabled) {
            (_, false) => format!("{} (disabled)", replica.id),
            (Some(reason), true) => format!("{} ({reason})", replica.id),
            (None, true) => format!("{} (down)", replica.id),
        })
        .collect();
    if !left_out.is_empty() {
        explanation.note(format!("not serving: {}", left_out.join("; ")));
    }
}

/// `ttl`, no longer than the service's cap.
fn capped(service: &Service, ttl: u32) -> u32 {
    service.ttl_cap.map_or(ttl, |cap| ttl.min(cap))
}

/// One answer a decision may give a class of clients: replicas and TTL,
/// with the cumulative probability, as a fraction of 2^64, of this
/// variant and those listed before it (the last is `u64::MAX`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    pub replicas: Order,
    pub ttl: u32,
    pub threshold: u64,
}

/// Every decision [`decide`] can give, for a service whose decision
/// depends on the client through its region only, or not at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variants {
    /// Regions with their own distribution.
    pub by_region: Vec<(RegionId, Vec<Variant>)>,
    /// Everyone else's.
    pub default: Vec<Variant>,
    /// Whether a decision's ECS scope is the scope that placed the client
    /// (else 0: the answer is the same for every client).
    pub scoped: bool,
}

/// Why [`decide`]'s answers for a service cannot be listed in advance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PerQuery {
    /// Round robin moves on with every answer.
    KeepsState,
    /// The policy looks at more of the client than its region.
    ClientData(&'static str),
    /// More orders than are worth enumerating.
    TooManyOrders,
    /// No replica to answer: the zone's answer for the name applies.
    NoReplica,
    /// Regions come from a source that cannot be enumerated.
    ExternalRegions,
    /// The regions cut the address space into more blocks than allowed.
    TooManyBlocks(usize),
}

impl From<Unpartitioned> for PerQuery {
    fn from(why: Unpartitioned) -> PerQuery {
        match why {
            Unpartitioned::External => PerQuery::ExternalRegions,
            Unpartitioned::TooManyBlocks(limit) => PerQuery::TooManyBlocks(limit),
        }
    }
}

impl std::fmt::Display for PerQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PerQuery::KeepsState => f.write_str("round robin keeps state"),
            PerQuery::ClientData(policy) => write!(f, "policy {policy} decides per query"),
            PerQuery::TooManyOrders => f.write_str("the policy has too many answer orders to enumerate"),
            PerQuery::NoReplica => f.write_str("no replica to answer: the zone's answer for the name applies"),
            PerQuery::ExternalRegions => f.write_str("regions come from the external classifier, which cannot be enumerated"),
            PerQuery::TooManyBlocks(limit) => write!(f, "the regions cut the address space into more than {limit} blocks"),
        }
    }
}

/// Every decision of `service` for `family`, with its probability, exactly
/// as [`decide`] draws them, where the decision depends on the client
/// through its region only (or not at all); else why not.
pub fn variants(service: &Service, family: Family) -> Result<Variants, PerQuery> {
    let candidates = &service.candidates(family).indexes;
    if candidates.is_empty() {
        return Err(PerQuery::NoReplica);
    }
    // The decisions of `orders` for a client in `region` (the scope aside).
    let listed = |orders: PreparedOrders, region| {
        let anywhere = Location { region, scope: 0, client: Asker::from_source(std::net::Ipv4Addr::UNSPECIFIED.into()) };
        orders
            .thresholds()
            .map(|(order, threshold)| {
                let decision = decide_prepared(service, order, &anywhere);
                Variant { replicas: decision.replicas, ttl: decision.ttl, threshold }
            })
            .collect::<Vec<_>>()
    };
    let prepared = service.prepared(family);
    let (by_region, default) = match &service.policy {
        Policy::RoundRobin { .. } => return Err(PerQuery::KeepsState),
        Policy::LowestLatency { .. } | Policy::ShortestAsPath { .. } | Policy::Nearest { .. } => {
            return Err(PerQuery::ClientData(service.policy.name()));
        }
        Policy::Static => {
            let decision = decide_by_order(service, Order::from_slice(candidates), None, 0);
            (Vec::new(), vec![Variant { replicas: decision.replicas, ttl: decision.ttl, threshold: u64::MAX }])
        }
        Policy::Failover => {
            let orders = failover_orders(service, candidates).ok_or(PerQuery::TooManyOrders)?;
            let default = orders
                .thresholds()
                .map(|(order, threshold)| {
                    let decision = decide_by_order(service, order.clone(), None, 0);
                    Variant { replicas: decision.replicas, ttl: decision.ttl, threshold }
                })
                .collect();
            (Vec::new(), default)
        }
        Policy::Weighted => {
            let orders = prepared.for_region(crate::UNCLASSIFIED).ok_or(PerQuery::TooManyOrders)?;
            (Vec::new(), listed(orders.clone(), crate::UNCLASSIFIED))
        }
        Policy::RegionProbabilities(table) => {
            let mut by_region = Vec::new();
            for &region in table.regions.keys() {
                let orders = prepared.for_region(region).ok_or(PerQuery::TooManyOrders)?;
                by_region.push((region, listed(orders.clone(), region)));
            }
            by_region.sort_by_key(|(region, _)| *region);
            // Any region without a row of its own gets the default row.
            let unlisted = (0..).find(|region| !table.regions.contains_key(region)).expect("fewer regions than ids");
            let orders = prepared.for_region(unlisted).ok_or(PerQuery::TooManyOrders)?;
            (by_region, listed(orders.clone(), unlisted))
        }
    };
    Ok(Variants { by_region, default, scoped: scoped(&service.policy) })
}

/// Failover's orders: each priority's weighted orders, lowest first, chained.
fn failover_orders(service: &Service, candidates: &[usize]) -> Option<PreparedOrders> {
    let replicas = &service.replicas;
    let mut priorities: Vec<u32> = candidates.iter().map(|&index| replicas[index].priority).collect();
    priorities.sort_unstable();
    priorities.dedup();
    let tiers = priorities.iter().map(|&priority| {
        let tier: Vec<(usize, f64)> = candidates
            .iter()
            .filter(|&&index| replicas[index].priority == priority)
            .map(|&index| (index, replicas[index].weight as f64))
            .collect();
        PreparedOrders::build(&tier, 0)
    });
    PreparedOrders::chained(&tiers.collect::<Option<Vec<_>>>()?, service.max_answers)
}

/// The query path's shortcut: an order drawn from the prepared
/// distribution (the same distribution the steps above draw from).
fn decide_prepared(service: &Service, order: &Order, location: &Location) -> Decision {
    let ttl = match &service.policy {
        Policy::RegionProbabilities(table) => {
            let rows = table.regions.get(&location.region).unwrap_or(&table.default);
            order.first().and_then(|&first| rows.get(first)).map_or(service.ttl, |row| row.ttl)
        }
        _ => service.ttl,
    };
    let ttl = capped(service, ttl);
    // Prepared orders depend on the client through its region only.
    let scope = if scoped(&service.policy) { location.scope } else { 0 };
    Decision { replicas: order.clone(), ttl, scope }
}

/// Whether a prepared decision of `policy` depends on where the client
/// was placed, so that its ECS scope is the placement's.
fn scoped(policy: &Policy) -> bool {
    matches!(policy, Policy::RegionProbabilities(_))
}

#[cfg(test)]
mod tests {

    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    use super::*;
    use crate::model::{AllDown, Answering};
    use crate::policy::{ProbabilityTable, RegionRow};
    use crate::replica::{Health, Replica};

    fn replica(id: &str, address: &str) -> Replica {
        Replica::new(id, address.parse().unwrap())
    }

    fn service_with(policy: Policy, max_answers: usize, edit: impl FnOnce(&mut Vec<Replica>)) -> Service {
        let mut replicas =
            vec![replica("a", "192.0.2.1"), replica("b", "192.0.2.2"), replica("c", "2001:db8::3"), replica("d", "192.0.2.4")];
        edit(&mut replicas);
        Service::new("www.example.test.".into(), replicas, policy, crate::model::Answering::plain(300, max_answers))
    }

    fn service(policy: Policy) -> Service {
        service_with(policy, 0, |_| {})
    }

    fn here() -> Location {
        crate::locate::located(1)
    }

    #[test]
    fn answers_only_the_asked_family_and_only_serving_replicas() {
        let service = service_with(Policy::Static, 0, |replicas| {
            replicas[1].health = Health::Down;
            replicas[3].enabled = false;
        });
        let mut rng = SmallRng::seed_from_u64(0);
        assert_eq!(
            decide(&service, Family::V4, &here(), &Proximity::default(), &mut rng, None),
            Decision { replicas: Order::from_slice(&[0]), ttl: 300, scope: 0 }
        );
        assert_eq!(decide(&service, Family::V6, &here(), &Proximity::default(), &mut rng, None).replicas[..], [2]);
    }

    #[test]
    fn fails_open_to_enabled_replicas_when_none_is_up() {
        let service = service_with(Policy::Static, 0, |replicas| {
            for replica in replicas.iter_mut() {
                replica.health = Health::Down;
            }
            replicas[3].enabled = false;
        });
        let mut explanation = Explanation::default();
        let decision =
            decide(&service, Family::V4, &here(), &Proximity::default(), &mut SmallRng::seed_from_u64(0), Some(&mut explanation));
        assert_eq!(decision.replicas[..], [0, 1]);
        assert!(explanation.steps[0].contains("failing open"), "{explanation}");
    }

    #[test]
    fn a_nodata_service_answers_nothing_when_all_are_down_and_says_why() {
        let mut replicas = vec![replica("a", "192.0.2.1"), replica("b", "192.0.2.2")];
        replicas[0].health = Health::Down;
        replicas[0].down_because = Some("probe: connection refused".into());
        replicas[1].enabled = false;
        let answering = Answering { when_all_down: AllDown::Nodata, ttl_cap: Some(20), ..Answering::plain(300, 0) };
        let service = Service::new("www.example.test.".into(), replicas, Policy::Static, answering);
        let mut explanation = Explanation::default();
        let decision =
            decide(&service, Family::V4, &here(), &Proximity::default(), &mut SmallRng::seed_from_u64(0), Some(&mut explanation));
        assert!(decision.replicas.is_empty());
        let text = explanation.to_string();
        assert!(text.contains("answers none then (NODATA)") && text.contains("a (probe: connection refused); b (disabled)"), "{text}");
    }

    #[test]
    fn a_ttl_cap_shortens_every_answer() {
        let answering = Answering { ttl_cap: Some(20), ..Answering::plain(300, 0) };
        let service = Service::new("www.example.test.".into(), vec![replica("a", "192.0.2.1")], Policy::Weighted, answering);
        let decision = decide(&service, Family::V4, &here(), &Proximity::default(), &mut SmallRng::seed_from_u64(0), None);
        assert_eq!(decision.ttl, 20, "the prepared path caps too");
    }

    #[test]
    fn caps_the_answer_and_rotates_round_robin() {
        let service = service_with(Policy::round_robin(), 2, |_| {});
        let mut rng = SmallRng::seed_from_u64(0);
        let firsts: Vec<usize> =
            (0..4).map(|_| decide(&service, Family::V4, &here(), &Proximity::default(), &mut rng, None).replicas[0]).collect();
        assert_eq!(firsts, [0, 1, 3, 0]);
        assert_eq!(decide(&service, Family::V4, &here(), &Proximity::default(), &mut rng, None).replicas.len(), 2);
    }

    #[test]
    fn region_probabilities_set_ttl_and_scope_and_explain_them() {
        let row = |probability, ttl| RegionRow { probability, ttl };
        let table = ProbabilityTable {
            default: vec![row(1.0, 360); 4],
            regions: [(1, vec![row(0.0, 10), row(0.0, 20), row(0.0, 30), row(1.0, 40)])].into_iter().collect(),
        };
        let service = service(Policy::RegionProbabilities(table));
        let mut explanation = Explanation::default();
        let decision =
            decide(&service, Family::V4, &here(), &Proximity::default(), &mut SmallRng::seed_from_u64(3), Some(&mut explanation));
        assert_eq!((decision.replicas[0], decision.ttl, decision.scope), (3, 40, 24));
        let text = explanation.to_string();
        assert!(text.contains("region 1") && text.contains("d 1.000") && text.contains("TTL 40, ECS scope /24"), "{text}");
    }

    /// The variants' probabilities, as shares.
    fn shares(variants: &[Variant]) -> Vec<(Order, u32, f64)> {
        let mut below = 0u64;
        variants
            .iter()
            .map(|variant| {
                let share = (variant.threshold - below) as f64 / u64::MAX as f64;
                below = variant.threshold;
                (variant.replicas.clone(), variant.ttl, share)
            })
            .collect()
    }

    /// Frequencies of `decide`'s answers (100,000 draws) in `region` match
    /// the variants' probabilities within 0.01 (beyond six standard
    /// errors), and `decide` gives no answer outside them.
    fn assert_decide_draws(service: &Service, region: RegionId, variants: &[Variant]) {
        let mut rng = SmallRng::seed_from_u64(7);
        let location = crate::locate::located(region);
        let expected = shares(variants);
        let mut counts = vec![0usize; expected.len()];
        for _ in 0..100_000 {
            let decision = decide(service, Family::V4, &location, &Proximity::default(), &mut rng, None);
            let at = expected.iter().position(|(replicas, ttl, _)| *replicas == decision.replicas && *ttl == decision.ttl);
            counts[at.unwrap_or_else(|| panic!("{decision:?} is no variant of {expected:?}"))] += 1;
        }
        for ((replicas, _, share), count) in expected.iter().zip(counts) {
            assert!((count as f64 / 100_000.0 - share).abs() < 0.01, "{replicas:?}: {count} draws for share {share}");
        }
    }

    #[test]
    fn variants_are_what_decide_draws_with_the_same_probabilities() {
        let weighted = service_with(Policy::Weighted, 2, |replicas| replicas[1].weight = 3);
        let failover = service_with(Policy::Failover, 0, |replicas| {
            replicas[0].priority = 2;
            replicas[3].weight = 4;
        });
        for service in [service(Policy::Static), weighted, failover] {
            let variants = variants(&service, Family::V4).unwrap();
            assert!(variants.by_region.is_empty() && !variants.scoped, "{}", service.policy.name());
            assert_decide_draws(&service, 1, &variants.default);
        }
        let row = |probability, ttl| RegionRow { probability, ttl };
        let table = ProbabilityTable {
            default: vec![row(0.5, 100), row(0.5, 200), row(0.0, 300), row(0.0, 400)],
            regions: [(1, vec![row(0.2, 10), row(0.0, 20), row(0.0, 30), row(0.8, 40)])].into_iter().collect(),
        };
        let service = service(Policy::RegionProbabilities(table));
        let variants = variants(&service, Family::V4).unwrap();
        assert_eq!((variants.by_region.len(), variants.scoped), (1, true));
        assert_decide_draws(&service, 1, &variants.by_region[0].1);
        assert_decide_draws(&service, 2, &variants.default);
    }

    #[test]
    fn policies_that_decide_per_query_say_why() {
        assert_eq!(variants(&service(Policy::round_robin()), Family::V4), Err(PerQuery::KeepsState));
        assert_eq!(PerQuery::KeepsState.to_string(), "round robin keeps state");
        let nodata = Service::new(
            "www.example.test.".into(),
            vec![replica("a", "192.0.2.1")],
            Policy::Static,
            Answering { when_all_down: AllDown::Nodata, ..Answering::plain(300, 0) },
        );
        assert_eq!(variants(&nodata, Family::V6), Err(PerQuery::NoReplica));
        let many: Vec<Replica> = (0..8).map(|index| replica(&format!("r{index}"), &format!("192.0.2.{}", index + 1))).collect();
        let weighted = Service::new("www.example.test.".into(), many, Policy::Weighted, Answering::plain(300, 0));
        assert_eq!(variants(&weighted, Family::V4), Err(PerQuery::TooManyOrders));
    }
}
