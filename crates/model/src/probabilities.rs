//! One entry of a region-probabilities table as an operator declares it:
//! below both the service declarations that hold such tables and load
//! control, which computes them.

use pharos_route::model::DEFAULT_TTL;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbabilitySpec {
    pub probability: f64,
    #[serde(default = "default_ttl")]
    pub ttl: u32,
}

pub(crate) fn default_ttl() -> u32 {
    DEFAULT_TTL
}
