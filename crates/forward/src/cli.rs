//! `pharos forward`'s flags, and the optional TOML file they override.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::config::{
    ConfigError, DEFAULT_CONNECTIONS, DEFAULT_DEADLINE, DEFAULT_MAX_RTO, DEFAULT_MIN_RTO, DEFAULT_TRIES, ForwardConfig, UpstreamSpec,
    UpstreamSpecError,
};
use crate::rtt::RtoBounds;

/// Where a stub resolver looks for its server.
const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 53);

#[derive(clap::Args, Debug)]
pub struct ForwardArgs {
    /// TOML file whose [forward] table holds the settings below (same names, with `upstreams` a list); flags override it.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Address to serve clients on, over UDP and TCP (repeatable) [default: 127.0.0.1:53].
    #[arg(long)]
    listen: Vec<SocketAddr>,
    /// Upstream server, in order of preference (repeatable): tls://ADDRESS[:PORT][#NAME] or quic://ADDRESS[:PORT][#NAME], port 853 by default; NAME is what its certificate must be valid for.
    #[arg(long = "upstream")]
    upstreams: Vec<UpstreamSpec>,
    /// PEM file of the certificates to trust, e.g. a server's self-signed one [default: the system's CA bundle].
    #[arg(long)]
    ca: Option<PathBuf>,
    /// Name the certificates of upstreams without a #NAME must be valid for [default: the upstream's IP address].
    #[arg(long)]
    server_name: Option<String>,
    /// Connections kept open to each upstream [default: 2].
    #[arg(long)]
    connections: Option<usize>,
    /// Tries per query, the first included, each on a connection (of the pool, or of the next upstream) that does not have the query yet [default: 3].
    #[arg(long)]
    tries: Option<u32>,
    /// Floor of the retransmission timeout, in milliseconds [default: 200].
    #[arg(long)]
    min_rto_ms: Option<u64>,
    /// Ceiling of the retransmission timeout, in milliseconds [default: 2000].
    #[arg(long)]
    max_rto_ms: Option<u64>,
    /// Milliseconds a query waits for an answer before the client gets SERVFAIL [default: 5000].
    #[arg(long)]
    deadline_ms: Option<u64>,
}

/// A configuration file: the [forward] table and nothing else.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    forward: FileSettings,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileSettings {
    listen: Option<Vec<SocketAddr>>,
    upstreams: Option<Vec<String>>,
    ca: Option<PathBuf>,
    server_name: Option<String>,
    connections: Option<usize>,
    tries: Option<u32>,
    min_rto_ms: Option<u64>,
    max_rto_ms: Option<u64>,
    deadline_ms: Option<u64>,
}

/// Why the flags and their file make no configuration.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    #[error("cannot read {}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{} is not a valid forward configuration", path.display())]
    Parse { path: PathBuf, source: toml::de::Error },
    /// The `index`th of the file's `upstreams`.
    #[error("forward.upstreams[{index}]")]
    Upstream { index: usize, source: UpstreamSpecError },
    #[error(transparent)]
    Invalid(#[from] ConfigError),
}

impl ForwardArgs {
    /// The settings these flags and their file make, checked.
    pub fn into_config(self) -> Result<ForwardConfig, ArgsError> {
        let file = match &self.config {
            Some(path) => read_file(path)?,
            None => FileSettings::default(),
        };
        let file_upstreams = file.upstreams.map(parse_upstreams).transpose()?;
        let millis = |flag: Option<u64>, key: Option<u64>, default: Duration| flag.or(key).map_or(default, Duration::from_millis);
        let config = ForwardConfig {
            listen: non_empty(self.listen).or(file.listen).unwrap_or_else(|| vec![DEFAULT_LISTEN]),
            upstreams: non_empty(self.upstreams).or(file_upstreams).unwrap_or_default(),
            ca: self.ca.or(file.ca),
            server_name: self.server_name.or(file.server_name),
            connections: self.connections.or(file.connections).unwrap_or(DEFAULT_CONNECTIONS),
            tries: self.tries.or(file.tries).unwrap_or(DEFAULT_TRIES),
            rto: RtoBounds {
                min: millis(self.min_rto_ms, file.min_rto_ms, DEFAULT_MIN_RTO),
                max: millis(self.max_rto_ms, file.max_rto_ms, DEFAULT_MAX_RTO),
            },
            deadline: millis(self.deadline_ms, file.deadline_ms, DEFAULT_DEADLINE),
        };
        config.validate()?;
        Ok(config)
    }
}

fn non_empty<T>(values: Vec<T>) -> Option<Vec<T>> {
    (!values.is_empty()).then_some(values)
}

/// Reads the [forward] table of `path`; a relative `ca` is taken from the
/// file's directory, as pharos-server takes the paths in its file.
fn read_file(path: &Path) -> Result<FileSettings, ArgsError> {
    let text = std::fs::read_to_string(path).map_err(|source| ArgsError::Read { path: path.to_path_buf(), source })?;
    let mut settings = toml::from_str::<File>(&text).map_err(|source| ArgsError::Parse { path: path.to_path_buf(), source })?.forward;
    if let (Some(ca), Some(directory)) = (&settings.ca, path.parent()) {
        settings.ca = Some(directory.join(ca));
    }
    Ok(settings)
}

fn parse_upstreams(texts: Vec<String>) -> Result<Vec<UpstreamSpec>, ArgsError> {
    let parse = |(index, text): (usize, &String)| text.parse().map_err(|source| ArgsError::Upstream { index, source });
    texts.iter().enumerate().map(parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use pharos_wire::causes;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        args: ForwardArgs,
    }

    fn config_of(flags: &[&str]) -> Result<ForwardConfig, Box<dyn std::error::Error>> {
        Ok(Command::try_parse_from(std::iter::once("forward").chain(flags.iter().copied()))?.args.into_config()?)
    }

    #[test]
    fn flags_alone_with_defaults() {
        let config = config_of(&["--upstream", "tls://127.0.0.1:8853", "--upstream", "quic://127.0.0.1:8853"]).unwrap();
        assert_eq!(config.listen, [DEFAULT_LISTEN]);
        assert_eq!(config.upstreams.len(), 2);
        assert_eq!((config.connections, config.tries, config.rto.min), (DEFAULT_CONNECTIONS, DEFAULT_TRIES, DEFAULT_MIN_RTO));
        assert_eq!(config.deadline, DEFAULT_DEADLINE);
    }

    #[test]
    fn flags_override_the_file_and_paths_in_it_are_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("forward.toml");
        std::fs::write(
            &file,
            "[forward]\nupstreams = [\"quic://127.0.0.1\"]\nca = \"cert.pem\"\ntries = 5\nmin_rto_ms = 50\ndeadline_ms = 900\n",
        )
        .unwrap();
        let path = file.to_str().unwrap();
        let config = config_of(&["--config", path, "--tries", "2"]).unwrap();
        assert_eq!((config.tries, config.rto.min, config.deadline), (2, Duration::from_millis(50), Duration::from_millis(900)));
        assert_eq!(config.ca, Some(dir.path().join("cert.pem")));
        assert_eq!(config.upstreams[0].to_string(), "quic://127.0.0.1:853");
    }

    #[test]
    fn a_bad_file_or_flag_says_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("forward.toml");
        let path = file.to_str().unwrap();
        let error = |flags: &[&str]| causes(config_of(flags).unwrap_err().as_ref());
        assert!(error(&["--config", path]).contains("cannot read"));
        std::fs::write(&file, "[forward]\nupstream = [\"tls://127.0.0.1\"]\n").unwrap();
        assert!(error(&["--config", path]).contains("unknown field `upstream`"));
        std::fs::write(&file, "[forward]\nupstreams = [\"tls://127.0.0.1\", \"udp://127.0.0.1\"]\n").unwrap();
        assert!(error(&["--config", path]).contains("forward.upstreams[1]"));
        assert!(error(&["--upstream", "tls://localhost"]).contains("cannot look names up"));
        assert!(error(&[]).contains("no upstream"));
    }
}
