//! The per-source rate limit on DNS over UDP: the user-space half of the
//! fast path's limit (`[fastpath.rate_limit]`), so that neither path is an
//! amplifier. One token bucket (GCRA, as `governor` keeps it) per source
//! address, IPv6 sources by /64 (one host usually holds a whole /64),
//! shared by every UDP worker: SO_REUSEPORT spreads one source's ports
//! across workers, so per-worker buckets would multiply the rate.

use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::{DefaultKeyedRateLimiter, Quota};

/// Sources are forgotten once idle this many checks after they last
/// were: their buckets are full again, so forgetting changes nothing.
const SWEEP_EVERY: u64 = 1 << 16;

/// The limit each source gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Sustained queries per second.
    pub per_second: NonZeroU32,
    /// Queries allowed at once.
    pub burst: NonZeroU32,
}

/// The buckets of every source seen recently, and how many queries they
/// refused.
pub struct SourceLimiter {
    buckets: DefaultKeyedRateLimiter<IpAddr>,
    checks: AtomicU64,
    refused: AtomicU64,
}

impl std::fmt::Debug for SourceLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceLimiter").field("sources", &self.buckets.len()).field("refused", &self.refused()).finish()
    }
}

impl SourceLimiter {
    pub fn new(limit: RateLimit) -> SourceLimiter {
        // One token every 1/per_second s; the bucket holds `burst` of them.
        let period = Duration::from_nanos(1_000_000_000 / u64::from(limit.per_second.get())).max(Duration::from_nanos(1));
        let quota = Quota::with_period(period).expect("a period of at least 1 ns").allow_burst(limit.burst);
        SourceLimiter { buckets: DefaultKeyedRateLimiter::keyed(quota), checks: AtomicU64::new(0), refused: AtomicU64::new(0) }
    }

    /// Whether a query from `source` is within its limit (taking a token
    /// if it is).
    pub fn allows(&self, source: IpAddr) -> bool {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.sweep();
        }
        let allowed = self.buckets.check_key(&bucket_of(source)).is_ok();
        if !allowed {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        allowed
    }

    /// Forgets the sources whose buckets are full again. Memory stays
    /// bounded by the sources active in the last burst / per_second
    /// seconds, whatever a flood of forged sources does.
    fn sweep(&self) {
        self.buckets.retain_recent();
        self.buckets.shrink_to_fit();
    }

    /// Queries refused since the start.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// The key a source's bucket is kept under: an IPv4 address whole (also
/// when mapped into IPv6), an IPv6 address by its /64.
fn bucket_of(source: IpAddr) -> IpAddr {
    match source {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
        },
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(per_second: u32, burst: u32) -> SourceLimiter {
        SourceLimiter::new(RateLimit { per_second: NonZeroU32::new(per_second).unwrap(), burst: NonZeroU32::new(burst).unwrap() })
    }

    #[test]
    fn a_source_gets_its_burst_then_is_refused_and_others_are_not() {
        let limiter = limiter(1, 5);
        let source: IpAddr = "192.0.2.1".parse().unwrap();
        let allowed = (0..6).filter(|_| limiter.allows(source)).count();
        assert_eq!(allowed, 5, "the burst, and not one more within the second");
        assert_eq!(limiter.refused(), 1);
        assert!(limiter.allows("192.0.2.2".parse().unwrap()), "another source has its own bucket");
    }

    #[test]
    fn an_ipv6_slash_64_shares_one_bucket_and_mapped_ipv4_is_ipv4() {
        let limiter = limiter(1, 2);
        assert!(limiter.allows("2001:db8:0:1::1".parse().unwrap()));
        assert!(limiter.allows("2001:db8:0:1:ffff::2".parse().unwrap()));
        assert!(!limiter.allows("2001:db8:0:1::3".parse().unwrap()), "same /64: same bucket");
        assert!(limiter.allows("2001:db8:0:2::1".parse().unwrap()), "another /64");
        assert!(limiter.allows("192.0.2.9".parse().unwrap()) && limiter.allows("192.0.2.9".parse().unwrap()));
        assert!(!limiter.allows("::ffff:192.0.2.9".parse().unwrap()), "the mapped form is the same source");
    }

    #[test]
    fn idle_sources_are_forgotten() {
        let limiter = limiter(1_000_000, 1);
        for host in 0..1000u128 {
            assert!(limiter.allows(IpAddr::V6(Ipv6Addr::from(host << 64))));
        }
        assert_eq!(limiter.buckets.len(), 1000);
        // A million tokens a second: every bucket is full again within
        // microseconds, and then forgotten.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !limiter.buckets.is_empty() {
            assert!(std::time::Instant::now() < deadline, "{} buckets still kept", limiter.buckets.len());
            limiter.sweep();
        }
    }
}
