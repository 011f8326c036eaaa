//! File descriptors: every open connection holds one, and a process may
//! hold no more than its soft RLIMIT_NOFILE, often 1024 by default however
//! high the hard limit. At start the soft limit is raised to the hard one,
//! and the connection cap is fitted under it, so that connections over it
//! are shed at the cap, not left waiting for an accept that finds no
//! descriptor.

use std::io;

use crate::config::{Settings, TcpConfig};

/// Descriptors kept for what is not a client connection nor a listener:
/// the runtime, the log, the store, address data, the control API's
/// connections, health probes, and a connection accepted before the one
/// it sheds has closed.
const KEPT_FOR_OTHER_USES: u64 = 128;

/// Why the descriptors allow no connection.
#[derive(Debug, thiserror::Error)]
pub enum DescriptorError {
    #[error("cannot read RLIMIT_NOFILE")]
    ReadLimit(#[source] io::Error),
    #[error(
        "RLIMIT_NOFILE is {descriptors}, too low for any connection beside the {kept} descriptors kept for listeners \
         and the rest: raise the hard limit (ulimit -Hn, or LimitNOFILE= for systemd)"
    )]
    TooFew { descriptors: u64, kept: u64 },
}

/// The `[tcp]` limits of `settings` with the connection cap lowered, if
/// need be, to what the descriptors allow once the soft limit is raised.
/// An error if they allow no connection at all.
pub fn fit_connection_cap(settings: &Settings) -> Result<TcpConfig, DescriptorError> {
    let descriptors = raise_soft_limit()?;
    let limits = cap_within(settings.tcp.clone(), descriptors, KEPT_FOR_OTHER_USES + settings.listening_sockets() as u64)?;
    tracing::info!(
        max_connections = limits.max_connections,
        max_connections_per_client = limits.max_connections_per_client,
        "connection caps"
    );
    Ok(limits)
}

/// `limits` with the connection cap lowered to fit in `descriptors` with
/// `kept` of them left for other uses.
fn cap_within(mut limits: TcpConfig, descriptors: u64, kept: u64) -> Result<TcpConfig, DescriptorError> {
    let room = usize::try_from(descriptors.saturating_sub(kept)).unwrap_or(usize::MAX);
    if room == 0 {
        return Err(DescriptorError::TooFew { descriptors, kept });
    }
    if limits.max_connections > room {
        tracing::warn!(
            "tcp.max_connections = {} does not fit in RLIMIT_NOFILE {descriptors} beside the {kept} descriptors kept for \
             listeners and the rest: at most {room} connections (raise the hard limit to allow more)",
            limits.max_connections
        );
        limits.max_connections = room;
    }
    Ok(limits)
}

/// Raises the soft RLIMIT_NOFILE to the hard limit, and returns the soft
/// limit now in force. A limit that cannot be raised is logged and kept.
fn raise_soft_limit() -> Result<u64, DescriptorError> {
    let limit = nofile_limit().map_err(DescriptorError::ReadLimit)?;
    if limit.rlim_cur >= limit.rlim_max {
        tracing::info!(descriptors = limit.rlim_cur, "RLIMIT_NOFILE is at its hard limit");
        return Ok(limit.rlim_cur);
    }
    match set_nofile_limit(libc::rlimit { rlim_cur: limit.rlim_max, ..limit }) {
        Ok(()) => {
            tracing::info!(from = limit.rlim_cur, to = limit.rlim_max, "raised the soft RLIMIT_NOFILE to the hard limit");
            Ok(limit.rlim_max)
        }
        Err(error) => {
            tracing::warn!(%error, descriptors = limit.rlim_cur, "cannot raise the soft RLIMIT_NOFILE to the hard limit {}", limit.rlim_max);
            Ok(limit.rlim_cur)
        }
    }
}

fn nofile_limit() -> io::Result<libc::rlimit> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit through a valid pointer.
    match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } {
        0 => Ok(limit),
        _ => Err(io::Error::last_os_error()),
    }
}

fn set_nofile_limit(limit: libc::rlimit) -> io::Result<()> {
    // SAFETY: setrlimit reads one rlimit through a valid pointer.
    match unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_cap(max_connections: usize) -> TcpConfig {
        TcpConfig { max_connections, ..TcpConfig::default() }
    }

    #[test]
    fn a_cap_that_fits_is_kept_and_one_that_does_not_is_lowered() {
        assert_eq!(cap_within(with_cap(800), 1024, 200).unwrap().max_connections, 800);
        assert_eq!(cap_within(with_cap(824), 1024, 200).unwrap().max_connections, 824);
        assert_eq!(cap_within(with_cap(10_000), 1024, 200).unwrap().max_connections, 824);
        assert_eq!(cap_within(with_cap(10_000), 1024, 200).unwrap().max_connections_per_client, 64, "untouched");
    }

    #[test]
    fn descriptors_for_no_connection_at_all_are_an_error() {
        let error = cap_within(with_cap(10), 200, 200).unwrap_err().to_string();
        assert!(error.contains("RLIMIT_NOFILE is 200") && error.contains("raise the hard limit"), "{error}");
    }
}
