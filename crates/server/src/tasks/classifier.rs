//! The thread that asks an external classifier process for regions.
//!
//! Protocol, one exchange per line over a TCP connection: Pharos sends a
//! subnet (`203.0.113.0/24`), the process answers with a region id (`3`);
//! `0`, anything unparsable, silence past the timeout, or a broken
//! connection all leave the subnet unclassified, and it is asked again on
//! a later query. Answers are cached until the next reload.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pharos_route::RegionId;
use pharos_route::external::{ExternalRegions, Misses, subnet_text};
use pharos_route::prefix::Bits;

use crate::config::ClassifierConfig;

/// How long to wait before connecting again after a failure.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);
/// Answers gathered for at most this long before they are published.
const PUBLISH_EVERY: Duration = Duration::from_millis(20);

/// Starts the classifier thread; returns the cache the routing core reads.
pub fn start(config: &ClassifierConfig) -> std::io::Result<Arc<ExternalRegions>> {
    let (regions, misses) = ExternalRegions::new(config.v4_prefix, config.v6_prefix);
    let asker = Asker { address: config.address, timeout: Duration::from_millis(config.timeout_ms), connection: None, failed_at: None };
    let published = regions.clone();
    std::thread::Builder::new().name("classifier".into()).spawn(move || serve(asker, &published, &misses))?;
    Ok(regions)
}

struct Asker {
    address: SocketAddr,
    timeout: Duration,
    connection: Option<BufReader<TcpStream>>,
    failed_at: Option<Instant>,
}

fn serve(mut asker: Asker, regions: &ExternalRegions, misses: &Misses) {
    while let Ok(first) = misses.recv() {
        let mut pending: HashSet<Bits> = HashSet::from([first]);
        let deadline = Instant::now() + PUBLISH_EVERY;
        while let Ok(more) = misses.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            pending.insert(more);
        }
        let answers: Vec<(Bits, RegionId)> = pending
            .into_iter()
            .filter_map(|subnet| {
                let prefix = if subnet.width == 32 { regions.v4_prefix } else { regions.v6_prefix };
                asker.ask(&subnet_text(subnet, prefix)).map(|region| (subnet, region))
            })
            .collect();
        regions.publish(&answers);
    }
}

impl Asker {
    /// The region for `subnet`, or `None` if the classifier could not say.
    fn ask(&mut self, subnet: &str) -> Option<RegionId> {
        if self.failed_at.is_some_and(|at| at.elapsed() < RECONNECT_AFTER) {
            return None;
        }
        match self.exchange(subnet) {
            Ok(region) => region,
            Err(error) => {
                tracing::warn!(%error, classifier = %self.address, "external classifier failed; clients stay unclassified");
                self.connection = None;
                self.failed_at = Some(Instant::now());
                None
            }
        }
    }

    fn exchange(&mut self, subnet: &str) -> std::io::Result<Option<RegionId>> {
        if self.connection.is_none() {
            let stream = TcpStream::connect_timeout(&self.address, self.timeout)?;
            stream.set_read_timeout(Some(self.timeout))?;
            stream.set_write_timeout(Some(self.timeout))?;
            stream.set_nodelay(true)?;
            self.connection = Some(BufReader::new(stream));
        }
        let connection = self.connection.as_mut().expect("just connected");
        connection.get_mut().write_all(format!("{subnet}\n").as_bytes())?;
        let mut line = String::new();
        if connection.read_line(&mut line)? == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the classifier closed the connection"));
        }
        Ok(line.trim().parse::<RegionId>().ok().filter(|&region| region != pharos_route::UNCLASSIFIED))
    }
}
