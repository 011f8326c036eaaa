#!/usr/bin/env python3
"""Writes the seed corpora of the Pharos fuzz targets (python3 stdlib only).

    gen_seeds.py OUT_DIR [PCAP ...]

OUT_DIR/respond/ gets hand-made queries (A, AAAA, MX, ANY, with and without
EDNS, NSID, Client Subnet, cookies, mixed case; names in, beside and outside
the fuzzing zones, wildcard and DNAME names) and the DNS payloads of the
given captures (.pcap or .pcap.gz; Ethernet, raw IP or Linux cooked; UDP and
TCP), and queries signed with TSIG (RFC 8945) by the target's keys at its
time: every algorithm, cut MACs, and each refusal. Every seed starts with the selector byte the `respond` target reads
(bit 0: 0 UDP, 1 stream). Responses in a capture are kept with QR cleared,
as queries with full answer sections.

OUT_DIR/zone/ gets the fuzzing zones, the repository's demo zones, and a few
small variations of them. OUT_DIR/initial/ gets scripts of sealed
ClientHellos, whole and split, for the `initial` target. OUT_DIR/proxy/
gets PROXY protocol headers (versions 1 and 2, each family and command,
with extensions, cut, and broken) followed by a query, for `proxy`.
OUT_DIR/update/ gets UPDATE messages for example.test: every prerequisite
and kind of change, apex and CNAME cases, a newer SOA, a guarded name, a
zone not served, malformed ones, and one with an OPT and a TSIG record.
"""

import glob
import gzip
import hashlib
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

A, NS, CNAME, SOA, PTR, MX, TXT, AAAA, SRV, DNAME, OPT, DS, AXFR, ANY, CAA = 1, 2, 5, 6, 12, 15, 16, 28, 33, 39, 41, 43, 252, 255, 257


def wire_name(text):
    out = b""
    for label in text.rstrip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def option(code, body=b""):
    return struct.pack(">HH", code, len(body)) + body


NSID = option(3)
ECS_V4 = option(8, struct.pack(">HBB", 1, 24, 0) + bytes([198, 51, 100]))
ECS_V6 = option(8, struct.pack(">HBB", 2, 48, 0) + bytes([0x20, 0x01, 0x0D, 0xB8, 0x12, 0x34]))
ECS_ZERO = option(8, struct.pack(">HBB", 1, 0, 0))
COOKIE = option(10, bytes(range(8)))
KEEPALIVE = option(11)
PADDING = option(12, bytes(16))


def query(name, qtype, edns=None, ident=0xBEEF, flags=0x0100, qclass=1, options=b"", version=0, do=False):
    """A query; `edns` is the advertised UDP payload size, or None for no OPT."""
    packet = struct.pack(">HHHHHH", ident, flags, 1, 0, 0, 0 if edns is None else 1)
    packet += wire_name(name) + struct.pack(">HH", qtype, qclass)
    if edns is not None:
        ttl = (version << 16) | (0x8000 if do else 0)
        packet += b"\0" + struct.pack(">HHIH", OPT, edns, ttl, len(options)) + options
    return packet


# As fuzz/src/lib.rs has them: the time the target answers at, and its keys' secret.
FUZZ_NOW = 1_800_000_000
TSIG_SECRET = b"the fuzzing snapshot's TSIG secret"
TSIG, CLASS_ANY = 250, 255
HMACS = {"hmac-sha1": "sha1", "hmac-sha224": "sha224", "hmac-sha256": "sha256", "hmac-sha384": "sha384", "hmac-sha512": "sha512"}


def signed(packet, algorithm="hmac-sha256", key=None, time=FUZZ_NOW, mac_len=None, secret=TSIG_SECRET):
    """`packet` with a TSIG record (RFC 8945) appended, by the fuzzing key of
    `algorithm` (or the key named `key`), signed at `time`, its MAC cut
    to `mac_len` octets if given."""
    import hmac

    key_name = wire_name(key or f"{algorithm}.key")
    algorithm_name = wire_name(algorithm)
    times = struct.pack(">Q", time)[2:] + struct.pack(">H", 300)
    variables = key_name + struct.pack(">HI", CLASS_ANY, 0) + algorithm_name + times + struct.pack(">HH", 0, 0)
    mac = hmac.new(secret, packet + variables, HMACS[algorithm]).digest()[:mac_len]
    rdata = algorithm_name + times + struct.pack(">H", len(mac)) + mac + packet[:2] + struct.pack(">HH", 0, 0)
    record = key_name + struct.pack(">HHIH", TSIG, CLASS_ANY, 0, len(rdata)) + rdata
    additional = struct.unpack(">H", packet[10:12])[0] + 1
    return packet[:10] + struct.pack(">H", additional) + packet[12:] + record


def signed_seeds():
    seeds = []
    for algorithm in HMACS:
        seeds.append((0, signed(query("www.example.test", A, edns=1232), algorithm)))
        seeds.append((1, signed(query("www.example.test", AAAA), algorithm)))
    seeds += [
        (0, signed(query("big.example.test", TXT))),  # truncated over UDP, room kept for the record
        (0, signed(query("many.example.test", A, edns=512, options=NSID))),
        (1, signed(query("example.org", A, edns=1232))),  # REFUSED, signed
        (0, signed(query("example.test", A, flags=0x2900))),  # NOTIMP, signed
        (0, signed(query("www.example.test", A, edns=1232, version=1))),  # BADVERS, signed
        (0, signed(query("www.example.test", A), mac_len=16)),  # cut as far as allowed
        (0, signed(query("www.example.test", A), mac_len=10)),  # BADTRUNC
        (0, signed(query("www.example.test", A), "hmac-sha1", mac_len=10)),
        (0, signed(query("www.example.test", A), key="unknown.key")),  # BADKEY
        (0, signed(query("www.example.test", A), secret=b"wrong")),  # BADSIG
        (0, signed(query("www.example.test", A), time=FUZZ_NOW - 1000)),  # BADTIME
    ]
    tsig_first = signed(query("www.example.test", A))
    tsig_first = tsig_first[:11] + b"\2" + tsig_first[12:] + b"\0" + struct.pack(">HHIH", OPT, 1232, 0, 0)
    seeds.append((0, tsig_first))  # not the last record: FORMERR
    return seeds


def handmade():
    names = [
        "example.test", "EXAMPLE.TEST", "www.example.test", "WwW.ExAmPlE.tEsT", "mixedcase.example.test",
        "host.example.test", "mail.example.test", "nope.example.test", "chain1.example.test",
        "loop1.example.test", "self.example.test", "out.example.test", "intowild.example.test",
        "intodname.example.test", "intosub.example.test", "intokid.example.test", "intoother.example.test",
        "anything.wild.example.test", "Deep.Er.WILD.example.test", "explicit.wild.example.test",
        "x.cw.example.test", "x.cwout.example.test", "a.cwloop.example.test", "x.deep.example.test",
        "ent.x.deep.example.test", "zz.x.deep.example.test", "c.d.e.f.example.test",
        "host.sub.example.test", "sub.example.test", "ns.sub.example.test", "www.kid.example.test",
        "kid.example.test", "nothing.kid.example.test", "x.old.example.test", "a.b.old2.example.test",
        "x.oldout.example.test", "www.oldkid.example.test", "a.oldself.example.test",
        "big.example.test", "jumbo.example.test", "many.example.test",
        "_sip._udp.example.test", "office.example.test", "unknown.example.test",
        "www.other.test", "other.test", "example.org", ".",
        "static.example.test", "rr.example.test", "weighted.example.test", "failover.example.test",
        "down.example.test", "crowd.example.test", "svc.x.deep.example.test", "PROB.example.test",
    ]
    seeds = []
    for index, name in enumerate(names):
        for qtype in (A, AAAA, MX, ANY):
            seeds.append((0, query(name, qtype, ident=index)))
            seeds.append((0, query(name, qtype, edns=1232, options=NSID, ident=index)))
        seeds.append((1, query(name, ANY, edns=4096, options=NSID + ECS_V4, do=True)))
    for name in ("prob.example.test", "crowd.example.test", "rr.example.test"):
        for client in range(8):  # every client address and a few random seeds
            for edns, options in ((None, b""), (1232, ECS_V4), (4096, ECS_V6), (512, ECS_ZERO + NSID)):
                seeds.append((client << 1, query(name, A, edns=edns, options=options)))
                seeds.append((client << 1 | 1, query(name, AAAA, edns=edns, options=options)))
    for name in ("example.test", "big.example.test", "many.example.test", "jumbo.example.test"):
        for qtype in (TXT, A, ANY, NS, SOA, DS, CAA):
            for edns, options in ((None, b""), (100, b""), (512, ECS_V6), (1400, NSID), (4096, COOKIE + KEEPALIVE), (65535, PADDING)):
                seeds.append((0, query(name, qtype, edns=edns, options=options)))
            seeds.append((1, query(name, qtype, edns=65535)))
    seeds += [
        (0, query("www.example.test", A, edns=1232, options=ECS_ZERO)),
        (0, query("www.example.test", A, edns=1232, version=1)),  # BADVERS
        (0, query("example.test", AXFR)),
        (1, query("example.test", AXFR, edns=1232)),
        (0, query("example.test", SOA, qclass=3)),  # CHAOS
        (0, query("example.test", SOA, qclass=255)),
        (0, query("example.test", OPT)),
        (0, query("example.test", 254)),  # MAILA
        (0, query("example.test", A, flags=0x2900)),  # opcode UPDATE
        (0, query("example.test", A, flags=0x0110)),  # RD and CD
        (0, query("x.example.test", DNAME)),
        (0, query("old.example.test", DNAME, edns=1232)),
        (0, query("www.example.test", CNAME)),
        (0, query("sub.example.test", NS, edns=1232)),
        (0, query("sub.example.test", DS, edns=1232)),
        (0, query("example.test", A, edns=1232) + query("example.test", A)[12:]),  # trailing bytes
    ]
    two_opts = query("example.test", A, edns=1232)
    two_opts = two_opts[:10] + b"\0\2" + two_opts[12:] + two_opts[-11:]
    seeds.append((0, two_opts))
    compressed = struct.pack(">HHHHHH", 7, 0x0100, 1, 1, 0, 1) + wire_name("www.example.test") + struct.pack(">HH", A, 1)
    compressed += b"\xc0\x0c" + struct.pack(">HHIH", A, 1, 60, 4) + bytes([192, 0, 2, 1])
    compressed += b"\0" + struct.pack(">HHIH", OPT, 1232, 0, 0)
    seeds.append((0, compressed))
    return seeds + signed_seeds()


def pcap_payloads(path):
    """DNS payloads (port 53) of a classic pcap file."""
    data = (gzip.open if path.endswith(".gz") else open)(path, "rb").read()
    if len(data) < 24:
        return []
    endian = {b"\xd4\xc3\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">", b"\x4d\x3c\xb2\xa1": "<", b"\xa1\xb2\x3c\x4d": ">"}.get(data[:4])
    if endian is None:
        print(f"gen_seeds: {path}: not a classic pcap file, skipped", file=sys.stderr)
        return []
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    payloads = []
    pos = 24
    while pos + 16 <= len(data):
        caplen = struct.unpack(endian + "I", data[pos + 8:pos + 12])[0]
        frame = data[pos + 16:pos + 16 + caplen]
        pos += 16 + caplen
        if linktype == 1:  # Ethernet, maybe with VLAN tags
            offset, ethertype = 14, frame[12:14]
            while ethertype == b"\x81\x00" and len(frame) >= offset + 4:
                ethertype, offset = frame[offset + 2:offset + 4], offset + 4
            ip = frame[offset:]
        elif linktype in (101, 12, 228, 229):  # raw IP
            ip = frame
        elif linktype == 113:  # Linux cooked
            ip = frame[16:]
        elif linktype == 0:  # BSD loopback
            ip = frame[4:]
        else:
            continue
        payload = transport_payload(ip)
        if payload:
            payloads.append(payload)
    return payloads


def transport_payload(ip):
    """(transport byte, DNS message) of a UDP or TCP segment to or from port 53."""
    if not ip:
        return None
    version = ip[0] >> 4
    if version == 4:
        header = (ip[0] & 15) * 4
        proto, total = ip[9], struct.unpack(">H", ip[2:4])[0]
        segment = ip[header:total] if total >= header else ip[header:]
    elif version == 6:
        proto, segment = ip[6], ip[40:40 + struct.unpack(">H", ip[4:6])[0]]
    else:
        return None
    if proto == 17 and len(segment) >= 8:
        ports, body, transport = struct.unpack(">HH", segment[:4]), segment[8:], 0
    elif proto == 6 and len(segment) >= 20:
        ports, body = struct.unpack(">HH", segment[:4]), segment[(segment[12] >> 4) * 4:]
        if len(body) < 2 or struct.unpack(">H", body[:2])[0] != len(body) - 2:
            return None  # not one whole length-prefixed message
        body, transport = body[2:], 1
    else:
        return None
    if 53 not in ports or len(body) < 12:
        return None
    if body[2] & 0x80:  # a response: keep it as a query carrying records
        body = body[:2] + bytes([body[2] & 0x7F]) + body[3:]
    return transport, body


def write_corpus(directory, seeds):
    os.makedirs(directory, exist_ok=True)
    written = set()
    for seed in seeds:
        name = hashlib.sha1(seed).hexdigest()
        if name not in written:
            written.add(name)
            with open(os.path.join(directory, name), "wb") as out:
                out.write(seed)
    return len(written)


def zone_seeds():
    texts = []
    for path in sorted(glob.glob(os.path.join(HERE, "zones", "*.zone")) + glob.glob(os.path.join(REPO, "zones", "*.zone"))):
        with open(path, "rb") as zone:
            text = zone.read()
        # The target loads every text as example.test: keep files of other origins
        # loadable by dropping their $ORIGIN line.
        if b"$ORIGIN example.test." not in text:
            text = b"\n".join(line for line in text.split(b"\n") if not line.startswith(b"$ORIGIN"))
        texts.append(text)
        texts.append(text.replace(b"\n", b"\r\n"))
    small = b"$TTL 300\n@ SOA ns hm 1 2 3 4 5\n NS ns\nns A 192.0.2.1\n"
    texts += [
        small,
        small + b"* A 192.0.2.2\nw CNAME x.y\n*.y MX 1 w\n",
        small + b"d DNAME example.test.\nsub NS ns.sub\nns.sub AAAA ::1\n",
        small + b"t TXT ( \"a\" \"b\" ; comment\n \"c\" )\nl LOC 0 0 0 N 0 0 0 E 0m\n",
        small + b"g TYPE1234 \\# 3 010203\ns SRV 0 0 0 @\nm MX 0 @\n",
        b"$ORIGIN example.test.\n@ 60 IN SOA @ @ 0 0 0 0 0\n@ 60 IN NS @\n$ORIGIN sub.example.test.\nx 60 IN A 192.0.2.1\n",
    ]
    return texts


def client_hello(name, alpn_count):
    """A TLS 1.3 ClientHello handshake message with SNI and ALPN."""
    sni_entry = b"\x00" + struct.pack(">H", len(name)) + name
    sni = struct.pack(">H", len(sni_entry)) + sni_entry
    protocols = b"".join(bytes([len(p)]) + p for p in (b"h3-%03d" % i for i in range(alpn_count)))
    alpn = struct.pack(">H", len(protocols)) + protocols
    extensions = b"".join(struct.pack(">HH", kind, len(body)) + body for kind, body in ((0, sni), (16, alpn)))
    body = b"\x03\x03" + bytes(32) + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00" + struct.pack(">H", len(extensions)) + extensions
    return b"\x01" + struct.pack(">I", len(body))[1:] + body


def crypto_op(header, offset, data):
    """An `initial` script operation: a sealed CRYPTO frame (fuzz/src/initial.rs)."""
    return bytes([header | 2]) + struct.pack(">HH", offset, len(data)) + data


def initial_seeds():
    """Scripts for `initial`: whole and split ClientHellos, both versions, in and out of order."""
    seeds = []
    for alpn_count in (1, 120):
        hello = client_hello(b"svc.example.test", alpn_count)
        half = len(hello) // 2
        for version in (0, 0x10):
            seeds.append(crypto_op(version, 0, hello))
            first, second = crypto_op(version, 0, hello[:half]), crypto_op(version, half, hello[half:])
            seeds += [first + second, second + first, first + bytes([0x3 | 30 << 2]) + second]
    seeds.append(bytes([0x10]) + struct.pack(">H", 5) + b"\xc0\x0a\x0a\x0a\x0a")  # an unknown version
    seeds.append(bytes([0x01]) + struct.pack(">H", 6) + b"\x02\x00\x00\x00\x00\x01")  # an ACK, PING
    return seeds


V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


def proxy_v2(command, family, addresses, version=2):
    """A PROXY version 2 header: the signature, version and command, family and protocol, addresses."""
    return V2_SIGNATURE + bytes([version << 4 | command, family << 4 | 1]) + struct.pack(">H", len(addresses)) + addresses


def proxy_seeds():
    """Headers for `proxy`, each followed by a query as a proxy sends it."""
    ipv4 = bytes([198, 51, 100, 7, 192, 0, 2, 1]) + struct.pack(">HH", 56324, 53)
    ipv6 = bytes(15) + b"\x07" + bytes(15) + b"\x01" + struct.pack(">HH", 56324, 53)
    tlvs = b"\x04\x00\x03abc" + b"\xee\x00\x00"
    headers = [
        b"PROXY TCP4 198.51.100.7 192.0.2.1 56324 53\r\n",
        b"PROXY TCP6 2001:db8::7 2001:db8::1 56324 853\r\n",
        b"PROXY UNKNOWN\r\n",
        b"PROXY TCP4 198.51.100.7 192.0.2.1 56324\r\n",
        proxy_v2(1, 1, ipv4),
        proxy_v2(1, 1, ipv4 + tlvs),
        proxy_v2(1, 2, ipv6),
        proxy_v2(0, 0, b""),
        proxy_v2(1, 3, bytes(216)),
        proxy_v2(1, 4, ipv4),
        proxy_v2(2, 1, ipv4),
        proxy_v2(1, 1, ipv4, version=1),
        proxy_v2(1, 2, ipv4),
        proxy_v2(1, 1, ipv4)[:20],
    ]
    packet = query("www.example.test", A)
    return headers + [header + packet for header in headers] + [packet]


def rr(owner, rtype, rclass, ttl=0, rdata=b""):
    return wire_name(owner) + struct.pack(">HHIH", rtype, rclass, ttl, len(rdata)) + rdata


def update_message(prerequisites=(), updates=(), additional=(), zone="example.test", zone_type=SOA):
    """An UPDATE (opcode 5) for `zone` with these records, each already in wire form."""
    packet = struct.pack(">HHHHHH", 0x2136, 5 << 11, 1, len(prerequisites), len(updates), len(additional))
    packet += wire_name(zone) + struct.pack(">HH", zone_type, 1)
    return packet + b"".join(prerequisites) + b"".join(updates) + b"".join(additional)


def update_seeds():
    """UPDATE messages for `update`, against its zone example.test."""
    NONE, IN = 254, 1
    a = bytes([192, 0, 2, 77])
    soa = wire_name("ns1.example.test") + wire_name("hostmaster.example.test") + struct.pack(">IIIII", 2027010101, 7200, 3600, 1209600, 300)
    opt = b"\0" + struct.pack(">HHIH", OPT, 1232, 0, 0)
    tsig = wire_name("hmac-sha256.key") + struct.pack(">HHIH", TSIG, CLASS_ANY, 0, 2) + b"\xab\xcd"
    return [
        update_message([rr("host.example.test", A, CLASS_ANY)], [rr("new.example.test", A, IN, 300, a)]),
        update_message([rr("host.example.test", A, IN, 0, bytes([192, 0, 2, 80])), rr("host.example.test", A, IN, 0, bytes([192, 0, 2, 81]))]),
        update_message([rr("host.example.test", AAAA, NONE)], [rr("host.example.test", A, NONE, 0, bytes([192, 0, 2, 80]))]),
        update_message([rr("mail.example.test", ANY, CLASS_ANY), rr("nowhere.example.test", ANY, NONE)], [rr("mail.example.test", ANY, CLASS_ANY)]),
        update_message([], [rr("example.test", NS, CLASS_ANY), rr("example.test", SOA, CLASS_ANY), rr("example.test", ANY, CLASS_ANY)]),
        update_message([], [rr("example.test", NS, NONE, 0, wire_name("ns1.example.test")), rr("example.test", NS, NONE, 0, wire_name("ns2.elsewhere.example"))]),
        update_message([], [rr("www.example.test", A, IN, 300, a), rr("host.example.test", CNAME, IN, 300, wire_name("web.example.test"))]),
        update_message([], [rr("www.example.test", CNAME, IN, 60, b"\x03new\xc0\x0c"), rr("www.example.test", TXT, IN, 60, b"\x02hi")]),
        update_message([], [rr("example.test", SOA, IN, 3600, soa), rr("host.example.test", MX, IN, 60, b"\x00\x0a\xc0\x0c")]),
        update_message([], [rr("svc.example.test", A, IN, 300, a)]),
        update_message([rr("www.example.org", A, CLASS_ANY)], [], zone="example.org"),
        update_message([rr("www.example.org", A, CLASS_ANY)]),
        update_message([], [rr("www.example.test", A, CLASS_ANY, 300)], zone_type=A),
        update_message([rr("www.example.test", A, CLASS_ANY, 300)], [rr("www.example.test", ANY, IN, 300)]),
        update_message([], [rr("www.example.test", A, IN, 300, a)], [opt, tsig]),
    ]


def transfer_in_answer(qtype, records, ident=0x5EC0):
    """A primary's answer (QR, AA) to `qtype` for example.test, framed by its length as over TCP."""
    packet = struct.pack(">HHHHHH", ident, 0x8400, 1, len(records), 0, 0) + wire_name("example.test") + struct.pack(">HH", qtype, 1)
    packet += b"".join(records)
    return struct.pack(">H", len(packet)) + packet


def transfer_in_seeds():
    """Answers for `transfer_in`: its first octet picks the request (0 SOA, 1 IXFR, 3 AXFR; +8 sets the ID)."""
    IN, IXFR, AXFR = 1, 251, 252

    def soa(serial):
        data = wire_name("ns.example.test") + wire_name("hostmaster.example.test") + struct.pack(">IIIII", serial, 3600, 600, 86400, 300)
        return rr("example.test", SOA, IN, 300, data)

    ns = rr("example.test", NS, IN, 300, wire_name("ns.example.test"))
    www = rr("www.example.test", A, IN, 300, bytes([192, 0, 2, 1]))
    new = rr("new.example.test", A, IN, 300, bytes([192, 0, 2, 2]))
    return [
        bytes([8]) + transfer_in_answer(SOA, [soa(2)]),
        bytes([11]) + transfer_in_answer(AXFR, [soa(2), ns, www]) + transfer_in_answer(AXFR, [new, soa(2)]),
        bytes([9]) + transfer_in_answer(IXFR, [soa(3), soa(1), www, soa(2), new, soa(2), soa(3), www, soa(3)]),
        bytes([9]) + transfer_in_answer(IXFR, [soa(1)]),
        bytes([9]) + transfer_in_answer(IXFR, [soa(2), ns, new, soa(2)]),
        bytes([13]) + transfer_in_answer(AXFR, [soa(2), ns, soa(2)]),
    ]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out, captures = sys.argv[1], sys.argv[2:]
    respond = [bytes([transport]) + packet for transport, packet in handmade()]
    captured = 0
    for path in captures:
        if os.path.exists(path):
            found = pcap_payloads(path)
            captured += len(found)
            respond += [bytes([transport]) + packet for transport, packet in found]
        else:
            print(f"gen_seeds: {path} not found, skipped", file=sys.stderr)
    count = write_corpus(os.path.join(out, "respond"), respond)
    zones = write_corpus(os.path.join(out, "zone"), zone_seeds())
    initials = write_corpus(os.path.join(out, "initial"), initial_seeds())
    proxies = write_corpus(os.path.join(out, "proxy"), proxy_seeds())
    updates = write_corpus(os.path.join(out, "update"), update_seeds())
    transfers = write_corpus(os.path.join(out, "transfer_in"), transfer_in_seeds())
    print(
        f"gen_seeds: {count} respond seeds ({captured} payloads from {len(captures)} captures), "
        f"{zones} zone seeds, {initials} initial seeds, {proxies} proxy seeds, {updates} update seeds, "
        f"{transfers} transfer_in seeds in {out}"
    )


if __name__ == "__main__":
    main()
