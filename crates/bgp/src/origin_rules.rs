//! Which routes may say who originates an address. A route collector's
//! table holds routes that name no one's clients: default routes (a peer's
//! way out, `0.0.0.0/0` and `::/0`), very short prefixes, and special-purpose
//! space (RFC 6890: private, loopback, link-local, documentation, shared
//! CGNAT space, ...) that leaked. Taken as origins, they would make their
//! AS the origin of every client no real route covers. Their AS paths
//! still count as links of the AS graph: adjacency is real whatever the
//! prefix.

use std::net::IpAddr;

use ipnet::IpNet;

/// The rules a route's prefix must pass to vote for an origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OriginRules {
    /// IPv4 prefixes shorter than this give no origin (default /8).
    pub min_length_v4: u8,
    /// IPv6 prefixes shorter than this give no origin (default /16).
    pub min_length_v6: u8,
    /// Whether prefixes inside special-purpose space give an origin: only
    /// for labs and private networks that route such space themselves.
    pub special_purpose_origins: bool,
}

impl Default for OriginRules {
    /// The lengths route collectors' consumers commonly filter at.
    fn default() -> Self {
        OriginRules { min_length_v4: 8, min_length_v6: 16, special_purpose_origins: false }
    }
}

/// Why a route gave no origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dropped {
    DefaultRoute,
    TooShort,
    SpecialPurpose,
}

/// Routes that gave no origin, by the rule that dropped them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DroppedRoutes {
    /// Routes to `0.0.0.0/0` or `::/0`.
    pub default_routes: u64,
    /// Routes shorter than the family's minimum, defaults aside.
    pub too_short: u64,
    /// Routes inside special-purpose address space.
    pub special_purpose: u64,
}

impl DroppedRoutes {
    pub(crate) fn count(&mut self, why: Dropped) {
        match why {
            Dropped::DefaultRoute => self.default_routes += 1,
            Dropped::TooShort => self.too_short += 1,
            Dropped::SpecialPurpose => self.special_purpose += 1,
        }
    }
}

/// Special-purpose IPv4 blocks (IANA's registry after RFC 6890): this
/// network, private, shared (CGNAT), loopback, link-local, IETF protocol
/// assignments, documentation, benchmarking, multicast and reserved.
const SPECIAL_V4: [&str; 14] = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
];

/// Special-purpose IPv6 blocks: unspecified and loopback, IPv4-mapped,
/// discard-only, documentation, unique local, link-local and multicast.
const SPECIAL_V6: [&str; 8] = ["::/127", "::ffff:0:0/96", "100::/64", "2001:db8::/32", "3fff::/20", "fc00::/7", "fe80::/10", "ff00::/8"];

impl OriginRules {
    /// Why `prefix` may not give an origin, if it may not.
    pub(crate) fn check(&self, prefix: IpNet) -> Result<(), Dropped> {
        let minimum = if prefix.addr().is_ipv4() { self.min_length_v4 } else { self.min_length_v6 };
        if prefix.prefix_len() == 0 {
            return Err(Dropped::DefaultRoute);
        }
        if prefix.prefix_len() < minimum {
            return Err(Dropped::TooShort);
        }
        if !self.special_purpose_origins && is_special_purpose(prefix) {
            return Err(Dropped::SpecialPurpose);
        }
        Ok(())
    }
}

/// Whether `prefix` lies inside a special-purpose block.
fn is_special_purpose(prefix: IpNet) -> bool {
    let blocks: &[&str] = match prefix.addr() {
        IpAddr::V4(_) => &SPECIAL_V4,
        IpAddr::V6(_) => &SPECIAL_V6,
    };
    blocks.iter().any(|block| block.parse::<IpNet>().expect("a valid block").contains(&prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(rules: &OriginRules, prefix: &str) -> Result<(), Dropped> {
        rules.check(prefix.parse().unwrap())
    }

    #[test]
    fn default_short_and_special_purpose_routes_give_no_origin() {
        let rules = OriginRules::default();
        assert_eq!(check(&rules, "0.0.0.0/0"), Err(Dropped::DefaultRoute));
        assert_eq!(check(&rules, "::/0"), Err(Dropped::DefaultRoute));
        assert_eq!(check(&rules, "64.0.0.0/7"), Err(Dropped::TooShort));
        assert_eq!(check(&rules, "2000::/12"), Err(Dropped::TooShort));
        for special in
            ["10.1.2.0/30", "192.168.0.0/16", "100.64.0.0/10", "169.254.1.0/24", "198.51.100.0/24", "fd12:3456::/32", "2001:db8:1::/48"]
        {
            assert_eq!(check(&rules, special), Err(Dropped::SpecialPurpose), "{special}");
        }
        for public in ["8.0.0.0/8", "1.1.1.0/24", "2001:4860::/32", "2a00::/16"] {
            assert_eq!(check(&rules, public), Ok(()), "{public}");
        }
    }

    #[test]
    fn special_purpose_space_and_shorter_prefixes_can_be_allowed() {
        let lab = OriginRules { min_length_v4: 1, min_length_v6: 1, special_purpose_origins: true };
        assert_eq!(check(&lab, "10.0.0.0/8"), Ok(()));
        assert_eq!(check(&lab, "64.0.0.0/2"), Ok(()));
        assert_eq!(check(&lab, "0.0.0.0/0"), Err(Dropped::DefaultRoute), "a default route is never an origin");
    }
}
