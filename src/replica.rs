//! `pharos replica`: an Artemis replica for tests and demonstrations.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use pharos_artemis_quic::replica::{Replica, ReplicaConfig};

#[derive(Args)]
pub struct ReplicaArgs {
    /// This replica's own unicast address and port, advertised as the preferred address (port 0: any).
    #[arg(long)]
    listen: SocketAddr,
    /// The service address clients reach through the dispatcher (held on a local interface).
    #[arg(long)]
    service_address: IpAddr,
    /// The id its connection IDs carry, as the dispatcher's topology names it.
    #[arg(long)]
    replica_id: u16,
    /// Seconds a client may connect straight to this replica (service_ttl).
    #[arg(long)]
    ttl: u64,
    /// The name its self-signed certificate is for.
    #[arg(long, default_value = "localhost")]
    name: String,
    /// Where to write that certificate (DER), for clients to trust.
    #[arg(long)]
    cert_out: Option<PathBuf>,
}

/// Prints the port it serves on, then serves until killed, with one line
/// per handshake: client -> the address it reached: ALPN.
pub fn run(args: ReplicaArgs) -> anyhow::Result<()> {
    let config = ReplicaConfig {
        replica_id: args.replica_id,
        service_address: args.service_address,
        preferred_address: args.listen,
        service_ttl: Duration::from_secs(args.ttl),
        server_name: args.name,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let replica = Replica::bind(&config)?;
        if let Some(path) = &args.cert_out {
            std::fs::write(path, replica.certificate()).with_context(|| format!("writing {}", path.display()))?;
        }
        println!("{}", replica.local_addr()?.port());
        replica
            .serve(|connected| {
                let local = connected.local.map_or("?".into(), |address| address.to_string());
                // A line for whoever watches; one who stopped reading must not
                // stop the replica (println! would panic on a closed pipe).
                let _ = writeln!(std::io::stdout(), "{} -> {local}: {}", connected.client, String::from_utf8_lossy(&connected.alpn));
            })
            .await;
        Ok(())
    })
}
