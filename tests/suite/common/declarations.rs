//! The regions and services of a test's configuration, written as TOML the
//! way an operator would, so that each test says only what it declares.

use std::fmt::Write;

/// `[[region]]` and `[[service]]` tables, in the order they are added: a
/// method that adds to a service adds to the last one.
#[derive(Default)]
pub struct Declarations {
    toml: String,
}

impl Declarations {
    pub fn new() -> Declarations {
        Declarations::default()
    }

    /// The service several tests route: svc.example.test on replicas fra
    /// (192.0.2.10) and sin (192.0.2.20), by region probabilities that send
    /// clients in europe (198.51.100.0/24) to fra with TTL 60.
    pub fn europe_service() -> Declarations {
        Declarations::new()
            .region(1, "europe", &["198.51.100.0/24"])
            .service("svc.example.test")
            .policy("region-probabilities")
            .replica("fra", "192.0.2.10")
            .replica("sin", "192.0.2.20")
            .probabilities("europe", &[("fra", 1.0, 60)])
    }

    /// A region of client subnets.
    pub fn region(self, id: u32, name: &str, prefixes: &[&str]) -> Declarations {
        let quoted: Vec<String> = prefixes.iter().map(|prefix| format!("{prefix:?}")).collect();
        self.region_by(id, name, &format!("prefixes = [{}]", quoted.join(", ")))
    }

    /// A region placed by `rule`, one TOML line such as `asns = [15169]`,
    /// or by nothing in the file if `rule` is empty.
    pub fn region_by(mut self, id: u32, name: &str, rule: &str) -> Declarations {
        writeln!(self.toml, "[[region]]\nid = {id}\nname = {name:?}").unwrap();
        self.line(rule)
    }

    pub fn service(mut self, name: &str) -> Declarations {
        writeln!(self.toml, "[[service]]\nname = {name:?}").unwrap();
        self
    }

    pub fn policy(mut self, policy: &str) -> Declarations {
        writeln!(self.toml, "policy = {policy:?}").unwrap();
        self
    }

    pub fn replica(mut self, id: &str, address: &str) -> Declarations {
        writeln!(self.toml, "[[service.replica]]\nid = {id:?}\naddress = {address:?}").unwrap();
        self
    }

    /// The service's answers for clients in `region`: (replica, probability, TTL).
    pub fn probabilities(mut self, region: &str, replicas: &[(&str, f64, u32)]) -> Declarations {
        writeln!(self.toml, "[service.probabilities.{region}]").unwrap();
        for (replica, probability, ttl) in replicas {
            writeln!(self.toml, "{replica} = {{ probability = {probability:?}, ttl = {ttl} }}").unwrap();
        }
        self
    }

    /// Any other line of the table being written, such as `ttl = 300`.
    pub fn line(mut self, line: &str) -> Declarations {
        if !line.is_empty() {
            writeln!(self.toml, "{line}").unwrap();
        }
        self
    }

    pub fn toml(self) -> String {
        self.toml
    }
}
