// xdpgen's XDP program, attached (native) to the client's end of a veth
// pair, in two roles told apart by the frame's Ethernet source:
//
// - Generating: user space runs it with BPF_PROG_TEST_RUN in live-frames
//   mode on that end, with frames whose source is the end's own MAC (the
//   blank frame the run starts from, or a query an earlier run wrote into
//   a recycled page). It writes the next query of the mix (a whole
//   pre-built Ethernet frame from `queries`) into the frame and returns
//   XDP_TX, so the frame leaves through that end to its peer as an
//   xdp_frame, the way a NIC driver's XDP_TX would.
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

struct cursor {
	__u32 next;
	__u32 count;
	// The client end's MAC: frames from it are ours to fill.
	__u8 client_mac[ETH_ALEN];
	__u8 pad[2];
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

// The server's port, set by the loader.
volatile const __u16 server_port = 53;

static __always_inline int generate(struct xdp_md *ctx, struct cursor *c)
{
	if (!c->count)
		return XDP_ABORTED;
	// One user-space thread runs this, on one CPU with migration off: the
	// cursor needs no atomics.
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
	return XDP_TX;
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

static __always_inline int same_mac(const __u8 *a, const __u8 *b)
{
	int same = 1;
#pragma unroll
	for (int i = 0; i < ETH_ALEN; i++)
		same &= a[i] == b[i];
	return same;
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
	const __u8 *source = ((struct ethhdr *)data)->h_source;
	if (same_mac(source, c->client_mac))
		return generate(ctx, c);
	return count_response(ctx, c);
}

char _license[] SEC("license") = "GPL";
