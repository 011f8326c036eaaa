//! The one door into the routing core. Every mechanism (DNS answers,
//! HTTP redirects, the explain API, and the mechanisms still to come)
//! asks here, so an explanation walks exactly the branch a query takes.

use rand::Rng;

use crate::decide::{Decision, PerQuery, Variants, decide, variants};
use crate::explain::Explanation;
use crate::locate::{Asker, Block, Location, locate, partition};
use crate::model::Service;
use crate::replica::Family;
use crate::routes::Routes;

/// Where the client was placed, and what the service answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    pub location: Location,
    pub decision: Decision,
}

/// Places `asker` among the regions of `routes` and decides which of
/// `service`'s `family` replicas answer it. `rng` is the only source of
/// chance: the same seed gives the same decision whoever asks, and an
/// `explanation`, when given, records each step without changing any.
pub fn route(
    routes: &Routes,
    service: &Service,
    family: Family,
    asker: &Asker,
    rng: &mut impl Rng,
    mut explanation: Option<&mut Explanation>,
) -> Routed {
    let location = locate(asker, &routes.regions, explanation.as_deref_mut());
    let decision = decide(service, family, &location, &routes.proximity, rng, explanation);
    Routed { location, decision }
}

/// Every decision [`route`] can give for `service` and `family`, with its
/// probability, per region (or one distribution for everyone), for a
/// mechanism that answers without asking here per query (the kernel fast
/// path); or why the decision needs per-query work. Clients are placed
/// in regions by their own address: what [`client_blocks`] lists.
pub fn route_variants(service: &Service, family: Family) -> Result<Variants, PerQuery> {
    variants(service, family)
}

/// Blocks of client addresses of `family`, covering them all, each placed
/// in one region by [`route`] (for clients without ECS); at most
/// `max_blocks` of them, or why they cannot be listed.
pub fn client_blocks(routes: &Routes, family: Family, max_blocks: usize) -> Result<Vec<Block>, PerQuery> {
    partition(&routes.regions, family, max_blocks).map_err(PerQuery::from)
}
