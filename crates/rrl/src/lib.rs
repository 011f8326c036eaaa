//! Response rate limiting (RRL), in the style of Knot DNS and BIND: an
//! authoritative server answering forged-source UDP queries is an
//! amplifier aimed at whoever owns the forged address, so it limits how
//! many *alike responses* it sends to one network per second.
//!
//! - [`Limiter`]: the table of token buckets, bounded in size, shared by
//!   every UDP worker (sharded locks); [`Limiter::check`] takes the time
//!   as an argument, so it has no clock and no I/O and is tested with a
//!   made-up one.
//! - [`Class`]: what makes responses alike (BIND's and Knot's classes):
//!   answers by name and type, referrals and NXDOMAIN by zone (a flood of
//!   random names in one zone is one flood), errors by source alone.
//! - [`Limits`]: the rate, SLIP (every Nth limited response goes out
//!   truncated, TC=1, so a real client behind the prefix retries over TCP,
//!   which cannot be forged) and the whitelist.
//! - [`Counters`]: what it limited since the start.
//!
//! Sources are bucketed by /24 (IPv4) and /56 (IPv6), as BIND does by
//! default: a forger holds a network, not one address.

use std::hash::Hasher;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use pharos_route::prefix::PrefixMap;
use siphasher::sip::SipHasher13;

/// Independent locks over the table: UDP workers rarely wait on each other.
const SHARDS: usize = 16;
/// Slots looked at for a key before an old one is taken over.
const PROBE: usize = 4;
/// Leading bits of an IPv4 source that make its bucket.
const IPV4_PREFIX: u32 = 24;
/// Leading bits of an IPv6 source that make its bucket.
const IPV6_PREFIX: u32 = 56;
const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// What a response is, for the bucket it is counted in. Names are wire
/// names in lowercase, so that a client's 0x20 mixed case does not make a
/// new bucket per spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class<'a> {
    /// Records (or NODATA) for this name and type.
    Answer { qname: &'a [u8], qtype: u16 },
    /// A delegation out of `zone`.
    Referral { zone: &'a [u8] },
    /// A name that `zone` does not have.
    NxDomain { zone: &'a [u8] },
    /// FORMERR, REFUSED, SERVFAIL and the like.
    Error,
}

impl Class<'_> {
    /// A tag that keeps keys of different classes apart.
    fn tag(&self) -> u8 {
        match self {
            Class::Answer { .. } => 0,
            Class::Referral { .. } => 1,
            Class::NxDomain { .. } => 2,
            Class::Error => 3,
        }
    }
}

/// What to do with a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Send,
    /// Over the limit, but this one goes out as an empty truncated response.
    Slip,
    /// Over the limit: no response.
    Drop,
}

/// The operator's settings.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Alike responses per second to one source prefix; the bucket holds
    /// one second's worth, as Knot's does.
    pub rate: NonZeroU32,
    /// Every `slip`th limited response of a bucket is slipped (1: all of
    /// them; 0: none, every limited response is dropped).
    pub slip: u32,
    /// Buckets kept at most; when it is full, the longest idle is reused.
    pub table_size: NonZeroU32,
    /// Sources never limited.
    pub whitelist: PrefixMap<()>,
}

/// What the limiter did since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Limited responses sent as TC=1 instead.
    pub slipped: u64,
    /// Limited responses not sent at all.
    pub dropped: u64,
}

/// One bucket.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// The key's hash with its lowest bit set; 0 marks an empty slot.
    fingerprint: u64,
    /// When the bucket would be full again (GCRA's theoretical arrival
    /// time): each response pushes it one interval into the future.
    full_at: u64,
    /// Responses limited since the bucket was made, for SLIP.
    limited: u32,
}

/// The buckets, and the settings they are kept by.
#[derive(Debug)]
pub struct Limiter {
    /// Nanoseconds one token takes to come back.
    interval: u64,
    /// Nanoseconds of tokens a bucket holds.
    depth: u64,
    slip: u32,
    whitelist: PrefixMap<()>,
    keys: (u64, u64),
    shards: Box<[Mutex<Box<[Slot]>>]>,
    slipped: AtomicU64,
    dropped: AtomicU64,
}

impl Limiter {
    /// A limiter with empty buckets. `hash_keys` key the hash of bucket
    /// keys: random in a server, so that no one can aim many keys at one
    /// slot; fixed in a test.
    pub fn new(limits: Limits, hash_keys: (u64, u64)) -> Limiter {
        let interval = (NANOS_PER_SECOND / u64::from(limits.rate.get())).max(1);
        let per_shard = (limits.table_size.get() as usize).div_ceil(SHARDS).max(PROBE);
        Limiter {
            interval,
            depth: interval * u64::from(limits.rate.get()),
            slip: limits.slip,
            whitelist: limits.whitelist,
            keys: hash_keys,
            shards: (0..SHARDS).map(|_| Mutex::new(vec![Slot::default(); per_shard].into_boxed_slice())).collect(),
            slipped: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Counts a response of `class` to `source` at `now` (nanoseconds on
    /// any clock that never goes back) and says whether to send it.
    pub fn check(&self, source: IpAddr, class: Class<'_>, now: u64) -> Verdict {
        if self.whitelist.lookup(source).value.is_some() {
            return Verdict::Send;
        }
        let hash = self.key_hash(source, class);
        let verdict = {
            let mut shard = self.shards[(hash % SHARDS as u64) as usize].lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let slot = find_or_take(&mut shard, hash, now);
            self.take_token(slot, now)
        };
        match verdict {
            Verdict::Send => {}
            Verdict::Slip => _ = self.slipped.fetch_add(1, Ordering::Relaxed),
            Verdict::Drop => _ = self.dropped.fetch_add(1, Ordering::Relaxed),
        }
        verdict
    }

    /// What was limited so far.
    pub fn counters(&self) -> Counters {
        Counters { slipped: self.slipped.load(Ordering::Relaxed), dropped: self.dropped.load(Ordering::Relaxed) }
    }

    fn take_token(&self, slot: &mut Slot, now: u64) -> Verdict {
        let full_at = slot.full_at.max(now) + self.interval;
        if full_at - now <= self.depth {
            slot.full_at = full_at;
            return Verdict::Send;
        }
        slot.limited = slot.limited.wrapping_add(1);
        if self.slip != 0 && slot.limited.is_multiple_of(self.slip) { Verdict::Slip } else { Verdict::Drop }
    }

    fn key_hash(&self, source: IpAddr, class: Class<'_>) -> u64 {
        let mut hasher = SipHasher13::new_with_keys(self.keys.0, self.keys.1);
        hasher.write_u128(source_prefix(source));
        hasher.write_u8(class.tag());
        match class {
            Class::Answer { qname, qtype } => {
                hasher.write(qname);
                hasher.write_u16(qtype);
            }
            Class::Referral { zone } | Class::NxDomain { zone } => hasher.write(zone),
            Class::Error => {}
        }
        hasher.finish()
    }
}

/// The slot of key `hash` in `shard`: its own if it has one, else an empty
/// one or the one that has been full longest among those it may take,
/// made over for it.
fn find_or_take(shard: &mut [Slot], hash: u64, now: u64) -> &mut Slot {
    let fingerprint = hash | 1;
    let start = ((hash >> 32) % shard.len() as u64) as usize;
    let window = (0..PROBE).map(|step| (start + step) % shard.len());
    let mut chosen = start;
    for index in window {
        let slot = &shard[index];
        if slot.fingerprint == fingerprint {
            return &mut shard[index];
        }
        if slot.fingerprint == 0 || (shard[chosen].fingerprint != 0 && slot.full_at < shard[chosen].full_at) {
            chosen = index;
        }
    }
    shard[chosen] = Slot { fingerprint, full_at: now, limited: 0 };
    &mut shard[chosen]
}

/// The network a source is counted in, with its family: an IPv4 address
/// (also when mapped into IPv6) by its /24, an IPv6 one by its /56.
fn source_prefix(source: IpAddr) -> u128 {
    match source.to_canonical() {
        IpAddr::V4(v4) => u128::from(u32::from(v4) >> (32 - IPV4_PREFIX)),
        // The top bit keeps IPv6 prefixes apart from IPv4 ones.
        IpAddr::V6(v6) => (1 << 127) | (u128::from(v6) >> (128 - IPV6_PREFIX)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = NANOS_PER_SECOND;
    const ANSWER: Class<'static> = Class::Answer { qname: b"\x03www\x07example\x00", qtype: 1 };

    fn limiter(rate: u32, slip: u32, table_size: u32) -> Limiter {
        let limits = Limits {
            rate: NonZeroU32::new(rate).unwrap(),
            slip,
            table_size: NonZeroU32::new(table_size).unwrap(),
            whitelist: PrefixMap::default(),
        };
        Limiter::new(limits, (1, 2))
    }

    fn address(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    /// Verdicts for `count` responses of `class` to `source`, all at `now`.
    fn verdicts(limiter: &Limiter, source: &str, class: Class<'_>, now: u64, count: usize) -> Vec<Verdict> {
        (0..count).map(|_| limiter.check(address(source), class, now)).collect()
    }

    fn sent(verdicts: &[Verdict]) -> usize {
        verdicts.iter().filter(|&&verdict| verdict == Verdict::Send).count()
    }

    #[test]
    fn a_bucket_holds_one_second_of_responses_and_refills_at_the_rate() {
        let limiter = limiter(10, 0, 1024);
        assert_eq!(sent(&verdicts(&limiter, "192.0.2.1", ANSWER, SECOND, 15)), 10);
        assert_eq!(sent(&verdicts(&limiter, "192.0.2.1", ANSWER, SECOND + SECOND / 10, 5)), 1, "one token per 1/rate s");
        assert_eq!(sent(&verdicts(&limiter, "192.0.2.1", ANSWER, 3 * SECOND, 15)), 10, "full again after a second idle");
        assert_eq!(limiter.counters(), Counters { slipped: 0, dropped: 5 + 4 + 5 });
    }

    #[test]
    fn slip_sends_every_nth_limited_response_truncated() {
        let over_limit = |slip| verdicts(&limiter(1, slip, 1024), "192.0.2.1", ANSWER, 0, 7)[1..].to_vec();
        use Verdict::{Drop, Slip};
        assert_eq!(over_limit(0), [Drop; 6]);
        assert_eq!(over_limit(1), [Slip; 6]);
        assert_eq!(over_limit(2), [Drop, Slip, Drop, Slip, Drop, Slip]);
        assert_eq!(over_limit(3), [Drop, Drop, Slip, Drop, Drop, Slip]);
    }

    #[test]
    fn sources_share_a_bucket_per_slash_24_and_slash_56() {
        let limiter = limiter(2, 0, 1024);
        assert_eq!(sent(&verdicts(&limiter, "192.0.2.1", ANSWER, 0, 1)), 1);
        assert_eq!(sent(&verdicts(&limiter, "192.0.2.254", ANSWER, 0, 1)), 1);
        assert_eq!(sent(&verdicts(&limiter, "::ffff:192.0.2.9", ANSWER, 0, 1)), 0, "same /24, mapped or not");
        assert_eq!(sent(&verdicts(&limiter, "192.0.3.1", ANSWER, 0, 3)), 2, "another /24");
        assert_eq!(sent(&verdicts(&limiter, "2001:db8:0:ff::1", ANSWER, 0, 1)), 1);
        assert_eq!(sent(&verdicts(&limiter, "2001:db8:0:1::1", ANSWER, 0, 2)), 1, "same /56");
        assert_eq!(sent(&verdicts(&limiter, "2001:db8:0:100::1", ANSWER, 0, 2)), 2, "another /56");
        assert_eq!(sent(&verdicts(&limiter, "0.0.0.0", ANSWER, 0, 2)), 2, "IPv4 0/24 is not IPv6 ::/56");
        assert_eq!(sent(&verdicts(&limiter, "::", ANSWER, 0, 2)), 2);
    }

    #[test]
    fn each_class_and_key_has_its_own_bucket() {
        let limiter = limiter(1, 0, 1024);
        let classes = [
            ANSWER,
            Class::Answer { qname: b"\x03www\x07example\x00", qtype: 28 },
            Class::Answer { qname: b"\x04mail\x07example\x00", qtype: 1 },
            Class::NxDomain { zone: b"\x07example\x00" },
            Class::NxDomain { zone: b"\x05other\x00" },
            Class::Referral { zone: b"\x07example\x00" },
            Class::Error,
        ];
        for class in classes {
            assert_eq!(verdicts(&limiter, "192.0.2.1", class, 0, 2), [Verdict::Send, Verdict::Drop], "{class:?}");
        }
    }

    #[test]
    fn whitelisted_sources_are_never_limited() {
        let mut whitelist = PrefixMap::default();
        whitelist.insert(address("198.51.100.0"), 24, ());
        let limits = Limits { rate: NonZeroU32::MIN, slip: 0, table_size: NonZeroU32::MIN, whitelist };
        let limiter = Limiter::new(limits, (1, 2));
        assert_eq!(sent(&verdicts(&limiter, "198.51.100.7", ANSWER, 0, 100)), 100);
        assert_eq!(sent(&verdicts(&limiter, "198.51.101.7", ANSWER, 0, 100)), 1);
    }

    #[test]
    fn the_table_stays_its_size_and_a_busy_bucket_outlives_idle_ones() {
        let limiter = limiter(5, 0, 64);
        let table_slots = |limiter: &Limiter| limiter.shards.iter().map(|shard| shard.lock().unwrap().len()).sum::<usize>();
        let slots = table_slots(&limiter);
        assert!((64..64 + SHARDS * PROBE).contains(&slots), "{slots} slots");
        // The flooded bucket is emptied first...
        assert_eq!(sent(&verdicts(&limiter, "192.0.2.1", ANSWER, 0, 10)), 5);
        // ...then 100,000 other keys pass once each, a second later: each
        // takes a slot that has been full longer than the flooded one.
        for host in 0..100_000u32 {
            let source = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + (host << 8)));
            assert_eq!(limiter.check(source, ANSWER, SECOND / 2), Verdict::Send);
        }
        assert_eq!(table_slots(&limiter), slots, "no growth");
        assert_eq!(sent(&verdicts(&limiter, "192.0.2.1", ANSWER, SECOND / 2, 5)), 2, "the flooded bucket kept its debt");
    }
}
