// The kernel answer path: answers UDP DNS queries whose question has a
// pre-built reply in the `answers` map, or, for a routed name, a reply
// drawn among the pre-built variants of the client's class, in place, and
// passes everything else up to the server unchanged. The reply must be byte for byte what
// the user-space path (pharos_answer::respond) sends, so every case that
// path treats specially (EDNS options, truncation, odd headers) passes up.
//
// Snapshots are double-buffered: every entry belongs to generation 0 or 1,
// user space fills the generation not being served, then flips `live` with
// one map update. A packet reads `live` once, so it is answered wholly from
// one snapshot; a packet that read it just before a flip may still be
// answered from the snapshot just replaced.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

// Keep in step with src/maps.rs.
#define MAX_NAME 255
#define MAX_BODY 1024
#define DNS_HEADER 12
#define OPT_LEN 11
#define MIN_UDP_PAYLOAD 512
#define TYPE_OPT 41
#define OPTION_CLIENT_SUBNET 8
// An OPT record's RDATA the kernel reads: one Client Subnet option, its
// code and length, family, source and scope prefixes, and up to 16
// address octets.
#define ECS_MIN 8
#define ECS_MAX (ECS_MIN + 16)
// The scope octet's place in the option.
#define ECS_SCOPE 7
// The region of clients no rule claims, and of a /0 client subnet.
#define UNCLASSIFIED 0
#define FLAG_QR 0x8000
#define FLAG_RD 0x0100
#define FLAG_TC 0x0200
#define OPCODE_MASK 0x7800
#define EDNS_DO 0x8000
// Compact Answers OK (RFC 9824 section 5), echoed as user space echoes it.
#define EDNS_CO 0x4000
#define REPLY_HOP_LIMIT 64
// Routed answers: at most this many variants per question and class.
#define MAX_VARIANTS 16
// The class of clients whose region has no distribution of its own.
#define EVERYONE 0xffffffff
// Bits of a class key before the address: generation and family.
#define CLASS_PREFIX_BITS 16
// `live` holds this instead of a generation while user space has
// suspended the fast path: everything passes up.
#define SUSPENDED 2
// Ethernet, IP and UDP headers, without IP options or extension headers.
#define HEADERS_V4 (ETH_HLEN + 20 + 8)
#define HEADERS_V6 (ETH_HLEN + 40 + 8)
// The most a packet grows at its head when its tail cannot grow enough:
// within the headroom XDP guarantees, with a margin.
#define HEAD_GROWTH 192
// Header, question name, type and class, and one spare octet so the
// checksum loop may read a word past an odd end.
#define HEAD_MAX (DNS_HEADER + MAX_NAME + 4 + 1)

// The question as the maps key it: the generation it belongs to, type
// and class as on the wire, and the FNV-1a hash of its lowercase wire
// name (low word first). Sixteen octets hash and compare in a fraction
// of the time the whole name took; a hash is no proof, so the entry
// found holds the name, which must match.
struct question_key {
	__u32 generation;
	__u8 qtype[2];
	__u8 qclass[2];
	__u32 name_hash[2];
};

// What follows the question in the reply, and what the header needs.
struct answer {
	__u16 len;
	// AA and the RCODE.
	__u16 flags;
	// Answer, authority and additional counts, the OPT record aside.
	__u16 counts[3];
	// One's complement sum of the body as if it began at an even offset.
	__u16 sum;
	__u8 body[MAX_BODY];
};

// What the `answers` map holds for a question: its lowercase wire name,
// zero-padded, and either its reply or, for a routed question, a mark
// that sends the program to the question's draws; and the hash of its
// replies' response-rate-limit class (user space's pharos_rrl::Class:
// an answer by name and type, a referral by zone).
struct entry {
	__u8 name[MAX_NAME + 1];
	__u32 routed;
	__u32 response_class[2];
	struct answer reply;
};

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL
// The words of a name compared against an entry's.
#define NAME_WORDS ((MAX_NAME + 1) / 8)

// What a generation's snapshot says besides its answers.
struct config {
	// The payload size the OPT record advertises, and the largest reply.
	__u16 udp_payload;
	// 1 when the snapshot has more static answers than the map has room
	// for: questions are counted in `asked`, so that user space installs
	// the most asked ones.
	__u16 count_asked;
	// 1 when every sender's Client Subnet is believed; else only those
	// of senders in `trusted`.
	__u16 trust_all;
	// Log2 of the bits of `first_labels` per generation; 0 while that
	// generation has no filter (every question goes to the lookup).
	__u16 first_label_bits;
	// Which snapshot this is: never the same twice, so what was cached
	// of an earlier one is never found.
	__u32 epoch;
};

// What became of a packet, counted per interface. Keep in step with
// src/counters.rs.
enum reason {
	ANSWERED_STATIC,
	ANSWERED_ROUTED,
	// Not IP, not UDP, or not to a served port.
	NOT_FOR_US,
	// IPv4 fragments and options, IPv6 extension headers.
	FRAGMENT_OR_OPTIONS,
	// A response, another opcode, other counts, a compressed or malformed
	// question, an additional record other than OPT (a signed query's
	// TSIG record alone), or trailing octets.
	NOT_A_PLAIN_QUERY,
	// EDNS version above 0, options other than one well-formed Client
	// Subnet with scope 0, or more than one additional record (a signed
	// query's OPT and TSIG records: user space checks and signs it).
	EDNS_UNSUPPORTED,
	// No entry for the question, or none for its first label (the
	// filter, read before the rest of the packet).
	NO_ENTRY,
	// Larger than the client takes: user space truncates.
	TOO_LARGE,
	RATE_LIMITED_PASSED,
	RATE_LIMITED_DROPPED,
	ADJUST_TAIL_FAILED,
	SUSPENDED_PASS,
	// The query's UDP checksum is wrong (or absent over IPv6).
	BAD_CHECKSUM,
	// Over the response rate limit: sent truncated (TC=1), or not at all.
	RRL_SLIPPED,
	RRL_DROPPED,
	REASONS,
	// Not a reason: find_udp found a query to look up.
	ANSWERABLE = REASONS,
};

struct counters {
	__u64 count[REASONS];
};

// The client's address block, in the LPM trie of regions: the prefix
// covers generation, family and the block's leading address bits.
struct class_key {
	__u32 prefixlen;
	__u8 generation;
	// 0 for IPv4 (address in the first 4 octets), 1 for IPv6.
	__u8 family;
	__u8 address[16];
	__u8 unused[2];
};

// A routed question's distribution for one region (or EVERYONE).
struct draw_key {
	struct question_key question;
	__u32 region;
};

// A routed question from a client, as the draw cache keys it: the
// snapshot's epoch, the client's kind (bit 0: IPv6; bit 1: a /0 Client
// Subnet, unclassified whatever its address), the question, and the
// client's address (IPv4 in the first 4 octets, zero after).
struct client_key {
	__u32 epoch;
	__u32 kind;
	struct question_key question;
	__u8 address[16];
};

// Variant i is drawn when the draw (uniform over 32 bits) is at most
// thresholds[i] and above the thresholds before it; the last is ~0.
struct draw {
	__u32 count;
	// 1 when the reply's ECS scope is the one that placed the client
	// (else 0: the answer is the same for every client).
	__u32 scoped;
	__u32 thresholds[MAX_VARIANTS];
	__u32 variants[MAX_VARIANTS];
};

// What a client's routed question found: the client's class, if a block
// holds it, and the question's draw for that class.
struct client_draw {
	__u32 classed;
	__u32 scope;
	// 0 when the question has no draw for the client: it passes up.
	__u32 found;
	struct draw draw;
};

// A response rate limit bucket's key: the family (0: IPv4, its /24 in
// the first 3 octets; 1: IPv6, its /56 in the first 7), zero past the
// prefix, and the response's class.
struct rrl_key {
	__u32 family;
	__u8 prefix[8];
	__u32 response_class[2];
};

// Per-CPU room for what is too large for the 512-octet stack.
struct scratch {
	// A copy of the Ethernet, IP and UDP headers, while the packet grows
	// at its head.
	__u8 headers[HEADERS_V6];
	// The question's lowercase wire name, zero past it to the next word.
	__u64 name[NAME_WORDS];
	struct question_key key;
	struct draw_key draw_key;
	struct class_key class_key;
	struct client_key client_key;
	struct client_draw client_draw;
	struct rrl_key rrl_key;
	__u8 head[HEAD_MAX];
	__u8 opt[OPT_LEN];
	// The query's Client Subnet option, zero past its end; the reply's
	// once its scope is set.
	__u8 ecs[ECS_MAX];
};

// Sized by user space at load: its capacity per generation, twice. Not
// preallocated, so memory follows the entries installed, not the bound.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct question_key);
	__type(value, struct entry);
} answers SEC(".maps");

// The first-label filter, per generation: bit h set when a question the
// snapshot may answer (installed or not) has a first label whose key
// hashes to h (first_label_key). A question whose bit is clear cannot be
// answered here, so it passes up before its name is read and hashed and
// the answers map is searched: a miss costs a third of what it did.
// Sized by user space at load: two generations of words.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} first_labels SEC(".maps");

// The served UDP ports: bit p set for port p. An array lookup is
// inlined where a hash lookup is a call, and every packet makes it.
#define PORT_WORDS (65536 / 64)
struct port_set {
	__u64 words[PORT_WORDS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct port_set);
} ports SEC(".maps");

// The generation being served, or SUSPENDED.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} live SEC(".maps");

// Per generation.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

// Where locate() places a block's clients, and the scope it gives them.
struct class {
	__u32 region;
	__u32 scope;
};

// What a client's routed question found, in the draw cache's slot of
// its key.
struct draw_slot {
	struct client_key key;
	struct client_draw found;
};

// The draws clients' routed questions found, per CPU and snapshot epoch,
// direct-mapped by a hash of the key: classing a client walks the trie
// and finding its draw is a second lookup, where this is an array's
// inlined lookup and a key compare (an LRU hash map's lookup cost more
// than half a routed answer's extra over a static one); few addresses ask
// an authoritative server most of its queries (its resolvers). A key
// that lands on a taken slot takes it over; entries of earlier epochs are
// never found again.
#define DRAW_SLOTS_LOG2 12
#define DRAW_SLOTS (1 << DRAW_SLOTS_LOG2)
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DRAW_SLOTS);
	__type(key, __u32);
	__type(value, struct draw_slot);
} draw_cache SEC(".maps");

#define CLIENT_KEY_WORDS (sizeof(struct client_key) / 4)

// Client address blocks to regions, per generation: what user space's
// locate() gives, cut into blocks (pharos_route::client_blocks).
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct class_key);
	__type(value, struct class);
} classes SEC(".maps");

// The senders whose Client Subnet is believed, per generation, keyed as
// `classes` is (by the packet's source); unused where `trust_all`.
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct class_key);
	__type(value, __u8);
} trusted SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct draw_key);
	__type(value, struct draw);
} draws SEC(".maps");

// Each variant's reply, pre-encoded by user space's encoder, at
// generation * ROUTED_VARIANTS + its id (a reply of length 0 is none).
// An array: its lookup is inlined, where a hash's costs a call, hashing
// and comparing, which on routed answers alone was a tenth of their
// cost. Preallocated: 2 x 8192 x 1032 octets, 17 MB.
#define ROUTED_VARIANTS 8192
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * ROUTED_VARIANTS);
	__type(key, __u32);
	__type(value, struct answer);
} variants SEC(".maps");

// How often each question (in generation 0, so counts outlive a swap)
// was asked while its snapshot was above capacity, per CPU. User space
// reads and clears it at every sync; sized by it at load. Questions asked
// too rarely to stay in the LRU are too cold to be installed anyway.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct question_key);
	__type(value, __u64);
} asked SEC(".maps");

// Per interface (ingress ifindex), per CPU: for interfaces that have no
// slot in `counter_slots`.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct counters);
} counters SEC(".maps");

// The counters of the interfaces the program is attached to, at slot
// ifindex % COUNTER_SLOTS, claimed by user space at attach (the slot's
// ifindex set on every CPU; a slot another interface holds stays its).
// Every packet is counted: an array lookup is inlined where a hash
// lookup is a call and a hash of the key (~40 ns a packet here).
#define COUNTER_SLOTS 64
struct slot_counters {
	__u32 ifindex;
	__u32 padding;
	struct counters counters;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNTER_SLOTS);
	__type(key, __u32);
	__type(value, struct slot_counters);
} counter_slots SEC(".maps");

// A client, as the rate limit tells clients apart: an IPv4 address, or
// the /64 of an IPv6 address (a host often holds a whole /64).
struct source {
	__u32 v6;
	__u8 address[8];
	__u32 v4;
};

// A token bucket in nanoseconds of credit: each answer costs
// `emission_ns`, credit grows with time up to `capacity_ns`.
struct bucket {
	__u64 credit_ns;
	__u64 last_ns;
};

// Set at load. Concurrent CPUs update a bucket without locks: a burst
// spread over several CPUs at once may get a few answers more.
struct limit {
	__u64 emission_ns;
	__u64 capacity_ns;
	__u32 enabled;
	__u32 drop;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct source);
	__type(value, struct bucket);
} buckets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct limit);
} limit SEC(".maps");

// Response rate limiting, as user space's pharos_rrl does it over UDP:
// alike responses (the entry's class) to one network (an IPv4 /24, an
// IPv6 /56) are limited to `rate` per second, GCRA-style, every slip-th
// limited one sent truncated. Set at load; `enabled` 0 without `[rrl]`.
// The kernel's buckets are its own: a class answered partly here and
// partly in user space may get up to twice the rate.
struct rrl_settings {
	__u64 interval_ns;
	__u64 depth_ns;
	__u32 slip;
	__u32 enabled;
	// 1 when the `rrl_whitelist` trie has prefixes.
	__u32 whitelist;
	__u32 unused;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rrl_settings);
} rrl_settings SEC(".maps");

// Sources never limited, keyed as `classes` is, in generation 0.
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct class_key);
	__type(value, __u8);
} rrl_whitelist SEC(".maps");

struct rrl_bucket {
	// When the bucket would be full again: each response pushes it one
	// interval on.
	__u64 full_at;
	// Responses limited so far, for the slip.
	__u32 limited;
	__u32 unused;
};

// Sized by user space at load (`[rrl] table_size`); the least recently
// used bucket makes room. CPUs update a bucket without locks: a burst
// spread over several CPUs at once may get a few responses more.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct rrl_key);
	__type(value, struct rrl_bucket);
} rrl_buckets SEC(".maps");

enum rrl_verdict {
	RRL_SEND,
	RRL_SLIP,
	RRL_DROP,
};

// What the stages of answer() learn of the query and hand on to the next.
struct query {
	// Found by find_udp.
	__u32 dns_off;
	int v6;
	// The pseudo-header's sum: addresses and protocol, not the length.
	__u32 pseudo;
	// Whom the rate limit counts the query against.
	struct source source;
	// The packet's source address (IPv4 in the first 4 octets).
	__u8 sender[16];
	// The client's address (IPv4 in the first 4 octets), to class it:
	// the source's, or a trusted Client Subnet's.
	__u8 client[16];
	int client_v6;
	// The snapshot the query is answered from, read once.
	__u32 generation;

	// Read by read_question: the DNS message's length, its header flags,
	// and the length of the header and question, which the reply keeps.
	__u32 dns_len;
	__u16 flags;
	int edns;
	__u32 name_len;
	__u32 head_len;
	// The query's UDP checksum, and the sum of what it covers besides
	// the pseudo-header and the head (ports, length, the checksum field,
	// the OPT record).
	__u16 check;
	__u32 rest_sum;

	// Read by read_edns: the largest reply the client takes.
	__u32 size_limit;
	// The OPT flags the reply echoes: DO and CO.
	__u16 echoed_flags;
	// The Client Subnet option's length, or 0.
	__u32 ecs_len;
	// The client came from a trusted Client Subnet of this source prefix.
	int from_subnet;
	__u32 subnet_bits;

	// Set by find_answer, and admit where it slips.
	__u32 body_len;
	__u32 reply_len;
	// The reply's ECS scope: 0 for static answers, as user space's.
	__u8 scope;
	// The counter the reply is counted under.
	__u32 answered;
	int slipped;
	// Set by compose_reply: where the reply's OPT record goes.
	__u32 opt_at;
};

static __always_inline __u16 read16(const __u8 *p)
{
	return (__u16)p[0] << 8 | p[1];
}

// `value`, proven to the verifier to be at most `max`. The C checks come
// first, but the compiler may test a copy and leave this register
// unbounded; this check it cannot move or drop.
#define AT_MOST(value, max) asm volatile("if %0 <= %1 goto +1\n\t%0 = 0" : "+r"(value) : "i"(max))

// A length from 1 to `max`, proven so to the verifier where a helper takes
// it: helpers refuse a length that might be 0.
#define FROM_1_TO(len, max)              \
	do {                             \
		len--;                   \
		AT_MOST(len, (max) - 1); \
		len++;                   \
	} while (0)

static __always_inline __u32 fold(__u64 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

// The sum of a part placed at an odd offset is the byte-swapped sum.
static __always_inline __u32 placed_at(__u32 sum, __u32 offset)
{
	sum = fold(sum);
	return offset & 1 ? ((sum & 0xff) << 8 | sum >> 8) : sum;
}

// The sum of the scratch head's first `len` octets. A global function,
// so the verifier checks its loop once instead of on every path that
// reaches it (the 1M-instruction limit).
__attribute__((noinline)) __u32 sum_head(__u32 len)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;
	__u32 sum = 0;
	for (__u32 i = 0; i < HEAD_MAX / 2; i++) {
		__u32 at = 2 * i;
		if (at >= len)
			break;
		__u8 low = at + 1 < len ? s->head[at + 1] : 0;
		sum += (__u32)s->head[at] << 8 | low;
	}
	return sum;
}

static __always_inline __u32 sum_bytes(const __u8 *bytes, __u32 len)
{
	__u32 sum = 0;
	for (__u32 i = 0; i < len; i += 2)
		sum += (__u32)bytes[i] << 8 | (i + 1 < len ? bytes[i + 1] : 0);
	return sum;
}

// Copies the question name at `offset` into the scratch head, and its
// lowercase form into the scratch name, hashed into the scratch key
// (generation 0, type and class left to the caller); returns its length,
// or 0 if it is not a plain name. Global, as sum_head is.
__attribute__((noinline)) __u32 read_name(struct xdp_md *ctx, __u32 offset)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;
	__u8 *lowercase = (__u8 *)s->name;
	// Headers end well before 1024 octets; the mask lets the verifier
	// bound the pointer (it gives up on offsets that may near 64 KiB).
	const __u8 *name = (void *)(long)ctx->data + (offset & 0x3ff);
	const void *data_end = (void *)(long)ctx->data_end;
	__u32 label_left = 0;
	__u64 hash = FNV_OFFSET;
	for (__u32 i = 0; i < MAX_NAME; i++) {
		const __u8 *p = name + i;
		if ((const void *)(p + 1) > data_end)
			return 0;
		__u8 c = *p;
		s->head[DNS_HEADER + i] = c;
		int length_octet = label_left == 0;
		if (length_octet) {
			// Compression pointers and extended labels pass up.
			if (c > 63)
				return 0;
			label_left = c;
		} else {
			label_left--;
			c = c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
		}
		// Each word zeroed as the name enters it: past the name, its
		// last word holds zeros, as the entry's does.
		if (i % 8 == 0)
			s->name[i / 8] = 0;
		lowercase[i] = c;
		hash = (hash ^ c) * FNV_PRIME;
		// The root label ends the name.
		if (length_octet && c == 0) {
			s->key.generation = 0;
			s->key.name_hash[0] = hash;
			s->key.name_hash[1] = hash >> 32;
			return i + 1;
		}
	}
	return 0;
}

// The first eight octets of a wire name, its length octet first, case
// folded, and zero past its first label, as a little-endian number:
// src/first_labels.rs computes the same from the lowercase name.
static __always_inline __u64 first_label_key(const __u8 *name)
{
	__u32 label_len = name[0];
	__u64 key = 0;
#pragma unroll
	for (__u32 i = 0; i < 8; i++) {
		__u8 c = name[i];
		// Length octets (at most 63) are below 'A': folding them is moot.
		if ((__u8)(c - 'A') < 26)
			c += 'a' - 'A';
		if (i <= label_len)
			key |= (__u64)c << (8 * i);
	}
	return key;
}

#define FIBONACCI_MULTIPLIER 0x9E3779B97F4A7C15ULL
#define MIN_FIRST_LABEL_BITS 12
#define MAX_FIRST_LABEL_BITS 26

// Whether the name at `name` may be one `generation` answers: 0 only when
// its first label's bit is clear. A packet too short to read eight
// octets of name from is left to the full path.
static __always_inline int first_label_known(const __u8 *name, const void *data_end, const struct config *cfg, __u32 generation)
{
	__u32 bits = cfg->first_label_bits;
	if ((const void *)(name + 8) > data_end || bits < MIN_FIRST_LABEL_BITS || bits > MAX_FIRST_LABEL_BITS)
		return 1;
	__u64 bit = (first_label_key(name) * FIBONACCI_MULTIPLIER) >> (64 - bits);
	__u32 word = (generation << (bits - 6)) + (__u32)(bit >> 6);
	__u64 *words = bpf_map_lookup_elem(&first_labels, &word);
	return !words || (*words >> (bit & 63)) & 1;
}

// Whether an IPv6 next header is an extension header rather than a
// transport protocol (RFC 8200 section 4, RFC 7045).
static __always_inline int is_extension_header(__u8 next)
{
	return next == 0 || next == 43 || next == 44 || next == 50 || next == 51 || next == 60 || next == 135 || next == 139 ||
	       next == 140;
}

// Finds the UDP header of a query to a served port: returns ANSWERABLE and
// sets `*found`, or the reason the packet passes up. Fills in the DNS
// offset, the family, the addresses and the pseudo-header sum.
static __always_inline int find_udp(void *data, void *data_end, struct query *q, struct udphdr **found)
{
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return NOT_FOR_US;
	struct udphdr *udp;
	__u32 ip_payload;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end || ip->protocol != IPPROTO_UDP)
			return NOT_FOR_US;
		if (ip->ihl != 5 || (ip->frag_off & bpf_htons(0x3fff)))
			return FRAGMENT_OR_OPTIONS;
		if (bpf_ntohs(ip->tot_len) < sizeof(*ip))
			return NOT_FOR_US;
		ip_payload = bpf_ntohs(ip->tot_len) - sizeof(*ip);
		q->v6 = 0;
		q->pseudo = (ip->saddr & 0xffff) + (ip->saddr >> 16) + (ip->daddr & 0xffff) + (ip->daddr >> 16);
		q->source.v4 = ip->saddr;
		__builtin_memcpy(q->sender, &ip->saddr, 4);
		__builtin_memcpy(q->client, &ip->saddr, 4);
		q->client_v6 = 0;
		udp = (void *)(ip + 1);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end)
			return NOT_FOR_US;
		if (is_extension_header(ip6->nexthdr))
			return FRAGMENT_OR_OPTIONS;
		if (ip6->nexthdr != IPPROTO_UDP)
			return NOT_FOR_US;
		ip_payload = bpf_ntohs(ip6->payload_len);
		q->v6 = 1;
		q->source.v6 = 1;
		__builtin_memcpy(q->source.address, &ip6->saddr, 8);
		__builtin_memcpy(q->sender, &ip6->saddr, 16);
		__builtin_memcpy(q->client, &ip6->saddr, 16);
		q->client_v6 = 1;
		__u32 sum = 0;
		for (int i = 0; i < 4; i++) {
			__u32 src = ip6->saddr.in6_u.u6_addr32[i];
			__u32 dst = ip6->daddr.in6_u.u6_addr32[i];
			sum += (src & 0xffff) + (src >> 16) + (dst & 0xffff) + (dst >> 16);
		}
		q->pseudo = sum;
		udp = (void *)(ip6 + 1);
	} else {
		return NOT_FOR_US;
	}
	if ((void *)(udp + 1) > data_end)
		return NOT_FOR_US;
	__u32 zero = 0;
	struct port_set *served = bpf_map_lookup_elem(&ports, &zero);
	__u16 port = bpf_ntohs(udp->dest);
	if (!served || !((served->words[port / 64] >> (port % 64)) & 1))
		return NOT_FOR_US;
	if (bpf_ntohs(udp->len) != ip_payload)
		return NOT_A_PLAIN_QUERY;
	q->dns_off = (void *)(udp + 1) - data;
	// The addresses were summed as read, in network order: convert once,
	// and add the protocol (the length comes with the reply's).
	q->pseudo = bpf_ntohs(fold(q->pseudo)) + IPPROTO_UDP;
	*found = udp;
	return ANSWERABLE;
}

// Swaps MACs, addresses and ports, and writes lengths and checksums;
// the packet already has its final length.
static __always_inline int turn_around(struct xdp_md *ctx, const struct query *q, __u32 udp_sum)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return -1;
	__u8 mac[ETH_ALEN];
	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
	__u16 udp_len = sizeof(struct udphdr) + q->reply_len;
	struct udphdr *udp;
	if (q->v6) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end)
			return -1;
		struct in6_addr addr = ip6->saddr;
		ip6->saddr = ip6->daddr;
		ip6->daddr = addr;
		ip6->payload_len = bpf_htons(udp_len);
		ip6->hop_limit = REPLY_HOP_LIMIT;
		udp = (void *)(ip6 + 1);
	} else {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end)
			return -1;
		__u32 addr = ip->saddr;
		ip->saddr = ip->daddr;
		ip->daddr = addr;
		ip->tot_len = bpf_htons(sizeof(*ip) + udp_len);
		ip->ttl = REPLY_HOP_LIMIT;
		ip->check = 0;
		__u32 sum = 0;
		const __u16 *words = (const __u16 *)ip;
		for (int i = 0; i < (int)sizeof(*ip) / 2; i++)
			sum += words[i];
		ip->check = ~fold(sum);
		udp = (void *)(ip + 1);
	}
	if ((void *)(udp + 1) > data_end)
		return -1;
	__u16 port = udp->source;
	udp->source = udp->dest;
	udp->dest = port;
	udp->len = bpf_htons(udp_len);
	// Ports and length: the pseudo-header's length was counted by the caller.
	udp_sum += bpf_ntohs(udp->source) + bpf_ntohs(udp->dest) + udp_len;
	__u16 check = ~fold(udp_sum);
	udp->check = bpf_htons(check ? check : 0xffff);
	return 0;
}

// Grows the packet by `grow` octets where growing its tail alone failed
// (generic XDP and veth often lack tailroom: on lo, about 350 octets):
// up to HEAD_GROWTH octets at its head (XDP leaves 256 octets of
// headroom, less the kernel's frame metadata, 40 octets on Linux 6) and
// the rest at its tail, then moves the
// Ethernet, IP and UDP headers to the new start. What follows them is
// rewritten whole from the scratch head. Returns 0 on success; on
// failure the packet is as it came.
static __always_inline int grow_at_both_ends(struct xdp_md *ctx, const struct query *q, struct scratch *s, int grow)
{
	int at_head = grow < HEAD_GROWTH ? grow : HEAD_GROWTH;
	__u32 headers = q->v6 ? HEADERS_V6 : HEADERS_V4;
	if (q->dns_off != headers || bpf_xdp_load_bytes(ctx, 0, s->headers, headers))
		return -1;
	if (grow > at_head && bpf_xdp_adjust_tail(ctx, grow - at_head))
		return -1;
	if (bpf_xdp_adjust_head(ctx, -at_head)) {
		bpf_xdp_adjust_tail(ctx, at_head - grow);
		return -1;
	}
	// Cannot fail: the packet only grew.
	return bpf_xdp_store_bytes(ctx, 0, s->headers, headers);
}

// Counts `reason` for the packet's interface. Global, so its code is
// verified once rather than at every verdict.
__attribute__((noinline)) int count(__u32 ifindex, __u32 reason)
{
	if (reason >= REASONS)
		return 0;
	AT_MOST(reason, REASONS - 1);
	__u32 slot = ifindex % COUNTER_SLOTS;
	struct slot_counters *claimed = bpf_map_lookup_elem(&counter_slots, &slot);
	if (claimed && claimed->ifindex == ifindex && ifindex) {
		claimed->counters.count[reason]++;
		return 0;
	}
	struct counters *c = bpf_map_lookup_elem(&counters, &ifindex);
	if (!c) {
		struct counters zero = {};
		bpf_map_update_elem(&counters, &ifindex, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&counters, &ifindex);
	}
	if (c)
		c->count[reason]++;
	return 0;
}

// Whether a query's UDP checksum `check` is right, given the sum of its
// pseudo-header (`pseudo`, length included) and of the rest of the
// segment (`rest`, the checksum field included). IPv4 may leave the
// checksum out (0); IPv6 may not (RFC 8200 section 8.1). A local sender
// (veth, lo) leaves the partial form for offload, the pseudo-header's
// sum alone, which the kernel does not verify either.
static __always_inline int checksum_ok(__u16 check, __u32 pseudo, __u32 rest, int v6)
{
	if (!check)
		return !v6;
	if (bpf_ntohs(check) == fold(pseudo))
		return 1;
	return fold(pseudo + rest) == 0xffff;
}

// Whether `source` may have one more answer now; takes its cost if so.
static __always_inline int within_limit(const struct limit *l, const struct source *source)
{
	__u64 now = bpf_ktime_get_ns();
	struct bucket *b = bpf_map_lookup_elem(&buckets, source);
	if (!b) {
		struct bucket fresh = {l->capacity_ns - l->emission_ns, now};
		bpf_map_update_elem(&buckets, source, &fresh, BPF_ANY);
		return 1;
	}
	__u64 credit = b->credit_ns + (now - b->last_ns);
	if (credit > l->capacity_ns)
		credit = l->capacity_ns;
	b->last_ns = now;
	if (credit < l->emission_ns) {
		b->credit_ns = credit;
		return 0;
	}
	b->credit_ns = credit - l->emission_ns;
	return 1;
}

// Keys the scratch's class key for a whole address (IPv4 in the first 4
// octets) of `v6`'s family in `generation`: how the `classes`, `trusted`
// and `rrl_whitelist` tries are asked.
static __always_inline void set_class_key(struct scratch *s, __u32 generation, int v6, const __u8 *address)
{
	s->class_key.prefixlen = CLASS_PREFIX_BITS + (v6 ? 128 : 32);
	s->class_key.generation = generation;
	s->class_key.family = v6;
	__builtin_memcpy(s->class_key.address, address, 16);
}

// Finds into `found` the client's class (NULL where no block holds it)
// and the draw of the question in the scratch key for that class, or
// everyone's. As user space's locate(), a /0 subnet is unclassified with
// scope 0, and a longer one is placed by its address, zero past the
// prefix, as a whole address.
static __always_inline void find_draw(struct scratch *s, const struct query *q, __u32 generation, struct client_draw *found)
{
	__builtin_memcpy(&s->draw_key.question, &s->key, sizeof(s->key));
	struct class unclassified = {UNCLASSIFIED, 0};
	struct class *class = &unclassified;
	if (!q->from_subnet || q->subnet_bits) {
		set_class_key(s, generation, q->client_v6, q->client);
		class = bpf_map_lookup_elem(&classes, &s->class_key);
	}
	struct draw *d = NULL;
	if (class) {
		s->draw_key.region = class->region;
		d = bpf_map_lookup_elem(&draws, &s->draw_key);
	}
	if (!d) {
		s->draw_key.region = EVERYONE;
		d = bpf_map_lookup_elem(&draws, &s->draw_key);
	}
	found->classed = class != NULL;
	found->scope = class ? class->scope : 0;
	found->found = d != NULL;
	if (d)
		found->draw = *d;
}

// The client's draw for the question in the scratch key, from the draw
// cache, or found and cached. Reads the epoch before the maps: a packet
// that straddles a sync caches what it found under the epoch it read,
// which the sync retires.
static __always_inline struct client_draw *client_draw(struct scratch *s, const struct query *q, const struct config *cfg,
						       __u32 generation)
{
	s->client_key.epoch = cfg->epoch;
	s->client_key.kind = q->client_v6 | (q->from_subnet && q->subnet_bits == 0) << 1;
	s->client_key.question = s->key;
	__builtin_memcpy(s->client_key.address, q->client, 16);
	const __u32 *words = (const __u32 *)&s->client_key;
	__u32 hash = 0;
	for (__u32 i = 0; i < CLIENT_KEY_WORDS; i++)
		hash = (hash ^ words[i]) * 0x9e3779b1;
	__u32 index = hash >> (32 - DRAW_SLOTS_LOG2);
	struct draw_slot *slot = bpf_map_lookup_elem(&draw_cache, &index);
	if (!slot) {
		find_draw(s, q, generation, &s->client_draw);
		return &s->client_draw;
	}
	const __u32 *held = (const __u32 *)&slot->key;
	int same = 1;
	for (__u32 i = 0; i < CLIENT_KEY_WORDS; i++)
		same &= held[i] == words[i];
	if (!same) {
		find_draw(s, q, generation, &slot->found);
		slot->key = s->client_key;
	}
	return &slot->found;
}

// The routed answer to the question in the scratch key for this client,
// or NULL: draws one of the variants of the client's class (or
// everyone's, where its region has none). Sets `*scope` to the reply's
// ECS scope.
static __always_inline struct answer *routed_answer(struct scratch *s, const struct query *q, const struct config *cfg, __u32 generation,
						    __u8 *scope)
{
	struct client_draw *found = client_draw(s, q, cfg, generation);
	if (!found->found)
		return NULL;
	const struct draw *d = &found->draw;
	// A subnet that was not used says nothing about the answer's reach.
	*scope = 0;
	if (d->scoped && q->from_subnet) {
		// User space installs the blocks wherever a draw is scoped.
		if (!found->classed)
			return NULL;
		*scope = found->scope;
	}
	__u32 point = bpf_get_prandom_u32();
	__u32 id = d->variants[0];
	for (__u32 i = 0; i < MAX_VARIANTS && i < d->count; i++) {
		id = d->variants[i];
		if (d->thresholds[i] >= point)
			break;
	}
	if (id >= ROUTED_VARIANTS)
		return NULL;
	__u32 slot = generation * ROUTED_VARIANTS + id;
	return bpf_map_lookup_elem(&variants, &slot);
}

// Whether `entry` is for the name in the scratch (`name_len` octets, zero
// to the end of its last word): the key's hash may be another name's.
static __always_inline int same_name(const struct entry *entry, const struct scratch *s, __u32 name_len)
{
	const __u64 *held = (const __u64 *)entry->name;
	for (__u32 word = 0; word < NAME_WORDS; word++) {
		if (word * 8 >= name_len)
			return 1;
		if (held[word] != s->name[word])
			return 0;
	}
	return 1;
}

// Counts one more asking of `question` on this CPU.
static __always_inline void count_asked(const struct question_key *question)
{
	__u64 *asked_count = bpf_map_lookup_elem(&asked, question);
	if (asked_count) {
		(*asked_count)++;
		return;
	}
	__u64 first = 1;
	bpf_map_update_elem(&asked, question, &first, BPF_NOEXIST);
}

// Whether the OPT RDATA in `ecs` (`len` octets, 0 < len <= ECS_MAX) is
// one Client Subnet option user space takes as is: a known family, a
// source prefix no longer than its addresses, exactly the octets it needs,
// zero past it (else user space answers FORMERR), and scope 0 (RFC 7871
// section 6; user space would echo another).
static __always_inline int plain_client_subnet(const __u8 *ecs, __u32 len)
{
	if (len < ECS_MIN || read16(ecs) != OPTION_CLIENT_SUBNET || read16(ecs + 2) != len - 4 || ecs[ECS_SCOPE] != 0)
		return 0;
	__u16 family = read16(ecs + 4);
	__u32 source = ecs[6];
	if ((family != 1 && family != 2) || source > (family == 1 ? 32 : 128) || len != ECS_MIN + (source + 7) / 8)
		return 0;
	if (source % 8 == 0)
		return 1;
	__u32 last = ECS_MIN + source / 8;
	AT_MOST(last, ECS_MAX - 1);
	return !(ecs[last] & (0xff >> (source % 8)));
}

// Whether the query's source may speak for its clients (user space's
// `trusted_subnet_senders`).
static __always_inline int trusted_sender(struct scratch *s, const struct query *q, const struct config *cfg, __u32 generation)
{
	if (cfg->trust_all)
		return 1;
	set_class_key(s, generation, q->v6, q->client);
	return bpf_map_lookup_elem(&trusted, &s->class_key) != NULL;
}

// Whether the packet's sender is in the RRL whitelist.
static __always_inline int whitelisted(struct scratch *s, const struct query *q)
{
	set_class_key(s, 0, q->v6, q->sender);
	return bpf_map_lookup_elem(&rrl_whitelist, &s->class_key) != NULL;
}

// What response rate limiting does with a reply of `entry`'s class to
// the packet's sender: counts it in the sender's network's bucket.
static __always_inline int rrl_verdict(struct scratch *s, const struct query *q, const struct entry *entry, const struct rrl_settings *r)
{
	if (r->whitelist && whitelisted(s, q))
		return RRL_SEND;
	__builtin_memset(&s->rrl_key, 0, sizeof(s->rrl_key));
	s->rrl_key.family = q->v6;
	__builtin_memcpy(s->rrl_key.prefix, q->sender, 8);
	if (q->v6)
		s->rrl_key.prefix[7] = 0;
	else
		__builtin_memset(&s->rrl_key.prefix[3], 0, 5);
	__builtin_memcpy(s->rrl_key.response_class, entry->response_class, 8);
	__u64 now = bpf_ktime_get_ns();
	struct rrl_bucket *bucket = bpf_map_lookup_elem(&rrl_buckets, &s->rrl_key);
	if (!bucket) {
		struct rrl_bucket fresh = {now + r->interval_ns, 0, 0};
		bpf_map_update_elem(&rrl_buckets, &s->rrl_key, &fresh, BPF_ANY);
		return RRL_SEND;
	}
	__u64 full_at = (bucket->full_at > now ? bucket->full_at : now) + r->interval_ns;
	if (full_at - now <= r->depth_ns) {
		bucket->full_at = full_at;
		return RRL_SEND;
	}
	bucket->limited++;
	return r->slip && bucket->limited % r->slip == 0 ? RRL_SLIP : RRL_DROP;
}

// Passes the packet up, counted under `reason`.
static __always_inline int pass(struct xdp_md *ctx, __u32 reason)
{
	count(ctx->ingress_ifindex, reason);
	return XDP_PASS;
}

// What becomes of a query a stage stopped at `reason`: counted, and
// dropped where a limit drops it, else passed up.
static __always_inline int not_answered(struct xdp_md *ctx, __u32 reason)
{
	count(ctx->ingress_ifindex, reason);
	return reason == RATE_LIMITED_DROPPED || reason == RRL_DROPPED ? XDP_DROP : XDP_PASS;
}

// The OPT record's length, in the query and in the reply alike (the
// reply echoes the Client Subnet at its own length); 0 without EDNS.
static __always_inline __u32 opt_record_len(const struct query *q)
{
	return q->edns ? OPT_LEN + q->ecs_len : 0;
}

// Reads the header and the question: a plain query, one question and at
// most one more record, whose first label the snapshot may answer (the
// filter, before the name costs its copy and hash). Leaves the header
// and question in the scratch head, which the reply keeps, and the
// question in the scratch key, in generation 0.
static __always_inline int read_question(struct xdp_md *ctx, const struct udphdr *udp, struct query *q, struct scratch *s,
					 const struct config *cfg)
{
	const void *data_end = (void *)(long)ctx->data_end;
	const __u8 *dns = (const void *)(udp + 1);
	q->dns_len = bpf_ntohs(udp->len) - sizeof(*udp);
	if ((const void *)(dns + DNS_HEADER) > data_end)
		return NOT_A_PLAIN_QUERY;
	q->flags = read16(dns + 2);
	// Responses, other opcodes and anything but one question pass up;
	// besides the question, one (OPT) record at most.
	if ((q->flags & (FLAG_QR | OPCODE_MASK)) || read16(dns + 4) != 1 || read16(dns + 6) || read16(dns + 8))
		return NOT_A_PLAIN_QUERY;
	if (read16(dns + 10) > 1)
		return EDNS_UNSUPPORTED;
	q->edns = read16(dns + 10) == 1;
	if (!first_label_known(dns + DNS_HEADER, data_end, cfg, q->generation))
		return NO_ENTRY;

	// The query's header: its ID stays the reply's, the rest is summed
	// to check the query's checksum, then overwritten.
	__builtin_memcpy(s->head, dns, DNS_HEADER);
	q->check = udp->check;
	q->rest_sum = bpf_ntohs(udp->source) + bpf_ntohs(udp->dest) + bpf_ntohs(udp->len) + bpf_ntohs(udp->check);
	__u32 name_len = read_name(ctx, q->dns_off + DNS_HEADER);
	if (!name_len || name_len > MAX_NAME)
		return NOT_A_PLAIN_QUERY;
	AT_MOST(name_len, MAX_NAME);
	// Past the name, offsets vary: read through the helper, which checks
	// them, rather than through packet pointers the verifier cannot bound.
	if (bpf_xdp_load_bytes(ctx, q->dns_off + DNS_HEADER + name_len, &s->head[DNS_HEADER + name_len], 4))
		return NOT_A_PLAIN_QUERY;
	__builtin_memcpy(s->key.qtype, &s->head[DNS_HEADER + name_len], 2);
	__builtin_memcpy(s->key.qclass, &s->head[DNS_HEADER + name_len + 2], 2);
	q->name_len = name_len;
	q->head_len = DNS_HEADER + name_len + 4;
	return ANSWERABLE;
}

// Reads the OPT record's Client Subnet option, `len` octets (1 to
// ECS_MAX), into the scratch, zero past it. The subnet stands for the
// client where its sender is trusted.
static __always_inline int read_client_subnet(struct xdp_md *ctx, struct query *q, struct scratch *s, const struct config *cfg, __u32 len)
{
	__u32 at = q->head_len + OPT_LEN;
	FROM_1_TO(len, ECS_MAX);
	if (bpf_xdp_load_bytes(ctx, q->dns_off + at, s->ecs, len))
		return NOT_A_PLAIN_QUERY;
	// Zero past the option: summed whole.
	q->rest_sum += placed_at(sum_bytes(s->ecs, ECS_MAX), at);
	if (!plain_client_subnet(s->ecs, len))
		return EDNS_UNSUPPORTED;
	if (trusted_sender(s, q, cfg, q->generation)) {
		q->from_subnet = 1;
		q->subnet_bits = s->ecs[6];
		q->client_v6 = read16(s->ecs + 4) == 2;
		__builtin_memcpy(q->client, s->ecs + ECS_MIN, 16);
	}
	q->ecs_len = len;
	return ANSWERABLE;
}

// Reads the OPT record, where the query has one: root owner, version 0,
// no extended RCODE, no option but a Client Subnet. It gives the size the
// reply may take, and the flags it echoes. The query must end with it
// (or with the question): trailing octets pass up.
static __always_inline int read_edns(struct xdp_md *ctx, struct query *q, struct scratch *s, const struct config *cfg)
{
	q->size_limit = MIN_UDP_PAYLOAD;
	__builtin_memset(s->ecs, 0, ECS_MAX);
	if (q->edns) {
		__u8 opt[OPT_LEN];
		if (bpf_xdp_load_bytes(ctx, q->dns_off + q->head_len, opt, OPT_LEN) || opt[0] != 0 || read16(opt + 1) != TYPE_OPT)
			return NOT_A_PLAIN_QUERY;
		q->rest_sum += placed_at(sum_bytes(opt, OPT_LEN), q->head_len);
		if (opt[5] != 0 || opt[6] != 0)
			return EDNS_UNSUPPORTED;
		__u32 options_len = read16(opt + 9);
		if (options_len > ECS_MAX)
			return EDNS_UNSUPPORTED;
		if (options_len) {
			int reason = read_client_subnet(ctx, q, s, cfg, options_len);
			if (reason != ANSWERABLE)
				return reason;
		}
		__u32 server = cfg->udp_payload > MIN_UDP_PAYLOAD ? cfg->udp_payload : MIN_UDP_PAYLOAD;
		__u32 client = read16(opt + 3);
		q->size_limit = client < MIN_UDP_PAYLOAD ? MIN_UDP_PAYLOAD : client > server ? server : client;
		q->echoed_flags = read16(opt + 7) & (EDNS_DO | EDNS_CO);
	}
	if (q->dns_len != q->head_len + opt_record_len(q))
		return NOT_A_PLAIN_QUERY;
	return ANSWERABLE;
}

// Finds the reply to the question in the scratch key: the entry's own,
// or for a routed question the variant drawn for the client's class. It
// must fit in what the client takes, else user space truncates it.
static __always_inline int find_answer(struct query *q, struct scratch *s, const struct config *cfg, const struct entry **entry,
				       struct answer **reply)
{
	// Hits and misses alike, while the key is still in generation 0.
	if (cfg->count_asked)
		count_asked(&s->key);
	s->key.generation = q->generation;
	struct entry *e = bpf_map_lookup_elem(&answers, &s->key);
	if (!e || !same_name(e, s, q->name_len))
		return NO_ENTRY;
	struct answer *a = &e->reply;
	q->answered = ANSWERED_STATIC;
	if (e->routed) {
		a = routed_answer(s, q, cfg, q->generation, &q->scope);
		q->answered = ANSWERED_ROUTED;
	}
	if (!a)
		return NO_ENTRY;
	__u32 body_len = a->len;
	if (body_len < 1 || body_len > MAX_BODY)
		return NO_ENTRY;
	q->body_len = body_len;
	q->reply_len = q->head_len + body_len + opt_record_len(q);
	if (q->reply_len > q->size_limit)
		return TOO_LARGE;
	*entry = e;
	*reply = a;
	return ANSWERABLE;
}

// Whether the kernel may send the reply to `entry`'s question. Not to a
// corrupted query: the kernel's UDP layer would drop it before user space
// saw it. Then the limits: only what the kernel would answer costs
// tokens, as user space applies its own limits to the rest. A slip
// shortens the reply to its head.
static __always_inline int admit(struct query *q, struct scratch *s, const struct limit *l, const struct rrl_settings *rrl,
				 const struct entry *entry)
{
	if (!checksum_ok(q->check, q->pseudo + q->dns_len + sizeof(struct udphdr), q->rest_sum + sum_head(q->head_len), q->v6))
		return BAD_CHECKSUM;
	if (l->enabled && !within_limit(l, &q->source))
		return l->drop ? RATE_LIMITED_DROPPED : RATE_LIMITED_PASSED;
	if (!rrl->enabled)
		return ANSWERABLE;
	int verdict = rrl_verdict(s, q, entry, rrl);
	if (verdict == RRL_DROP)
		return RRL_DROPPED;
	// A slipped reply is the header, the question and the OPT record the
	// answer would carry (RFC 6891 section 7), with TC set, byte for byte
	// as user space's: a real client retries over TCP. The kernel answers
	// only queries whose OPT holds at most a Client Subnet option, echoed
	// at its own length: a slip is exactly as long as its query.
	if (verdict == RRL_SLIP) {
		q->slipped = 1;
		q->answered = RRL_SLIPPED;
		q->reply_len = q->head_len + opt_record_len(q);
	}
	return ANSWERABLE;
}

// Writes the reply's header and OPT record into the scratch, the
// question already in the head, and returns the UDP checksum's sum of the
// reply but its ports (turn_around adds them).
static __always_inline __u32 compose_reply(struct query *q, struct scratch *s, const struct config *cfg, const struct answer *a)
{
	// The header: ID kept, QR, RD copied, AA and RCODE from the answer.
	__u16 reply_flags = FLAG_QR | (q->flags & FLAG_RD) | a->flags;
	__u16 header[5] = {reply_flags, 1, a->counts[0], a->counts[1], a->counts[2] + q->edns};
	if (q->slipped) {
		__u16 truncated[5] = {reply_flags | FLAG_TC, 1, 0, 0, q->edns};
		__builtin_memcpy(header, truncated, sizeof(header));
	}
	for (int i = 0; i < 5; i++) {
		s->head[2 + 2 * i] = header[i] >> 8;
		s->head[3 + 2 * i] = header[i] & 0xff;
	}
	q->opt_at = q->head_len + (q->slipped ? 0 : q->body_len);
	__u8 reply_opt[OPT_LEN] = {0, 0, TYPE_OPT, cfg->udp_payload >> 8, cfg->udp_payload & 0xff, 0, 0, q->echoed_flags >> 8, 0, 0, q->ecs_len};
	__builtin_memcpy(s->opt, reply_opt, OPT_LEN);
	// The subnet echoed as asked, with the answer's scope.
	s->ecs[ECS_SCOPE] = q->scope;

	__u32 udp_sum = q->pseudo + q->reply_len + sizeof(struct udphdr) + sum_head(q->head_len) +
			(q->slipped ? 0 : placed_at(a->sum, q->head_len));
	if (q->edns)
		udp_sum += placed_at(sum_bytes(s->opt, OPT_LEN), q->opt_at) + placed_at(sum_bytes(s->ecs, ECS_MAX), q->opt_at + OPT_LEN);
	return udp_sum;
}

// Gives the packet the reply's length: 0 on success; on failure the
// packet is as it came.
static __always_inline int fit_to_reply(struct xdp_md *ctx, const struct query *q, struct scratch *s)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	int grow = q->dns_off + q->reply_len - (__u32)(data_end - data);
	// Shrinking (a frame with an Ethernet trailer) cannot fail.
	return bpf_xdp_adjust_tail(ctx, grow) && (grow < 0 || grow_at_both_ends(ctx, q, s, grow));
}

// Turns the resized packet around and writes the reply into it: the
// whole head, question included (grown at the head, the packet no longer
// holds the question where the reply has it), the body, the OPT record
// and its Client Subnet. None of it can fail on a packet the stages let by.
static __always_inline int store_reply(struct xdp_md *ctx, const struct query *q, struct scratch *s, struct answer *a, __u32 udp_sum)
{
	if (turn_around(ctx, q, udp_sum))
		return -1;
	__u32 head_len = q->head_len;
	FROM_1_TO(head_len, HEAD_MAX - 1);
	if (bpf_xdp_store_bytes(ctx, q->dns_off, s->head, head_len))
		return -1;
	__u32 body_len = q->body_len;
	FROM_1_TO(body_len, MAX_BODY);
	if (!q->slipped && bpf_xdp_store_bytes(ctx, q->dns_off + head_len, a->body, body_len))
		return -1;
	if (q->edns && bpf_xdp_store_bytes(ctx, q->dns_off + q->opt_at, s->opt, OPT_LEN))
		return -1;
	__u32 ecs_len = q->ecs_len;
	if (ecs_len) {
		FROM_1_TO(ecs_len, ECS_MAX);
		if (bpf_xdp_store_bytes(ctx, q->dns_off + q->opt_at + OPT_LEN, s->ecs, ecs_len))
			return -1;
	}
	return 0;
}

// Rewrites the packet into the reply and sends it back whence it came.
static __always_inline int send_reply(struct xdp_md *ctx, struct query *q, struct scratch *s, const struct config *cfg, struct answer *a)
{
	__u32 udp_sum = compose_reply(q, s, cfg, a);
	if (fit_to_reply(ctx, q, s))
		return pass(ctx, ADJUST_TAIL_FAILED);
	// Resized, the packet cannot pass up as it came.
	if (store_reply(ctx, q, s, a, udp_sum))
		return XDP_DROP;
	count(ctx->ingress_ifindex, q->answered);
	return XDP_TX;
}

// A query's life in stages: each goes on from what those before it left
// in `q` and the scratch, and returns ANSWERABLE, or the reason the query
// is not answered here.
SEC("xdp")
int answer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct query q = {};
	struct udphdr *udp = NULL;
	int reason = find_udp(data, data_end, &q, &udp);
	if (reason != ANSWERABLE || !udp)
		return pass(ctx, reason);
	__u32 zero = 0;
	__u32 *live_generation = bpf_map_lookup_elem(&live, &zero);
	if (!live_generation)
		return XDP_PASS;
	// Read once: everything below answers from this generation.
	__u32 generation = *(volatile __u32 *)live_generation;
	if (generation == SUSPENDED)
		return pass(ctx, SUSPENDED_PASS);
	q.generation = generation;
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	struct config *cfg = bpf_map_lookup_elem(&config, &generation);
	struct limit *l = bpf_map_lookup_elem(&limit, &zero);
	struct rrl_settings *rrl = bpf_map_lookup_elem(&rrl_settings, &zero);
	// None of these lookups can fail: the maps are arrays holding these indexes.
	if (!s || !cfg || !l || !rrl)
		return XDP_PASS;

	const struct entry *entry = NULL;
	struct answer *reply = NULL;
	reason = read_question(ctx, udp, &q, s, cfg);
	if (reason == ANSWERABLE)
		reason = read_edns(ctx, &q, s, cfg);
	if (reason == ANSWERABLE)
		reason = find_answer(&q, s, cfg, &entry, &reply);
	if (reason == ANSWERABLE)
		reason = admit(&q, s, l, rrl, entry);
	if (reason != ANSWERABLE)
		return not_answered(ctx, reason);
	return send_reply(ctx, &q, s, cfg, reply);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
