//! What the program did with the packets it saw, per interface: the
//! `counters` map of bpf/answer.bpf.c, summed over the CPUs.

use std::ffi::CStr;

/// The program's reasons, in the order of `enum reason` in bpf/answer.bpf.c.
const REASONS: usize = 15;

/// The `counters` map's value: one count per reason.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct CounterValues(pub [u64; REASONS]);

// SAFETY: an array of u64, valid for any bit pattern.
unsafe impl aya::Pod for CounterValues {}

/// A `counter_slots` value: the interface that claimed the slot (0: none)
/// and its counts.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct SlotCounterValues {
    pub ifindex: u32,
    pub padding: u32,
    pub counts: CounterValues,
}

// SAFETY: two u32 and an array of u64, valid for any bit pattern.
unsafe impl aya::Pod for SlotCounterValues {}

impl SlotCounterValues {
    /// A slot claimed by `ifindex`, counting from zero.
    pub(crate) fn claimed_by(ifindex: u32) -> SlotCounterValues {
        SlotCounterValues { ifindex, padding: 0, counts: CounterValues([0; REASONS]) }
    }
}

/// Every interface the program has seen a packet on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub interfaces: Vec<InterfaceCounters>,
}

/// What the program did with one interface's packets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterfaceCounters {
    pub ifindex: u32,
    /// `None` when the interface is gone.
    pub interface: Option<String>,
    pub answered_static: u64,
    pub answered_routed: u64,
    /// Passed up: not IP, not UDP, or not to a served port.
    pub not_for_us: u64,
    /// Passed up: IPv4 fragments or options, IPv6 extension headers.
    pub fragment_or_options: u64,
    /// Passed up: a response, another opcode, other section counts, a
    /// compressed or malformed question, an additional record other than
    /// OPT (a signed query's TSIG record alone), trailing octets.
    pub not_a_plain_query: u64,
    /// Passed up: EDNS version above 0, options other than one plain Client
    /// Subnet (scope 0, as user space takes it), more than one additional
    /// record (a signed query's OPT and TSIG records).
    pub edns_unsupported: u64,
    /// Passed up: no entry for the question, or none for its first label
    /// (the first-label filter, read before the rest of the packet).
    pub no_entry: u64,
    /// Passed up: the reply is larger than the client takes.
    pub too_large: u64,
    /// Over the source's rate limit, passed up.
    pub rate_limited_passed: u64,
    /// Over the source's rate limit, dropped.
    pub rate_limited_dropped: u64,
    /// Passed up: the packet could not be grown to the reply's length.
    pub adjust_tail_failed: u64,
    /// Passed up while the fast path was suspended, or before its first sync.
    pub suspended: u64,
    /// Passed up: the query's UDP checksum is wrong (or absent over IPv6).
    pub bad_checksum: u64,
    /// Over the response rate limit: sent truncated (TC=1).
    pub rrl_slipped: u64,
    /// Over the response rate limit: not answered at all.
    pub rrl_dropped: u64,
}

impl InterfaceCounters {
    /// Interface `ifindex`'s counts, summed over its `per_cpu` values (of
    /// each CPU, from each map that counted it).
    pub(crate) fn summed<'v>(ifindex: u32, per_cpu: impl Iterator<Item = &'v CounterValues>) -> InterfaceCounters {
        let mut sums = [0; REASONS];
        for values in per_cpu {
            for (sum, count) in sums.iter_mut().zip(values.0) {
                *sum += count;
            }
        }
        let [
            answered_static,
            answered_routed,
            not_for_us,
            fragment_or_options,
            not_a_plain_query,
            edns_unsupported,
            no_entry,
            too_large,
            rate_limited_passed,
            rate_limited_dropped,
            adjust_tail_failed,
            suspended,
            bad_checksum,
            rrl_slipped,
            rrl_dropped,
        ] = sums;
        InterfaceCounters {
            ifindex,
            interface: interface_name(ifindex),
            answered_static,
            answered_routed,
            not_for_us,
            fragment_or_options,
            not_a_plain_query,
            edns_unsupported,
            no_entry,
            too_large,
            rate_limited_passed,
            rate_limited_dropped,
            adjust_tail_failed,
            suspended,
            bad_checksum,
            rrl_slipped,
            rrl_dropped,
        }
    }

    /// Answers sent from the kernel.
    pub fn answered(&self) -> u64 {
        self.answered_static + self.answered_routed
    }
}

/// The name of interface `ifindex`, if it exists.
fn interface_name(ifindex: u32) -> Option<String> {
    let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `name` has the IF_NAMESIZE octets if_indextoname may write.
    let found = unsafe { libc::if_indextoname(ifindex, name.as_mut_ptr()) };
    if found.is_null() {
        return None;
    }
    // SAFETY: on success, if_indextoname wrote a NUL-terminated name into `name`.
    Some(unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned())
}
