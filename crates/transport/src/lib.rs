//! The mechanisms of Pharos: how a client is told. DNS over UDP
//! (`udp`, batched recvmmsg/sendmmsg worker threads), TCP (`tcp`), TLS
//! (`dot`), HTTPS (`doh`) and QUIC (`doq`), and HTTP redirection
//! (`redirect`). Each is a thin loop that hands one parsed request to the
//! answer path (`pharos_answer`) or the routing core over the live
//! [`pharos_answer::SharedSnapshot`], and sends what comes back. Around them: the
//! connection registry every stream transport counts in (`registry`:
//! caps, idle timeout, shedding), the descriptor limit it is fitted under
//! (`descriptors`), the certificate and TLS setup the encrypted ones share
//! (`certificate`, `tls`), what the HTTP ones share (`http`), the
//! per-source rate limit of DNS over UDP ([`limit`]), its DNS cookies
//! ([`cookies`]) and its response rate limit ([`rrl`]), the per-thread
//! counts of what they answer ([`metrics`]), the dnstap query log
//! ([`dnstap`]), both one server's ([`Observation`]), and their settings
//! ([`config`]). [`Transports::start`] starts them all. Nothing
//! here knows the control plane: it reads the snapshot the control plane
//! publishes, and takes [`Settings`] of its own.

mod certificate;
pub mod config;
pub mod cookies;
mod descriptors;
pub mod dnstap;
mod doh;
mod doq;
mod dot;
mod http;
pub mod limit;
pub mod metrics;
pub mod proxy;
mod redirect;
mod registry;
pub mod rrl;
mod start;
mod tcp;
mod tls;
mod udp;
pub mod updates;

pub use certificate::{CertificateError, PemError, check_configured as check_certificate, generated_files as generated_certificate_files};
pub use config::Settings;
pub use descriptors::DescriptorError;
pub use doq::EndpointError;
pub use redirect::{RedirectionError, redirect_target};
pub use start::{Heartbeats, STUCK_AFTER, StartError, Transports};
pub use tcp::BindError;
pub use tls::{Tls, TlsError};

/// What one server's transports count and log: made by the server, shared
/// by every transport it starts, read by its metrics; two servers in one
/// process count and log apart.
pub struct Observation {
    pub counters: metrics::Counters,
    /// Shared with its writer thread too, which counts what it drops.
    pub query_log: std::sync::Arc<dnstap::QueryLog>,
    pub notify_inbox: NotifyInbox,
}

impl Observation {
    /// Counting into `counters`, with no query log running yet.
    pub fn new(counters: metrics::Counters) -> Observation {
        Observation { counters, query_log: std::sync::Arc::default(), notify_inbox: NotifyInbox::default() }
    }
}

/// Where the transports hand on the NOTIFYs (RFC 1996) they took for the
/// server's secondary zones: each zone's origin, to check its primary's
/// SOA at once. Never waits: when the task reading them lags, a NOTIFY is
/// dropped (its zone is checked on its timer anyway).
#[derive(Debug, Default)]
pub struct NotifyInbox(std::sync::OnceLock<tokio::sync::mpsc::Sender<Box<[u8]>>>);

impl NotifyInbox {
    /// Hands the NOTIFYs taken from now on to `sender` (once).
    pub fn connect(&self, sender: tokio::sync::mpsc::Sender<Box<[u8]>>) {
        if self.0.set(sender).is_err() {
            tracing::warn!("the NOTIFY inbox was connected twice; the first reader keeps it");
        }
    }

    /// Hands on the zone of `query` from `client` if it is a NOTIFY that
    /// `answered` took (NOERROR).
    pub(crate) fn take(
        &self,
        query: &pharos_answer::Query<'_>,
        answered: &pharos_answer::Answered<'_>,
        client: std::net::IpAddr,
        snapshot: &pharos_answer::Snapshot,
    ) {
        if query.opcode() != pharos_wire::query::OPCODE_NOTIFY || answered.rcode != pharos_wire::rcode::NOERROR {
            return;
        }
        let (Some(sender), Ok(zone)) = (self.0.get(), pharos_answer::notified_zone(query, client, &snapshot.settings.notify_acls)) else {
            return;
        };
        if sender.try_send(zone.into()).is_err() {
            tracing::debug!(zone = %pharos_wire::name::Display(zone), "NOTIFY dropped: the secondary zones' task lags");
        }
    }
}

/// `time` in Unix seconds, as TSIG signs with it (RFC 8945) and dnstap
/// logs it.
pub(crate) fn unix_seconds(time: std::time::SystemTime) -> u64 {
    time.duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_secs())
}

/// The time a signed query is checked and answered at: read only for a
/// query that carries a TSIG record, so that an unsigned one reads no clock.
pub(crate) fn tsig_time(parsed: &Result<pharos_answer::Query<'_>, pharos_answer::Reject<'_>>) -> u64 {
    if pharos_answer::is_signed(parsed) { unix_seconds(std::time::SystemTime::now()) } else { 0 }
}
