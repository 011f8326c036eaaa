//! `pharos ctl`: the command-line client of the control API. Tables for
//! people by default, the API's JSON with `--json`.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use pharos_model::api::{
    AddressView, DispatcherPick, ErrorReply, ExplainReply, MeasurementSpec, MeasurementsKept, NewRegion, RegionAdded, ReplicaPatch,
};
use pharos_model::spec::{RegionSpec, ServiceSpec};
use pharos_model::status::{DataStatus, FastPathStatus, SecondaryStatus, StoreStatus, SyncCounts};
use pharos_model::token::{NewToken, Scope, TokenMade, TokenView};
use pharos_model::zone::{NewZone, RrsetChange, RrsetView, ZoneView};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

#[derive(Args)]
pub struct CtlArgs {
    /// Base URL of the control API.
    #[arg(long, default_value = "http://127.0.0.1:5380", env = "PHAROS_API")]
    api: String,
    /// Bearer token: the bootstrap token `admin` (printed by `pharos serve`
    /// at first start) or one made by `pharos ctl token create`.
    // A made token is base64url: one in 64 starts with '-'.
    #[arg(long, env = "PHAROS_TOKEN", hide_env_values = true, allow_hyphen_values = true)]
    token: Option<String>,
    /// PEM certificate(s) to trust for an https:// API (its own certificate
    /// if self-signed, or the CA that issued it); without it, the web's
    /// public roots are trusted.
    #[arg(long, env = "PHAROS_CACERT")]
    cacert: Option<PathBuf>,
    /// Print the API's JSON instead of tables.
    #[arg(long)]
    json: bool,
    #[command(subcommand)]
    command: CtlCommand,
}

#[derive(Subcommand)]
enum CtlCommand {
    /// List regions.
    Regions,
    /// Add a region and print the id it was given (MyXDNS Add_Region).
    RegionAdd {
        /// The region's name, unique among regions.
        name: String,
        /// CIDR prefixes of the clients it holds, e.g. 198.51.100.0/24.
        prefixes: Vec<String>,
    },
    /// Remove a region (MyXDNS Remove_Region).
    RegionRemove {
        /// The region's name.
        name: String,
    },
    /// List services.
    Services,
    /// Show one service with its replicas and table.
    Service {
        /// The service's host name.
        name: String,
    },
    /// Create or replace a service from a JSON file (the API's Service schema).
    ServicePut {
        /// JSON file holding one service.
        file: PathBuf,
    },
    /// Delete a service: its name then answers as the zone says.
    ServiceDelete {
        /// The service's host name.
        name: String,
    },
    /// Replace a service's whole probability table from a JSON file (MyXDNS Update_Prob).
    Probabilities {
        /// The service's host name.
        name: String,
        /// JSON file: table name ("default" or a region) -> replica id -> probability and TTL.
        file: PathBuf,
    },
    /// Change one replica's switches.
    Replica {
        /// The service's host name.
        service: String,
        /// The replica's id within the service.
        id: String,
        /// Answer the replica again.
        #[arg(long, conflicts_with = "disable")]
        enable: bool,
        /// Never answer the replica until it is enabled.
        #[arg(long)]
        disable: bool,
        /// Mark the replica down, as a failed probe would.
        #[arg(long, conflicts_with = "up")]
        down: bool,
        /// Mark the replica up.
        #[arg(long)]
        up: bool,
        /// Its relative share in weighted choices.
        #[arg(long)]
        weight: Option<u32>,
        /// Its failover priority: lower numbers are tried first.
        #[arg(long)]
        priority: Option<u32>,
    },
    /// Why CLIENT (an address, or address/prefix) gets what it gets for NAME;
    /// for an Artemis service address, also where the dispatcher sends its handshake.
    Explain {
        /// The service's host name, or one of its Artemis service addresses.
        name: String,
        /// The client's address, or address/prefix as EDNS Client Subnet carries it.
        client: String,
        /// Explain the IPv6 answer (AAAA) instead of the IPv4 one.
        #[arg(long)]
        aaaa: bool,
    },
    /// Print the live regions and services in the config file's format.
    Export,
    /// Re-read the config file and zone files (and BGP tables, in the background).
    Reload,
    /// Send latency measurements from a CSV file: subnet,datacenter,rtt_ms[,measured_at unix seconds].
    Measurements {
        /// The CSV file.
        file: PathBuf,
    },
    /// Show the proximity data: BGP tables and latency measurements in use.
    Data,
    /// Show the kernel fast path: per interface, hits, misses and pass-ups, and what the last sync changed.
    Fastpath,
    /// Show the Artemis service addresses ([artemis]) and what the Address Manager says to fix.
    Artemis,
    /// Show the store: its engine, whether this node follows other nodes' changes, and the last change applied.
    Status,
    /// Show the last events: replicas going up or down, changes, and who asked for each change.
    Events,
    /// Make, list and revoke the API's named tokens (needs an admin token).
    #[command(subcommand)]
    Token(TokenCommand),
    /// List the zones served; make, show, change and delete those the store keeps.
    #[command(subcommand)]
    Zone(ZoneCommand),
}

#[derive(Subcommand)]
enum ZoneCommand {
    /// List every zone served: name, where it comes from (file or store), serial, signed or not.
    List,
    /// Make a zone kept in the store: imported once from a zone file, or empty with a SOA and NS records.
    Create {
        /// The zone's name.
        name: String,
        /// A zone file to import (no $INCLUDE).
        #[arg(long, conflicts_with = "ns")]
        file: Option<PathBuf>,
        /// A name server of a zone made empty (repeat for more); the first is the SOA's primary.
        #[arg(long, required_unless_present = "file")]
        ns: Vec<String>,
    },
    /// Print a store zone as a zone file.
    Show {
        /// The zone's name.
        name: String,
    },
    /// Print a store zone's RRsets.
    Rrsets {
        /// The zone's name.
        name: String,
    },
    /// Replace an RRset of a store zone (its serial moves forward).
    Set {
        /// The zone's name.
        zone: String,
        /// The RRset's owner, absolute or relative to ZONE.
        owner: String,
        /// Its type: A, AAAA, TXT, MX, ...
        rtype: String,
        /// Each record's data, in presentation form: 192.0.2.1, "10 mail.example.com.", ...
        #[arg(required = true)]
        data: Vec<String>,
        /// The RRset's TTL in seconds.
        #[arg(long, default_value_t = 3600)]
        ttl: u32,
    },
    /// Delete an RRset of a store zone.
    Unset {
        /// The zone's name.
        zone: String,
        /// The RRset's owner, absolute or relative to ZONE.
        owner: String,
        /// Its type.
        rtype: String,
    },
    /// Delete a store zone (refused while services live in it).
    Delete {
        /// The zone's name.
        name: String,
    },
    /// List the secondary zones: serial, last refresh, next check, expired or not, last error.
    Secondary,
    /// Make a secondary zone ask its primaries now (as a NOTIFY does).
    Refresh {
        /// The zone's name.
        name: String,
    },
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Make a token and print its secret, shown this once.
    Create {
        /// Its name, 1 to 64 letters, digits, '.', '_' or '-'; named in the event log.
        name: String,
        /// read (every GET), admin (everything), or write:service=NAME,zone=NAME,...
        /// (reading, and changing the services and zones named).
        #[arg(long)]
        scope: Scope,
    },
    /// List the tokens: name, scope, when made, whether revoked.
    List,
    /// Revoke a token: every node of a fleet refuses it once it reads the change.
    Revoke {
        /// The token's name.
        name: String,
    },
}

pub fn run(args: CtlArgs) -> anyhow::Result<()> {
    let client = Client { base: args.api.trim_end_matches('/').to_string(), token: args.token, agent: agent(args.cacert.as_deref())? };
    let reply = match &args.command {
        CtlCommand::Regions => client.call("GET", "/v1/regions", None)?,
        CtlCommand::RegionAdd { name, prefixes } => {
            let region = NewRegion { name: name.clone(), prefixes: prefixes.clone(), asns: vec![], countries: vec![], continents: vec![] };
            client.send("POST", "/v1/regions", &region)?
        }
        CtlCommand::RegionRemove { name } => client.call("DELETE", &format!("/v1/regions/{name}"), None)?,
        CtlCommand::Services => client.call("GET", "/v1/services", None)?,
        CtlCommand::Service { name } => client.call("GET", &format!("/v1/services/{name}"), None)?,
        CtlCommand::ServicePut { file } => {
            let service = read_json(file)?;
            let name = service["name"].as_str().context("the service file has no \"name\"")?.to_string();
            client.send("PUT", &format!("/v1/services/{name}"), &service)?
        }
        CtlCommand::ServiceDelete { name } => client.call("DELETE", &format!("/v1/services/{name}"), None)?,
        CtlCommand::Probabilities { name, file } => client.send("PUT", &format!("/v1/services/{name}/probabilities"), &read_json(file)?)?,
        CtlCommand::Replica { service, id, enable, disable, down, up, weight, priority } => {
            let patch = ReplicaPatch {
                enabled: (*enable || *disable).then_some(*enable),
                down: (*down || *up).then_some(*down),
                weight: *weight,
                priority: *priority,
            };
            if patch == ReplicaPatch::default() {
                bail!("nothing to change: give --enable, --disable, --down, --up, --weight or --priority");
            }
            client.send("PATCH", &format!("/v1/services/{service}/replicas/{id}"), &patch)?
        }
        CtlCommand::Explain { name, client: asker, aaaa } => {
            let qtype = if *aaaa { "AAAA" } else { "A" };
            let path = match name.parse::<std::net::IpAddr>() {
                Ok(_) if *aaaa => bail!("with a service address, its family chooses the question: drop --aaaa"),
                Ok(address) => format!("/v1/explain?address={address}&client={}", encode(asker)),
                Err(_) => format!("/v1/explain?name={}&client={}&qtype={qtype}", encode(name), encode(asker)),
            };
            client.call("GET", &path, None)?
        }
        CtlCommand::Export => return client.call("GET", "/v1/export", None).map(|text| print!("{text}")),
        CtlCommand::Reload => client.call("POST", "/v1/reload", None)?,
        CtlCommand::Measurements { file } => client.send("POST", "/v1/measurements", &read_measurements(file)?)?,
        CtlCommand::Data => client.call("GET", "/v1/data", None)?,
        CtlCommand::Fastpath => client.call("GET", "/v1/fastpath", None)?,
        CtlCommand::Artemis => client.call("GET", "/v1/artemis", None)?,
        CtlCommand::Status => client.call("GET", "/v1/store", None)?,
        CtlCommand::Events => client.call("GET", "/v1/events", None)?,
        CtlCommand::Token(TokenCommand::Create { name, scope }) => {
            client.send("POST", "/v1/tokens", &NewToken { name: name.clone(), scope: scope.clone() })?
        }
        CtlCommand::Token(TokenCommand::List) => client.call("GET", "/v1/tokens", None)?,
        CtlCommand::Token(TokenCommand::Revoke { name }) => client.call("DELETE", &format!("/v1/tokens/{name}"), None)?,
        CtlCommand::Zone(command) => zone_call(&client, command)?,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&as_json(reply))?);
    } else {
        print_human(&args.command, &reply)?;
    }
    Ok(())
}

fn zone_call(client: &Client, command: &ZoneCommand) -> anyhow::Result<String> {
    let rrset_change = |zone: &str, owner: &str, rtype: &str, ttl: u32, records: Vec<String>| RrsetChange {
        name: owner_in(zone, owner),
        rtype: rtype.to_string(),
        ttl,
        records,
    };
    match command {
        ZoneCommand::List => client.call("GET", "/v1/zones", None),
        ZoneCommand::Create { name, file, ns } => {
            let text = file.as_ref().map(|file| std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display())));
            client.send("POST", "/v1/zones", &NewZone { name: name.clone(), text: text.transpose()?, nameservers: ns.clone() })
        }
        ZoneCommand::Show { name } => client.call("GET", &format!("/v1/zones/{name}"), None),
        ZoneCommand::Rrsets { name } => client.call("GET", &format!("/v1/zones/{name}/rrsets"), None),
        ZoneCommand::Set { zone, owner, rtype, data, ttl } => {
            client.send("PATCH", &format!("/v1/zones/{zone}/rrsets"), &[rrset_change(zone, owner, rtype, *ttl, data.clone())])
        }
        ZoneCommand::Unset { zone, owner, rtype } => {
            client.send("PATCH", &format!("/v1/zones/{zone}/rrsets"), &[rrset_change(zone, owner, rtype, 0, Vec::new())])
        }
        ZoneCommand::Delete { name } => client.call("DELETE", &format!("/v1/zones/{name}"), None),
        ZoneCommand::Secondary => client.call("GET", "/v1/secondary", None),
        ZoneCommand::Refresh { name } => client.call("POST", &format!("/v1/zones/{name}/refresh"), None),
    }
}

/// `owner` as an absolute name: as given if it ends in a dot, else
/// relative to `zone` ("@" is the zone itself).
fn owner_in(zone: &str, owner: &str) -> String {
    let zone = zone.trim_end_matches('.');
    match owner {
        "@" => format!("{zone}."),
        absolute if absolute.ends_with('.') => absolute.to_string(),
        relative => format!("{relative}.{zone}."),
    }
}

/// Reads `subnet,datacenter,rtt_ms[,measured_at]` lines ('#' starts a
/// comment) as the API's measurement list.
fn read_measurements(file: &PathBuf) -> anyhow::Result<Vec<MeasurementSpec>> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut measurements = Vec::new();
    for (number, line) in text.lines().enumerate().map(|(index, line)| (index + 1, line.trim())) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = || format!("{}:{number}", file.display());
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [subnet, datacenter, rtt_ms, ref rest @ ..] = fields[..] else {
            bail!("{}: expected subnet,datacenter,rtt_ms[,measured_at], got {line:?}", at());
        };
        let rtt_ms: f64 = rtt_ms.parse().with_context(|| format!("{}: {rtt_ms:?} is not a number of milliseconds", at()))?;
        let measured_at = match rest {
            [] => None,
            [measured_at] => Some(measured_at.parse().with_context(|| format!("{}: {measured_at:?} is not Unix seconds", at()))?),
            _ => bail!("{}: too many fields in {line:?}", at()),
        };
        measurements.push(MeasurementSpec { subnet: subnet.into(), datacenter: datacenter.into(), rtt_ms, measured_at });
    }
    Ok(measurements)
}

/// A file to send as it is: the API checks it and says what is wrong.
fn read_json(file: &PathBuf) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", file.display()))
}

/// Percent-encodes a query value (names and addresses need little).
fn encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'_' | b':' => (byte as char).to_string(),
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// A reply as `--json` prints it: its JSON, or its text if it is not JSON.
fn as_json(reply: String) -> Value {
    if reply.is_empty() { Value::Null } else { serde_json::from_str(&reply).unwrap_or(Value::String(reply)) }
}

/// A reply read as the API's type for it.
fn read<T: DeserializeOwned>(reply: &str) -> anyhow::Result<T> {
    serde_json::from_str(reply).context("the control API's reply is not what this pharos ctl reads (another version?)")
}

struct Client {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
}

/// The HTTP client: statuses read, not raised; over https, trusting the
/// certificates in `cacert` if given.
fn agent(cacert: Option<&std::path::Path>) -> anyhow::Result<ureq::Agent> {
    let mut tls = ureq::tls::TlsConfig::builder();
    if let Some(path) = cacert {
        let pem = std::fs::read(path).with_context(|| format!("cannot read --cacert {}", path.display()))?;
        let mut roots = Vec::new();
        for item in ureq::tls::parse_pem(&pem) {
            if let ureq::tls::PemItem::Certificate(certificate) = item.with_context(|| format!("--cacert {} is not PEM", path.display()))? {
                roots.push(certificate);
            }
        }
        if roots.is_empty() {
            bail!("--cacert {} holds no certificate (\"-----BEGIN CERTIFICATE-----\")", path.display());
        }
        tls = tls.root_certs(ureq::tls::RootCerts::from(roots));
    }
    Ok(ureq::Agent::config_builder().http_status_as_error(false).tls_config(tls.build()).build().into())
}

impl Client {
    /// Sends `body` as JSON; see [`Client::call`].
    fn send(&self, method: &str, path: &str, body: &impl Serialize) -> anyhow::Result<String> {
        self.call(method, path, Some(serde_json::to_string(body)?))
    }

    /// Sends a request and returns the reply's text; a non-2xx reply
    /// becomes an error with the API's message.
    fn call(&self, method: &str, path: &str, body: Option<String>) -> anyhow::Result<String> {
        let url = format!("{}{path}", self.base);
        let request = ureq::http::Request::builder()
            .method(method)
            .uri(&url)
            .header("Authorization", format!("Bearer {}", self.token.as_deref().unwrap_or("")));
        let agent = &self.agent;
        let response = match body {
            Some(body) => agent.run(request.header("Content-Type", "application/json").body(body)?),
            None => agent.run(request.body(())?),
        }
        .with_context(|| format!("cannot reach the control API at {}", self.base))?;
        let status = response.status();
        let text = response.into_body().read_to_string()?;
        if !status.is_success() {
            let refused = serde_json::from_str::<ErrorReply>(&text).ok();
            let field = refused.as_ref().and_then(|refused| refused.field.as_ref()).map(|field| format!(" ({field})")).unwrap_or_default();
            bail!("{status}: {}{field}", refused.as_ref().map_or("request failed", |refused| refused.error.as_str()));
        }
        Ok(text)
    }
}

fn print_human(command: &CtlCommand, reply: &str) -> anyhow::Result<()> {
    match command {
        CtlCommand::Regions => print_regions(&read::<Vec<RegionSpec>>(reply)?),
        CtlCommand::RegionAdd { name, .. } => {
            let added: RegionAdded = read(reply)?;
            println!("region {name} added with id {}", serde_json::to_string(&added.id)?);
        }
        CtlCommand::Services => print_services(&read::<Vec<ServiceSpec>>(reply)?),
        CtlCommand::Service { .. } => print_service(&read(reply)?),
        CtlCommand::Explain { .. } => print_explained(&read(reply)?),
        CtlCommand::Artemis => print_artemis(&read(reply)?),
        CtlCommand::Measurements { .. } => println!("{} measurements kept", read::<MeasurementsKept>(reply)?.accepted),
        CtlCommand::Data => print_data(&read(reply)?),
        CtlCommand::Fastpath => print_fastpath(&read(reply)?),
        CtlCommand::Status => print_store(&read(reply)?),
        CtlCommand::Events => print_events(&read::<Vec<Event>>(reply)?),
        CtlCommand::Token(TokenCommand::Create { .. }) => {
            let made: TokenMade = read(reply)?;
            println!("token {} (scope {}), shown this once:\n{}", made.name, made.scope, made.token);
        }
        CtlCommand::Token(TokenCommand::List) => print_tokens(&read::<Vec<TokenView>>(reply)?),
        CtlCommand::Zone(ZoneCommand::List) => print_zones(&read::<Vec<ZoneView>>(reply)?),
        CtlCommand::Zone(ZoneCommand::Show { .. }) => print!("{reply}"),
        CtlCommand::Zone(ZoneCommand::Rrsets { .. }) => print_rrsets(&read::<Vec<RrsetView>>(reply)?),
        CtlCommand::Zone(ZoneCommand::Secondary | ZoneCommand::Refresh { .. }) => print_secondaries(&read::<Vec<SecondaryStatus>>(reply)?),
        _ => println!("ok"),
    }
    Ok(())
}

fn print_secondaries(zones: &[SecondaryStatus]) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64);
    let ago = |at: Option<u64>| at.map_or("never".to_string(), |at| format!("{}s ago", now.saturating_sub(at) / 1000));
    let due = |at: Option<u64>| at.map_or("now".to_string(), |at| format!("in {}s", at.saturating_sub(now) / 1000));
    println!("{:<32} {:<12} {:<14} {:<12} {:<8} LAST ERROR", "ZONE", "SERIAL", "REFRESHED", "NEXT CHECK", "STATE");
    for zone in zones {
        let serial = zone.serial.map_or("-".to_string(), |serial| serial.to_string());
        let state = if zone.expired { "expired" } else { "serving" };
        let error = zone.last_error.as_deref().unwrap_or("-");
        println!("{:<32} {serial:<12} {:<14} {:<12} {state:<8} {error}", zone.zone, ago(zone.last_refresh), due(zone.next_check));
    }
}

fn print_tokens(tokens: &[TokenView]) {
    println!("{:<24} {:<12} {:<8} SCOPE", "NAME", "CREATED", "STATE");
    for token in tokens {
        let state = if token.revoked { "revoked" } else { "active" };
        println!("{:<24} {:<12} {state:<8} {}", token.name, token.created, token.scope);
    }
}

fn print_zones(zones: &[ZoneView]) {
    println!("{:<32} {:<6} {:>10} SIGNED", "NAME", "KIND", "SERIAL");
    for zone in zones {
        let kind = serde_json::to_value(zone.kind).ok().and_then(|kind| kind.as_str().map(str::to_owned)).unwrap_or_default();
        println!("{:<32} {kind:<6} {:>10} {}", zone.name, zone.serial, if zone.signed { "yes" } else { "no" });
    }
}

fn print_rrsets(rrsets: &[RrsetView]) {
    for rrset in rrsets {
        for data in &rrset.records {
            println!("{} {} IN {} {data}", rrset.name, rrset.ttl, rrset.rtype);
        }
    }
}

/// An event of the server's log, as `/v1/events` lists them.
#[derive(serde::Deserialize)]
struct Event {
    /// Unix ms.
    at: u64,
    kind: String,
    text: String,
}

fn print_events(events: &[Event]) {
    for event in events {
        println!("{:>16} {:<7} {}", event.at, event.kind, event.text);
    }
}

fn print_regions(regions: &[RegionSpec]) {
    println!("{:>4}  {:<16} PREFIXES", "ID", "NAME");
    for region in regions {
        println!("{:>4}  {:<16} {}", region.id, region.name, region.prefixes.join(" "));
    }
}

fn print_services(services: &[ServiceSpec]) {
    println!("{:<32} {:<22} {:>6} REPLICAS", "NAME", "POLICY", "TTL");
    for service in services {
        println!("{:<32} {:<22} {:>6} {}", service.name, service.policy, service.ttl, service.replicas.len());
    }
}

fn print_service(service: &ServiceSpec) {
    println!("{} (policy {}, TTL {})", service.name, service.policy, service.ttl);
    println!("  {:<12} {:<40} {:>6} {:>8} STATE", "REPLICA", "ADDRESS", "WEIGHT", "PRIORITY");
    for replica in &service.replicas {
        let state = match (replica.enabled, replica.down) {
            (false, _) => "disabled",
            (_, true) => "marked down",
            _ => "serving",
        };
        println!("  {:<12} {:<40} {:>6} {:>8} {state}", replica.id, replica.address.to_string(), replica.weight, replica.priority);
    }
}

fn print_explained(explained: &ExplainReply) {
    for (number, step) in explained.explained.steps.iter().enumerate() {
        println!("{}. {step}", number + 1);
    }
    println!("{}", explained.fast_path);
    if let Some(pick) = &explained.artemis {
        print_dispatcher_pick(pick);
    }
}

fn print_dispatcher_pick(pick: &DispatcherPick) {
    println!("{} is the Artemis service address of {}", pick.service_address, pick.service);
    match &pick.replica {
        Some(replica) => {
            let datacenter = pick.datacenter.as_ref().map_or("no declared data center".to_owned(), |name| format!("data center {name}"));
            let address = pick.replica_address.as_deref().unwrap_or("");
            println!("the dispatcher sends the handshake to replica {replica} ({address}) in {datacenter}");
        }
        None => println!("the dispatcher drops the handshake: the routing core chose no replica"),
    }
}

fn print_artemis(view: &AddressView) {
    println!("service prefix {}", view.prefix);
    println!("  {:<40} {:<40} FROM", "SERVICE", "ADDRESS");
    for service in &view.services {
        let from = if service.from_conflict_list { "conflict list" } else { "hash" };
        println!("  {:<40} {:<40} {from}", service.name, service.address.to_string());
    }
    for problem in &view.problems {
        println!("problem: {problem}");
    }
}

fn print_data(data: &DataStatus) {
    let bgp = &data.bgp;
    println!("BGP tables: {}", bgp.state.name());
    if let Some(file) = &bgp.file {
        println!("  file {}", file.display());
    }
    if let Some(loaded) = &bgp.loaded {
        println!(
            "  serving {} routes: {} IPv4 and {} IPv6 prefixes, {} ASes, {} links (loaded in {:.1} s)",
            loaded.routes, loaded.prefixes_v4, loaded.prefixes_v6, loaded.ases, loaded.links, loaded.load_seconds
        );
        let dropped = &loaded.routes_without_origin;
        println!(
            "  routes giving no origin AS: {} default, {} too short, {} in special-purpose space",
            dropped.default_routes, dropped.too_short, dropped.special_purpose
        );
    }
    if let Some(error) = &bgp.error {
        println!("  last load failed: {error}");
    }
    println!("latency: {} measurements in use (max age {} s)", data.latency.measurements, data.latency.max_age_seconds);
}

fn print_store(store: &StoreStatus) {
    println!("store: {}, {}", store.engine.name(), store.state.name());
    if let Some(reason) = &store.reason {
        println!("  why: {reason}");
    }
    println!("  last change applied: sequence {}", store.last_sequence);
    if let Some(cache) = &store.serving_cache {
        println!("  {cache}");
    }
    if let Some(error) = &store.catch_up_error {
        println!("  the changes after it cannot be applied: {error}");
    }
}

fn print_fastpath(status: &FastPathStatus) {
    println!("kernel fast path: {}", status.state.name());
    if let Some(reason) = &status.reason {
        println!("  why: {reason}");
    }
    println!("  answers {} questions of at most {}, after {} syncs", status.entries, status.capacity, status.syncs);
    if status.admission_threshold > 0 {
        println!(
            "  above capacity: the most asked answers are in the kernel, the least of them asked {} times",
            status.admission_threshold
        );
    }
    let counts = |counts: &SyncCounts| {
        let SyncCounts { installed, updated, removed, left_out } = counts;
        format!("{installed} installed, {updated} updated, {removed} removed, {left_out} left out for want of room")
    };
    println!("  last sync: {}; in all: {}", counts(&status.last_sync), counts(&status.totals));
    if let Some(refused) = status.user_space_rate_limited {
        println!("  user space dropped {refused} UDP queries over their source's rate limit");
    }
    if let Some(error) = &status.counters_error {
        println!("  traffic counters unreadable: {error}");
    }
    println!(
        "{:<16} {:<8} {:<9} {:>12} {:>12} {:>12} {:>12} ERROR",
        "INTERFACE", "MODE", "ATTACHED", "HITS STATIC", "HITS ROUTED", "PASSED UP", "RATE-LIMITED"
    );
    for interface in &status.interfaces {
        let attached = if interface.attached { "yes" } else { "no" };
        let traffic = interface.traffic.clone().unwrap_or_default();
        println!(
            "{:<16} {:<8} {attached:<9} {:>12} {:>12} {:>12} {:>12} {}",
            interface.name,
            interface.mode,
            traffic.answered_static,
            traffic.answered_routed,
            traffic.passed_up,
            traffic.rate_limited_passed + traffic.rate_limited_dropped,
            interface.error.as_deref().unwrap_or("")
        );
        let misses: Vec<String> =
            traffic.misses.named().iter().filter(|(_, count)| *count > 0).map(|(reason, count)| format!("{reason} {count}")).collect();
        if !misses.is_empty() {
            println!("  queries passed up: {}", misses.join(", "));
        }
        let (slipped, dropped) = (traffic.rrl_slipped, traffic.rrl_dropped);
        if slipped + dropped > 0 {
            println!("  over the response rate limit: {slipped} sent truncated, {dropped} dropped");
        }
    }
}
