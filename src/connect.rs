//! `pharos connect`: an Artemis client for tests and demonstrations.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use pharos_artemis::service_id::{CanonicalName, ServicePrefix};
use pharos_artemis_quic::client::{ArtemisClient, Route};
use pharos_artemis_quic::replica::ALPN;
use pharos_artemis_quic::tls::client_config;

#[derive(Args)]
pub struct ConnectArgs {
    /// The service's host name.
    name: String,
    /// The operator's service prefix, as for `pharos sid`.
    #[arg(long)]
    prefix: ServicePrefix,
    /// Conflict list, as for `pharos sid`.
    #[arg(long)]
    conflicts: Option<PathBuf>,
    /// The service's UDP port.
    #[arg(long, default_value_t = 443)]
    port: u16,
    /// A certificate (DER) to trust, as `pharos replica --cert-out` wrote it (repeatable).
    #[arg(long, required = true)]
    ca: Vec<PathBuf>,
    /// Connections to make one after another (later ones may go straight to the replica).
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// A DNS server (Pharos, ADDRESS:PORT) whose lookup of the name races the service address.
    #[arg(long)]
    race_dns: Option<SocketAddr>,
}

/// One line per connection: where it went, then the replica's greeting.
pub fn run(args: ConnectArgs) -> anyhow::Result<()> {
    let name = CanonicalName::new(&args.name)?;
    let addresses = crate::sid::service_id_map(args.prefix, args.conflicts.as_deref())?;
    let mut roots = rustls::RootCertStore::empty();
    for path in &args.ca {
        let certificate = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        roots.add(certificate.into()).with_context(|| format!("{} is not a certificate", path.display()))?;
    }
    let mut client = ArtemisClient::new(addresses, args.port, client_config(roots, ALPN));
    if let Some(server) = args.race_dns {
        client = client.race_dns(server);
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        for _ in 0..args.repeat {
            let mut connected = client.connect(&name, Instant::now()).await?;
            // The request leaves at once, through the service address; the
            // move to the replica happens meanwhile.
            let (mut send, mut receive) = connected.connection.open_bi().await?;
            send.finish()?;
            let greeting = receive.read_to_end(4096).await?;
            let moved_to = connected.settled().await?;
            println!("{} {}", describe(&connected.route, moved_to), String::from_utf8_lossy(&greeting).trim_end());
            connected.connection.close(0u32.into(), b"done");
        }
        anyhow::Ok(())
    })
}

fn describe(route: &Route, moved_to: Option<SocketAddr>) -> String {
    match (route, moved_to) {
        (Route::Service { service, service_ttl, .. }, Some(replica)) => {
            let ttl = service_ttl.map_or("none".into(), |ttl| ttl.as_secs().to_string());
            format!("via {service} moved to {replica} ttl {ttl}:")
        }
        (Route::Service { service, .. }, None) => format!("via {service}:"),
        (Route::Cached { replica }, _) => format!("straight to {replica}:"),
        (Route::Dns { server, address }, _) => format!("by DNS through {server} to {address}:"),
    }
}
