//! `pharos dispatcher`: the Artemis Service Dispatcher on sockets.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use pharos_artemis_quic::dispatcher::{DispatcherConfig, SocketDispatcher};

#[derive(Args)]
pub struct DispatcherArgs {
    /// TOML: port, prefix, vni, datacenter, tunnel_port, tunnel_key or tunnel_key_file, [[peer]] datacenter, address, [[service]] name, [[service.replica]] id, datacenter, address, vtep, mac, weight.
    #[arg(long)]
    config: PathBuf,
}

/// Prints its port, then one line per datagram: client, service address, what became of it.
pub fn run(args: DispatcherArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.config).with_context(|| format!("reading {}", args.config.display()))?;
    let config = DispatcherConfig::parse(&text).with_context(|| format!("{}", args.config.display()))?;
    let mut dispatcher = SocketDispatcher::bind(&config).map_err(|error| anyhow::anyhow!(error))?;
    println!("{}", dispatcher.local_addr()?.port());
    dispatcher.run(|handled| {
        let service = handled.service_address.map_or("?".into(), |address| address.to_string());
        println!("{} -> {service}: {}", handled.client, handled.outcome);
    })?;
    Ok(())
}
