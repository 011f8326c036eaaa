//! The paper's Table 3 as seeded draws: for one connection, the DNS query
//! latency (83.5 % resolver cache hits), the optimal client-replica RTT,
//! whether anycast reaches the optimal data center (82.3 %) and its extra
//! RTT when not, and the inter-DC latency 2.3 x distance / c between two
//! real data-center sites.
//!
//! Figures 8 and 9 are images; the text gives only some of their points.
//! Each distribution is a log-normal through two points: the paper's where
//! it states them, an assumption (named below) where it does not.

use netdelay::delayer::Random;

/// Log-normal in milliseconds: exp(mu + sigma * z), z standard normal.
#[derive(Debug, Clone, Copy)]
pub struct LogNormal {
    mu: f64,
    sigma: f64,
}

impl LogNormal {
    /// The log-normal whose CDF passes through (x1 ms, p1) and (x2 ms, p2),
    /// given the standard normal quantiles z1 = z(p1), z2 = z(p2).
    pub fn through(x1: f64, z1: f64, x2: f64, z2: f64) -> LogNormal {
        let sigma = (x2.ln() - x1.ln()) / (z2 - z1);
        LogNormal { mu: x1.ln() - sigma * z1, sigma }
    }

    pub fn draw(&self, random: &mut Random) -> f64 {
        (self.mu + self.sigma * standard_normal(random)).exp()
    }

    pub fn mean(&self) -> f64 {
        (self.mu + self.sigma * self.sigma / 2.0).exp()
    }
}

/// Box-Muller.
fn standard_normal(random: &mut Random) -> f64 {
    let u1 = 1.0 - random.next_f64();
    let u2 = random.next_f64();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Resolver cache hit rate (section 5, after Jung et al.).
pub const CACHE_HIT: f64 = 0.835;
/// Share of clients anycast sends to the optimal data center.
pub const ANYCAST_OPTIMAL: f64 = 0.823;
/// Network latency over the speed of light in vacuum (section 5).
const STRETCH: f64 = 2.3;
const LIGHT_KM_PER_MS: f64 = 299.792_458;
const EARTH_RADIUS_KM: f64 = 6371.0;
/// An anycast miss lands in one of this many data centers nearest the
/// optimal one (assumption: the paper's average extra RTT, 12.71 ms, is a
/// neighbour's, not another continent's).
const NEIGHBOURS: usize = 5;

/// Table 3's distributions.
pub struct Model {
    /// Fig. 8, hit: 68.4 % under 2 ms, 7.0 % over 10 ms (z 0.479, 1.476).
    pub dns_hit: LogNormal,
    /// Fig. 8, miss: 10.5 % over 100 ms (z 1.254); median 30 ms assumed.
    pub dns_miss: LogNormal,
    /// Fig. 9, optimal routing: not in the text; median 10 ms and mean
    /// 14.4 ms assumed (the handshake time the paper's Fig. 10 means imply).
    pub optimal_rtt: LogNormal,
    /// Fig. 9, anycast's extra RTT when not optimal: 31.6 % under 2 ms,
    /// 15.8 % over 20 ms (z -0.479, 1.003); its mean, 14.1 ms, against the
    /// paper's 12.71.
    pub anycast_extra: LogNormal,
    pub sites: Vec<Site>,
}

/// A data center: a WonderProxy server's city.
#[derive(Debug, Clone)]
pub struct Site {
    pub name: String,
    pub latitude: f64,
    pub longitude: f64,
}

/// One connection's draw, milliseconds.
#[derive(Debug, Clone)]
pub struct Draw {
    pub cache_hit: bool,
    /// Client to resolver and back, with the resolver's own work.
    pub dns_rtt: f64,
    /// Client to the optimal data center's replica and back.
    pub optimal_rtt: f64,
    pub anycast_optimal: bool,
    /// Client to the anycast data center and back.
    pub anycast_rtt: f64,
    /// One way, anycast data center to the optimal one (0 when they are one).
    pub overlay: f64,
    /// The anycast and the optimal data centers, when they differ.
    pub sites: Option<(String, String)>,
}

impl Model {
    /// `sites_csv`: WonderProxy's servers file (id,name,title,...,latitude,longitude,...).
    pub fn new(sites_csv: &str) -> Result<Model, String> {
        let sites = parse_sites(sites_csv)?;
        if sites.len() <= NEIGHBOURS {
            return Err(format!("{} sites: at least {} needed", sites.len(), NEIGHBOURS + 1));
        }
        Ok(Model {
            dns_hit: LogNormal::through(2.0, 0.479, 10.0, 1.476),
            dns_miss: LogNormal::through(30.0, 0.0, 100.0, 1.254),
            optimal_rtt: LogNormal { mu: 10f64.ln(), sigma: (2.0 * (14.4f64 / 10.0).ln()).sqrt() },
            anycast_extra: LogNormal::through(2.0, -0.479, 20.0, 1.003),
            sites,
        })
    }

    pub fn draw(&self, random: &mut Random) -> Draw {
        let cache_hit = random.next_f64() < CACHE_HIT;
        let dns_rtt = if cache_hit { self.dns_hit.draw(random) } else { self.dns_miss.draw(random) };
        let optimal_rtt = self.optimal_rtt.draw(random);
        let anycast_optimal = random.next_f64() < ANYCAST_OPTIMAL;
        if anycast_optimal {
            return Draw { cache_hit, dns_rtt, optimal_rtt, anycast_optimal, anycast_rtt: optimal_rtt, overlay: 0.0, sites: None };
        }
        let extra = self.anycast_extra.draw(random);
        let optimal = &self.sites[pick(random, self.sites.len())];
        let mut others: Vec<&Site> = self.sites.iter().filter(|site| site.name != optimal.name).collect();
        others.sort_by(|a, b| distance_km(optimal, a).total_cmp(&distance_km(optimal, b)));
        let anycast = others[pick(random, NEIGHBOURS)];
        let overlay = STRETCH * distance_km(anycast, optimal) / LIGHT_KM_PER_MS;
        let sites = Some((anycast.name.clone(), optimal.name.clone()));
        Draw { cache_hit, dns_rtt, optimal_rtt, anycast_optimal, anycast_rtt: optimal_rtt + extra, overlay, sites }
    }
}

fn pick(random: &mut Random, count: usize) -> usize {
    (random.next_u64() % count as u64) as usize
}

fn parse_sites(csv: &str) -> Result<Vec<Site>, String> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().ok_or("an empty sites file")?.split(',').collect();
    let column = |name: &str| header.iter().position(|&field| field == name).ok_or(format!("no {name:?} column"));
    let (name, latitude, longitude) = (column("name")?, column("latitude")?, column("longitude")?);
    lines
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(number, line)| {
            let fields: Vec<&str> = line.split(',').collect();
            let field = |at: usize| fields.get(at).copied().ok_or(format!("line {}: too few fields", number + 2));
            let degrees = |at: usize| field(at)?.parse::<f64>().map_err(|error| format!("line {}: {error}", number + 2));
            Ok(Site { name: field(name)?.to_owned(), latitude: degrees(latitude)?, longitude: degrees(longitude)? })
        })
        .collect()
}

/// Great-circle distance (haversine).
pub fn distance_km(a: &Site, b: &Site) -> f64 {
    let (lat1, lat2) = (a.latitude.to_radians(), b.latitude.to_radians());
    let (dlat, dlon) = (lat2 - lat1, (b.longitude - a.longitude).to_radians());
    let h = (dlat / 2.0).sin().powi(2) + lat1.cos() * lat2.cos() * (dlon / 2.0).sin().powi(2);
    2.0 * EARTH_RADIUS_KM * h.sqrt().asin()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SITES: &str = "id,name,title,latitude,longitude\n1,Paris,Paris,48.8566,2.3522\n2,London,London,51.5074,-0.1278\n\
        3,Frankfurt,Frankfurt,50.1109,8.6821\n4,Amsterdam,Amsterdam,52.3676,4.9041\n5,Madrid,Madrid,40.4168,-3.7038\n\
        6,Milan,Milan,45.4642,9.19\n7,Sydney,Sydney,-33.8688,151.2093\n";

    fn share(draws: &[f64], test: impl Fn(f64) -> bool) -> f64 {
        draws.iter().filter(|&&x| test(x)).count() as f64 / draws.len() as f64
    }

    #[test]
    fn the_distributions_pass_through_the_papers_points() {
        let model = Model::new(SITES).unwrap();
        let mut random = Random::new(11);
        let mut draw = |distribution: LogNormal| (0..100_000).map(|_| distribution.draw(&mut random)).collect::<Vec<_>>();
        let hit = draw(model.dns_hit);
        assert!((share(&hit, |x| x < 2.0) - 0.684).abs() < 0.01 && (share(&hit, |x| x > 10.0) - 0.070).abs() < 0.01);
        let miss = draw(model.dns_miss);
        assert!((share(&miss, |x| x > 100.0) - 0.105).abs() < 0.01);
        let extra = draw(model.anycast_extra);
        assert!((share(&extra, |x| x < 2.0) - 0.316).abs() < 0.01 && (share(&extra, |x| x > 20.0) - 0.158).abs() < 0.01);
        assert!((model.optimal_rtt.mean() - 14.4).abs() < 0.01);
    }

    #[test]
    fn draws_are_seeded_and_anycast_misses_add_overlay_to_a_near_site() {
        let model = Model::new(SITES).unwrap();
        let draws = |seed| {
            let mut random = Random::new(seed);
            (0..20_000).map(|_| model.draw(&mut random)).collect::<Vec<_>>()
        };
        let (first, again) = (draws(5), draws(5));
        assert_eq!(format!("{first:?}"), format!("{again:?}"));
        let hits = first.iter().filter(|draw| draw.cache_hit).count() as f64 / 20_000.0;
        let optimal = first.iter().filter(|draw| draw.anycast_optimal).count() as f64 / 20_000.0;
        assert!((hits - CACHE_HIT).abs() < 0.01 && (optimal - ANYCAST_OPTIMAL).abs() < 0.01, "{hits} {optimal}");
        for draw in &first {
            assert_eq!(draw.anycast_optimal, draw.sites.is_none());
            assert!(draw.anycast_rtt >= draw.optimal_rtt);
            // Sydney is never among a European site's 5 nearest, nor Europe among Sydney's (it has only 6 others).
            assert!(draw.overlay < 20.0 || draw.sites.as_ref().unwrap().1 == "Sydney", "{draw:?}");
        }
    }

    #[test]
    fn the_overlay_is_2_3_times_light_over_the_distance() {
        let paris = Site { name: "Paris".into(), latitude: 48.8566, longitude: 2.3522 };
        let london = Site { name: "London".into(), latitude: 51.5074, longitude: -0.1278 };
        let km = distance_km(&paris, &london);
        assert!((340.0..350.0).contains(&km), "{km}");
    }

    #[test]
    fn a_bad_sites_file_is_a_clear_error() {
        assert_eq!(Model::new("").err().unwrap(), "an empty sites file");
        assert_eq!(Model::new("id,name,latitude\n").err().unwrap(), "no \"longitude\" column");
        let error = Model::new("name,latitude,longitude\nParis,north,2\n").err().unwrap();
        assert!(error.starts_with("line 2: invalid float"), "{error}");
        assert!(Model::new("name,latitude,longitude\nParis,1,2\n").err().unwrap().contains("at least 6"));
    }
}
