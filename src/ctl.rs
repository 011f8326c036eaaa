//! `pharos ctl`: the command-line client of the control API. Tables for
//! people by default, the API's JSON with `--json`.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

#[derive(Args)]
pub struct CtlArgs {
    /// Base URL of the control API.
    #[arg(long, default_value = "http://127.0.0.1:5380", env = "PHAROS_API")]
    api: String,
    /// Bearer token (printed by `pharos serve` at first start).
    #[arg(long, env = "PHAROS_TOKEN", hide_env_values = true)]
    token: Option<String>,
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
}

pub fn run(args: CtlArgs) -> anyhow::Result<()> {
    let client = Client { base: args.api.trim_end_matches('/').to_string(), token: args.token };
    let reply = match &args.command {
        CtlCommand::Regions => client.call("GET", "/v1/regions", None)?,
        CtlCommand::RegionAdd { name, prefixes } => {
            client.call("POST", "/v1/regions", Some(json!({ "name": name, "prefixes": prefixes })))?
        }
        CtlCommand::RegionRemove { name } => client.call("DELETE", &format!("/v1/regions/{name}"), None)?,
        CtlCommand::Services => client.call("GET", "/v1/services", None)?,
        CtlCommand::Service { name } => client.call("GET", &format!("/v1/services/{name}"), None)?,
        CtlCommand::ServicePut { file } => {
            let service = read_json(file)?;
            let name = service["name"].as_str().context("the service file has no \"name\"")?.to_string();
            client.call("PUT", &format!("/v1/services/{name}"), Some(service))?
        }
        CtlCommand::ServiceDelete { name } => client.call("DELETE", &format!("/v1/services/{name}"), None)?,
        CtlCommand::Probabilities { name, file } => {
            client.call("PUT", &format!("/v1/services/{name}/probabilities"), Some(read_json(file)?))?
        }
        CtlCommand::Replica { service, id, enable, disable, down, up, weight, priority } => {
            let mut patch = serde_json::Map::new();
            if *enable || *disable {
                patch.insert("enabled".into(), json!(*enable));
            }
            if *down || *up {
                patch.insert("down".into(), json!(*down));
            }
            if let Some(weight) = weight {
                patch.insert("weight".into(), json!(weight));
            }
            if let Some(priority) = priority {
                patch.insert("priority".into(), json!(priority));
            }
            if patch.is_empty() {
                bail!("nothing to change: give --enable, --disable, --down, --up, --weight or --priority");
            }
            client.call("PATCH", &format!("/v1/services/{service}/replicas/{id}"), Some(Value::Object(patch)))?
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
        CtlCommand::Export => return client.text("/v1/export").map(|text| print!("{text}")),
        CtlCommand::Reload => client.call("POST", "/v1/reload", None)?,
        CtlCommand::Measurements { file } => client.call("POST", "/v1/measurements", Some(read_measurements(file)?))?,
        CtlCommand::Data => client.call("GET", "/v1/data", None)?,
        CtlCommand::Fastpath => client.call("GET", "/v1/fastpath", None)?,
        CtlCommand::Artemis => client.call("GET", "/v1/artemis", None)?,
        CtlCommand::Status => client.call("GET", "/v1/store", None)?,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reply)?);
    } else {
        print_human(&args.command, &reply);
    }
    Ok(())
}

/// Reads `subnet,datacenter,rtt_ms[,measured_at]` lines ('#' starts a
/// comment) as the API's measurement list.
fn read_measurements(file: &PathBuf) -> anyhow::Result<Value> {
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
        let mut measurement = json!({ "subnet": subnet, "datacenter": datacenter, "rtt_ms": rtt_ms });
        match rest {
            [] => {}
            [measured_at] => {
                let measured_at: u64 = measured_at.parse().with_context(|| format!("{}: {measured_at:?} is not Unix seconds", at()))?;
                measurement["measured_at"] = json!(measured_at);
            }
            _ => bail!("{}: too many fields in {line:?}", at()),
        }
        measurements.push(measurement);
    }
    Ok(Value::Array(measurements))
}

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

struct Client {
    base: String,
    token: Option<String>,
}

impl Client {
    fn agent() -> ureq::Agent {
        ureq::Agent::config_builder().http_status_as_error(false).build().into()
    }

    /// Sends a request; a non-2xx reply becomes an error with the API's message.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let request = ureq::http::Request::builder()
            .method(method)
            .uri(&url)
            .header("Authorization", format!("Bearer {}", self.token.as_deref().unwrap_or("")));
        let agent = Self::agent();
        let response = match body {
            Some(body) => agent.run(request.header("Content-Type", "application/json").body(body.to_string())?),
            None => agent.run(request.body(())?),
        }
        .with_context(|| format!("cannot reach the control API at {}", self.base))?;
        let status = response.status();
        let text = response.into_body().read_to_string()?;
        let value: Value = if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or(Value::String(text)) };
        if !status.is_success() {
            let field = value["field"].as_str().map(|field| format!(" ({field})")).unwrap_or_default();
            bail!("{status}: {}{field}", value["error"].as_str().unwrap_or("request failed"));
        }
        Ok(value)
    }

    fn text(&self, path: &str) -> anyhow::Result<String> {
        match self.call("GET", path, None)? {
            Value::String(text) => Ok(text),
            other => Ok(other.to_string()),
        }
    }
}

fn print_human(command: &CtlCommand, reply: &Value) {
    match command {
        CtlCommand::Regions => {
            println!("{:>4}  {:<16} PREFIXES", "ID", "NAME");
            for region in reply.as_array().into_iter().flatten() {
                let prefixes: Vec<&str> = region["prefixes"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                println!("{:>4}  {:<16} {}", region["id"], region["name"].as_str().unwrap_or(""), prefixes.join(" "));
            }
        }
        CtlCommand::RegionAdd { name, .. } => println!("region {name} added with id {}", reply["id"]),
        CtlCommand::Services => {
            println!("{:<32} {:<22} {:>6} REPLICAS", "NAME", "POLICY", "TTL");
            for service in reply.as_array().into_iter().flatten() {
                let replicas = service["replica"].as_array().map_or(0, Vec::len);
                println!(
                    "{:<32} {:<22} {:>6} {replicas}",
                    service["name"].as_str().unwrap_or(""),
                    service["policy"].as_str().unwrap_or(""),
                    service["ttl"]
                );
            }
        }
        CtlCommand::Service { .. } => {
            println!("{} (policy {}, TTL {})", reply["name"].as_str().unwrap_or(""), reply["policy"].as_str().unwrap_or(""), reply["ttl"]);
            println!("  {:<12} {:<40} {:>6} {:>8} STATE", "REPLICA", "ADDRESS", "WEIGHT", "PRIORITY");
            for replica in reply["replica"].as_array().into_iter().flatten() {
                let state = match (replica["enabled"].as_bool(), replica["down"].as_bool()) {
                    (Some(false), _) => "disabled",
                    (_, Some(true)) => "marked down",
                    _ => "serving",
                };
                let id = replica["id"].as_str().unwrap_or("");
                println!(
                    "  {id:<12} {:<40} {:>6} {:>8} {state}",
                    replica["address"].as_str().unwrap_or(""),
                    replica["weight"],
                    replica["priority"]
                );
            }
        }
        CtlCommand::Explain { .. } => {
            for (number, step) in reply["steps"].as_array().into_iter().flatten().enumerate() {
                println!("{}. {}", number + 1, step.as_str().unwrap_or(""));
            }
            println!("{}", reply["fast_path"].as_str().unwrap_or(""));
            if let Some(pick) = reply.get("artemis") {
                print_dispatcher_pick(pick);
            }
        }
        CtlCommand::Artemis => print_artemis(reply),
        CtlCommand::Measurements { .. } => println!("{} measurements kept", reply["accepted"]),
        CtlCommand::Data => print_data(reply),
        CtlCommand::Fastpath => print_fastpath(reply),
        CtlCommand::Status => print_store(reply),
        _ => println!("ok"),
    }
}

fn print_dispatcher_pick(pick: &Value) {
    let (service_address, service) = (pick["service_address"].as_str().unwrap_or(""), pick["service"].as_str().unwrap_or(""));
    println!("{service_address} is the Artemis service address of {service}");
    match pick["replica"].as_str() {
        Some(replica) => {
            let datacenter = pick["datacenter"].as_str().map_or("no declared data center".to_owned(), |name| format!("data center {name}"));
            println!(
                "the dispatcher sends the handshake to replica {replica} ({}) in {datacenter}",
                pick["replica_address"].as_str().unwrap_or("")
            );
        }
        None => println!("the dispatcher drops the handshake: the routing core chose no replica"),
    }
}

fn print_artemis(reply: &Value) {
    println!("service prefix {}", reply["prefix"].as_str().unwrap_or(""));
    println!("  {:<40} {:<40} FROM", "SERVICE", "ADDRESS");
    for service in reply["services"].as_array().into_iter().flatten() {
        let from = if service["from_conflict_list"].as_bool() == Some(true) { "conflict list" } else { "hash" };
        println!("  {:<40} {:<40} {from}", service["name"].as_str().unwrap_or(""), service["address"].as_str().unwrap_or(""));
    }
    for problem in reply["problems"].as_array().into_iter().flatten() {
        println!("problem: {}", problem.as_str().unwrap_or(""));
    }
}

fn print_data(reply: &Value) {
    let bgp = &reply["bgp"];
    println!("BGP tables: {}", bgp["state"].as_str().unwrap_or("?"));
    if let Some(file) = bgp["file"].as_str() {
        println!("  file {file}");
    }
    let loaded = &bgp["loaded"];
    if loaded.is_object() {
        println!(
            "  serving {} routes: {} IPv4 and {} IPv6 prefixes, {} ASes, {} links (loaded in {:.1} s)",
            loaded["routes"],
            loaded["prefixes_v4"],
            loaded["prefixes_v6"],
            loaded["ases"],
            loaded["links"],
            loaded["load_seconds"].as_f64().unwrap_or(0.0)
        );
        let dropped = &loaded["routes_without_origin"];
        println!(
            "  routes giving no origin AS: {} default, {} too short, {} in special-purpose space",
            dropped["default_routes"], dropped["too_short"], dropped["special_purpose"]
        );
    }
    if let Some(error) = bgp["error"].as_str() {
        println!("  last load failed: {error}");
    }
    let latency = &reply["latency"];
    println!("latency: {} measurements in use (max age {} s)", latency["measurements"], latency["max_age_seconds"]);
}

fn print_store(reply: &Value) {
    println!("store: {}, {}", reply["engine"].as_str().unwrap_or("?"), reply["state"].as_str().unwrap_or("?"));
    if let Some(reason) = reply["reason"].as_str() {
        println!("  why: {reason}");
    }
    println!("  last change applied: sequence {}", reply["last_sequence"]);
    if let Some(cache) = reply["serving_cache"].as_str() {
        println!("  {cache}");
    }
    if let Some(error) = reply["catch_up_error"].as_str() {
        println!("  the changes after it cannot be applied: {error}");
    }
}

fn print_fastpath(reply: &Value) {
    println!("kernel fast path: {}", reply["state"].as_str().unwrap_or("?"));
    if let Some(reason) = reply["reason"].as_str() {
        println!("  why: {reason}");
    }
    println!("  answers {} questions of at most {}, after {} syncs", reply["entries"], reply["capacity"], reply["syncs"]);
    if let Some(threshold) = reply["admission_threshold"].as_u64().filter(|&threshold| threshold > 0) {
        println!("  above capacity: the most asked answers are in the kernel, the least of them asked {threshold} times");
    }
    let counts = |counts: &Value| {
        let (installed, updated, removed, left_out) = (&counts["installed"], &counts["updated"], &counts["removed"], &counts["left_out"]);
        format!("{installed} installed, {updated} updated, {removed} removed, {left_out} left out for want of room")
    };
    println!("  last sync: {}; in all: {}", counts(&reply["last_sync"]), counts(&reply["totals"]));
    if let Some(refused) = reply["user_space_rate_limited"].as_u64() {
        println!("  user space dropped {refused} UDP queries over their source's rate limit");
    }
    if let Some(error) = reply["counters_error"].as_str() {
        println!("  traffic counters unreadable: {error}");
    }
    println!(
        "{:<16} {:<8} {:<9} {:>12} {:>12} {:>12} {:>12} ERROR",
        "INTERFACE", "MODE", "ATTACHED", "HITS STATIC", "HITS ROUTED", "PASSED UP", "RATE-LIMITED"
    );
    for interface in reply["interfaces"].as_array().into_iter().flatten() {
        let attached = if interface["attached"].as_bool() == Some(true) { "yes" } else { "no" };
        let traffic = &interface["traffic"];
        let count = |key: &str| traffic[key].as_u64().unwrap_or(0);
        println!(
            "{:<16} {:<8} {attached:<9} {:>12} {:>12} {:>12} {:>12} {}",
            interface["name"].as_str().unwrap_or(""),
            interface["mode"].as_str().unwrap_or(""),
            count("answered_static"),
            count("answered_routed"),
            count("passed_up"),
            count("rate_limited_passed") + count("rate_limited_dropped"),
            interface["error"].as_str().unwrap_or("")
        );
        let misses: Vec<String> = traffic["misses"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, count)| count.as_u64() > Some(0))
            .map(|(reason, count)| format!("{reason} {count}"))
            .collect();
        if !misses.is_empty() {
            println!("  queries passed up: {}", misses.join(", "));
        }
        let (slipped, dropped) = (count("rrl_slipped"), count("rrl_dropped"));
        if slipped + dropped > 0 {
            println!("  over the response rate limit: {slipped} sent truncated, {dropped} dropped");
        }
    }
}
