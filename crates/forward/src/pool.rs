//! An upstream's pool started: a task per connection slot, over DNS over
//! TLS or over QUIC as its spec says, each connecting at its first query.

use std::sync::Arc;

use crate::config::{ForwardConfig, Protocol, UpstreamSpec};
use crate::error::ForwardError;
use crate::slot::{self, PoolSlot};
use crate::stats::Stats;
use crate::trust::Trust;
use crate::upstream::Upstream;
use crate::{doq, dot};

/// Starts the pool of the upstream `spec`.
pub fn start(spec: UpstreamSpec, config: &ForwardConfig, trust: &Trust, stats: Arc<Stats>) -> Result<Arc<Upstream>, ForwardError> {
    let server_name = config.server_name_of(&spec);
    let (upstream, queues) = Upstream::new(spec, config, stats);
    for (index, queue) in queues.into_iter().enumerate() {
        let tls = trust.client_tls(upstream.spec.protocol)?;
        let address = upstream.spec.address;
        let pool_slot = PoolSlot { upstream: upstream.clone(), index };
        match upstream.spec.protocol {
            Protocol::Tls => tokio::spawn(slot::run(dot::DotTransport::new(address, &server_name, tls)?, pool_slot, queue)),
            Protocol::Quic => tokio::spawn(slot::run(doq::DoqTransport::new(address, &server_name, tls)?, pool_slot, queue)),
        };
    }
    Ok(upstream)
}
