//! The one door into the routing core. Every mechanism (DNS answers,
//! HTTP redirects, the explain API, and the mechanisms still to come)
//! asks here, so an explanation walks exactly the branch a query takes.

use rand::Rng;

use crate::decide::{Decision, decide};
use crate::explain::Explanation;
use crate::locate::{Asker, Location, locate};
use crate::model::{Family, Service};
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
