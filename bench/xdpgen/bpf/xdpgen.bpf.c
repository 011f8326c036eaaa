// xdpgen's XDP program, attached (native) to the client's end of a veth
// pair, in two roles told apart by the interface a frame came in on:
//
// - Generating: user space runs it with BPF_PROG_TEST_RUN in live-frames
//   mode on frames that seem to arrive on the namespace's loopback (never
//   a frame of the veth: a page of the run's pool may come back from the
//   server holding a response, and must not be counted again each time
//   the run reuses it). When the next query is due (the cursor paces them
//   by the kernel clock, one every `interval`), it writes that query of
//   the mix (a whole pre-built Ethernet frame from `queries`) into the
//   frame and redirects it to the client's end, so the frame leaves
//   through that end to its peer as an xdp_frame (veth's ndo_xdp_xmit),
//   the way a NIC driver hands a frame to XDP on the far side; before its
//   time, it drops the frame (the page goes back to the run's pool). So a
//   run spins its CPU and the queries leave evenly spaced, at any rate,
//   from few runs: paced from user space, short runs many times a second
//   ran out of the XDP memory-model IDs each run's page pool holds for a
//   second or more (ENOSPC), and bursts overran the peer's 256-frame ring.
// - Counting: every frame the end receives (from the server's end, whose
//   source is that end's MAC) that is a DNS response from the server's
//   port is counted (per rcode, truncated, or not an answer to the query
//   its ID names) and dropped, so receiving them costs the client little
//   and no response goes unseen; everything else (ARP) passes.
//
// Why one program: a test run with repeat > 1 puts its program into the
// kernel's XDP dispatcher and takes it out again, each a synchronize_rcu
// (bpf_dispatcher_change_prog: ~25 ms per run here), unless the program
// is already there, which attaching it natively does. Attached, the run
// costs tens of microseconds.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

// Keep in step with src/kernel.rs. A query frame is at most Ethernet 14,
// IPv4 20, UDP 8, DNS header 12, name 255, type and class 4, OPT 11 = 324
// octets; FRAME is the frame the kernel starts each run with, and stays
// longer than any query (see generate).
#define FRAME 384
#define MAX_QUERIES 65536
#define HEADERS (ETH_HLEN + 20 + 8)
#define DNS_HEADER 12
#define QUESTION (HEADERS + DNS_HEADER)
#define MAX_QUESTION (255 + 4)
#define FLAG_QR 0x8000
#define FLAG_TC 0x0200
#define RCODES 16

struct query {
	__u32 len;
	// Length of the question (name, type, class) that follows the DNS header.
	__u32 question_len;
	__u8 frame[FRAME];
};

// Times in 1/1024 ns (ns << 10): an interval of 1,000 ns (1M q/s) is
// then kept to 0.1 %.
#define FIXED_POINT 10
// The most queries sent back to back to catch up after the CPU was taken
// away: more would overrun the peer's ring. The rest are skipped.
#define MAX_CATCH_UP 64

struct cursor {
	__u32 next;
	__u32 count;
	// When the next query is due, and the time between two, fixed point.
	__u64 due;
	__u64 interval;
	// Queries still to send; sent, and skipped for being too late.
	__u64 remaining;
	__u64 sent;
	__u64 skipped;
};

struct counters {
	__u64 rcodes[RCODES];
	__u64 truncated;
	// Responses whose ID names no query, or a query with another question
	// or another source address.
	__u64 unexpected;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_QUERIES);
	__type(key, __u32);
	__type(value, struct query);
} queries SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cursor);
} cursor SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct counters);
} counters SEC(".maps");

// Set by the loader: the server's port, the client's end of the veth,
// and the interface the generating test runs seem to arrive on.
volatile const __u16 server_port = 53;
volatile const __u32 client_ifindex = 0;
volatile const __u32 generator_ifindex = 0;

// Whether the next query is due now; if so, takes it off the schedule.
// One user-space thread runs the generator, on one CPU with migration
// off: the cursor needs no atomics.
static __always_inline int due_now(struct cursor *c)
{
	if (!c->remaining || !c->interval)
		return 0;
	__u64 now = bpf_ktime_get_ns() << FIXED_POINT;
	if (now < c->due)
		return 0;
	__u64 late = (now - c->due) / c->interval;
	if (late > MAX_CATCH_UP) {
		__u64 skip = late - MAX_CATCH_UP;
		skip = skip < c->remaining ? skip : c->remaining;
		c->skipped += skip;
		c->remaining -= skip;
		c->due += skip * c->interval;
		if (!c->remaining)
			return 0;
	}
	c->due += c->interval;
	c->remaining--;
	c->sent++;
	return 1;
}

static __always_inline int generate(struct xdp_md *ctx, struct cursor *c)
{
	// The loader refuses an empty mix, so c->count is never 0 here.
	if (!due_now(c))
		return XDP_DROP;
	__u32 k = c->next;
	c->next = k + 1 >= c->count ? 0 : k + 1;
	struct query *q = bpf_map_lookup_elem(&queries, &k);
	if (!q)
		return XDP_ABORTED;
	__u32 len = q->len;
	// Strictly shorter than FRAME: the kernel refreshes its xdp_frame from
	// the context only when the bounds differ from the original ones, so a
	// recycled page whose earlier query shrank the frame must never be set
	// back to exactly FRAME octets.
	if (len < HEADERS || len >= FRAME)
		return XDP_ABORTED;
	// A recycled page keeps the bounds its last run left (the kernel resets
	// them only when the data pointer moved), so grow or shrink from
	// wherever the frame ends now.
	int change = (int)len - (int)(ctx->data_end - ctx->data);
	if (change && bpf_xdp_adjust_tail(ctx, change))
		return XDP_ABORTED;
	if (bpf_xdp_store_bytes(ctx, 0, q->frame, len))
		return XDP_ABORTED;
	return bpf_redirect(client_ifindex, 0);
}

// Whether the response's question and destination are the query's.
static __always_inline int answers_query(struct xdp_md *ctx, const struct query *q, __u32 destination)
{
	const __u8 *data = (const __u8 *)(long)ctx->data;
	const __u8 *end = (const __u8 *)(long)ctx->data_end;
	__u32 asked_from;
	__builtin_memcpy(&asked_from, q->frame + ETH_HLEN + 12, sizeof(asked_from));
	if (asked_from != destination)
		return 0;
	__u32 question_len = q->question_len;
	if (question_len > MAX_QUESTION)
		return 0;
	for (__u32 i = 0; i < MAX_QUESTION; i++) {
		if (i >= question_len)
			return 1;
		const __u8 *at = data + QUESTION + i;
		if (at + 1 > end || *at != q->frame[QUESTION + i])
			return 0;
	}
	return 1;
}

static __always_inline int count_response(struct xdp_md *ctx, struct cursor *c)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (data + QUESTION > end)
		return XDP_PASS;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + ETH_HLEN;
	struct udphdr *udp = data + ETH_HLEN + 20;
	__u16 *dns = data + HEADERS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 || ip->protocol != IPPROTO_UDP ||
	    udp->source != bpf_htons(server_port))
		return XDP_PASS;
	__u16 flags = bpf_ntohs(dns[1]);
	if (!(flags & FLAG_QR))
		return XDP_PASS;
	__u32 zero = 0;
	struct counters *n = bpf_map_lookup_elem(&counters, &zero);
	if (!n)
		return XDP_DROP;
	__u32 id = bpf_ntohs(dns[0]);
	struct query *q = id < c->count ? bpf_map_lookup_elem(&queries, &id) : 0;
	if (!q || !answers_query(ctx, q, ip->daddr)) {
		n->unexpected++;
		return XDP_DROP;
	}
	n->rcodes[flags & (RCODES - 1)]++;
	if (flags & FLAG_TC)
		n->truncated++;
	return XDP_DROP;
}

SEC("xdp")
int xdpgen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct cursor *c = bpf_map_lookup_elem(&cursor, &zero);
	if (!c || data + ETH_HLEN > end)
		return XDP_PASS;
	if (ctx->ingress_ifindex == generator_ifindex)
		return generate(ctx, c);
	return count_response(ctx, c);
}

char _license[] SEC("license") = "GPL";
