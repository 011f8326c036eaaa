//! `pharos`: the command line of the Pharos name service.

mod assets;
mod connect;
mod ctl;
mod dispatcher;
mod key;
mod replica;
mod sid;

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use pharos_server::check::{Depth, Finding};
use pharos_server::config::{Config, ZoneConfig};

#[derive(Parser)]
#[command(name = "pharos", about = "A request-routing authoritative name service")]
struct Cli {
    /// How log lines are written to stderr: text for people, json (one object per line) for log collectors.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "PHAROS_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Serve DNS over UDP and TCP (and TLS, HTTPS and QUIC when the config has [tls]).
    Serve(ServeArgs),
    /// Talk to a running server's control API.
    Ctl(ctl::CtlArgs),
    /// Forward local clients' DNS (UDP and TCP) to upstreams over persistent TLS or QUIC connections.
    Forward(pharos_forward::ForwardArgs),
    /// Print the Artemis service address of a name (prefix + SHA-512 bits, conflict list first).
    Sid(sid::SidArgs),
    /// Serve as an Artemis replica: a QUIC greeting and an HTTP/3 page that advertise this address and a service_ttl.
    Replica(replica::ReplicaArgs),
    /// Connect to a name as an Artemis client: its service address, then its replica; greet it.
    Connect(connect::ConnectArgs),
    /// Serve as the Artemis dispatcher: route QUIC handshakes on service addresses to replicas over VXLAN.
    Dispatcher(dispatcher::DispatcherArgs),
    /// Generate a zone's DNSSEC keys into the store; show their DNSKEY and DS records.
    Key(key::KeyArgs),
    /// Check a configuration and everything it names as `serve` would load it, without serving; every error at once.
    Check(CheckArgs),
    /// Check zone files and report the first error in each, as file:line.
    CheckZone {
        /// ORIGIN=FILE, as for `serve --zone`.
        #[arg(required = true)]
        zones: Vec<String>,
    },
    /// Write the man pages and shell completions the package ships (src/assets.rs).
    #[command(hide = true)]
    GenerateAssets(assets::AssetsArgs),
}

#[derive(Args)]
struct CheckArgs {
    /// The configuration file to check, as `serve --config` would read it.
    #[arg(long, short)]
    config: PathBuf,
    /// Print only the errors (and the summary).
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args)]
struct ServeArgs {
    /// TOML configuration file; flags below override or add to it.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Address to serve on, over UDP and TCP (repeatable), e.g. 127.0.0.1:5300 or [::1]:5300.
    #[arg(long)]
    listen: Vec<SocketAddr>,
    /// Zone to serve as ORIGIN=FILE (repeatable).
    #[arg(long)]
    zone: Vec<String>,
    /// UDP worker threads per address and TCP threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Name server identifier returned to clients that ask (RFC 5001).
    #[arg(long)]
    nsid: Option<String>,
    /// Network interface to answer on in the kernel with XDP (repeatable; adds to [fastpath] interfaces; root needed).
    #[arg(long, value_name = "IFACE")]
    xdp: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    let cli = parse_arguments();
    start_logging(cli.log_format);
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Check(args) => check(&args),
        Command::CheckZone { zones } => check_zones(&zones),
        Command::Ctl(args) => ctl::run(args),
        Command::Key(args) => key::run(args),
        Command::Forward(args) => forward(args),
        Command::Sid(args) => sid::run(args),
        Command::Replica(args) => replica::run(args),
        Command::Connect(args) => connect::run(args),
        Command::Dispatcher(args) => dispatcher::run(args),
        Command::GenerateAssets(args) => assets::run(args, <Cli as clap::CommandFactory>::command()),
    }
}

/// Log lines go to stderr (systemd's journal takes them from there), at
/// the level RUST_LOG asks for, else info; nothing per query unless asked.
fn start_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let logger = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => logger.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logger.json().flatten_event(true).with_current_span(false).init(),
    }
}

/// The command line, with `--version` saying what was built: the version,
/// the commit and whether the kernel fast path is in.
fn parse_arguments() -> Cli {
    let fast_path = if pharos_server::fast_path_built() { "built in" } else { "not built in (clang or libbpf-dev was missing)" };
    let version = format!("{} (commit {}, kernel fast path {fast_path})", env!("CARGO_PKG_VERSION"), env!("PHAROS_COMMIT"));
    let matches = Cli::command().version(version).get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit())
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let config = serve_config(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(config.threads()).enable_all().build()?;
    Ok(runtime.block_on(pharos_server::run(config))?)
}

fn serve_config(args: ServeArgs) -> anyhow::Result<Config> {
    let mut config = match &args.config {
        Some(path) => Config::from_file(path)?,
        None => Config::empty(),
    };
    if !args.listen.is_empty() {
        config.server.listen = args.listen;
    }
    for flag in &args.zone {
        config.flag_zones.push(ZoneConfig::from_flag(flag)?);
    }
    if let Some(threads) = args.threads {
        config.server.threads = threads;
    }
    if args.nsid.is_some() {
        config.server.nsid = args.nsid;
    }
    for interface in args.xdp {
        if !config.fastpath.interfaces.contains(&interface) {
            config.fastpath.interfaces.push(interface);
        }
    }
    config.validate()?;
    Ok(config)
}

fn forward(args: pharos_forward::ForwardArgs) -> anyhow::Result<()> {
    let config = args.into_config()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    Ok(runtime.block_on(pharos_forward::run(config))?)
}

/// Exits 1 if anything is wrong, after saying everything that is.
fn check(args: &CheckArgs) -> anyhow::Result<()> {
    let report = pharos_server::check::check(&args.config, Depth::Everything);
    for finding in &report.findings {
        match finding {
            Finding::Problem(_) => eprintln!("{finding}"),
            Finding::Ok(_) | Finding::Note(_) if !args.quiet => println!("{finding}"),
            Finding::Ok(_) | Finding::Note(_) => {}
        }
    }
    match report.problems() {
        0 => {
            println!("{}: ready to serve", args.config.display());
            Ok(())
        }
        problems => {
            eprintln!("{}: {problems} error(s); serve would not start with it", args.config.display());
            std::process::exit(1)
        }
    }
}

fn check_zones(zones: &[String]) -> anyhow::Result<()> {
    let mut failed = 0;
    for flag in zones {
        let zone = ZoneConfig::from_flag(flag)?;
        let file = zone.file.as_deref().expect("a --zone flag names a file");
        match pharos_zone::load_zone_file(&zone.origin, file) {
            Ok(loaded) => println!("{}: ok, {} names", file.display(), loaded.nodes.len()),
            Err(error) => {
                eprintln!("{error}");
                failed += 1;
            }
        }
    }
    anyhow::ensure!(failed == 0, "{failed} zone(s) failed to load");
    Ok(())
}
