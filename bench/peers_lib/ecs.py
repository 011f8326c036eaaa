"""DNS queries carrying an EDNS Client Subnet option (RFC 7871), for checks.

Used by bench/dynamic and bench/storm to see which replica a server answers
first for a client in a given subnet, and what ECS scope it returns.
"""

import ipaddress
import random
import socket
import struct

from .dnsmsg import _skip_name


def build_query(name, subnet, qid=None, rtype=1, dnssec=False):
    """A query for `name` (type A by default), RD clear, EDNS payload 1232,
    with `subnet` ("10.1.2.0/24", or None for no ECS option), DO=1 with
    `dnssec`."""
    qid = random.randrange(65536) if qid is None else qid
    hdr = struct.pack("!HHHHHH", qid, 0x0000, 1, 0, 0, 1)
    q = b""
    for label in name.rstrip(".").split("."):
        if label:
            q += bytes([len(label)]) + label.encode()
    q += b"\x00" + struct.pack("!HH", rtype, 1)
    opt_data = b""
    if subnet is not None:
        net = ipaddress.ip_network(subnet, strict=False)
        family = 1 if net.version == 4 else 2
        nbytes = (net.prefixlen + 7) // 8
        addr = net.network_address.packed[:nbytes]
        ecs = struct.pack("!HBB", family, net.prefixlen, 0) + addr
        opt_data = struct.pack("!HH", 8, len(ecs)) + ecs
    flags = 0x8000 if dnssec else 0  # the OPT TTL's low half: DO is its top bit
    opt = b"\x00" + struct.pack("!HHIH", 41, 1232, flags, len(opt_data)) + opt_data
    return qid, hdr + q + opt


def parse(msg):
    """dict(id, rcode, aa, addresses=[A/AAAA in answer order], ttls=[...],
    ecs=(family, source, scope, address) or None)."""
    qid, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", msg[:12])
    off = 12
    for _ in range(qd):
        off = _skip_name(msg, off) + 4
    addresses, ttls, ecs = [], [], None
    for i in range(an + ns + ar):
        off = _skip_name(msg, off)
        rtype, _cls, ttl, rdlen = struct.unpack("!HHIH", msg[off:off + 10])
        off += 10
        rdata = msg[off:off + rdlen]
        off += rdlen
        if i < an and rtype == 1 and rdlen == 4:
            addresses.append(socket.inet_ntop(socket.AF_INET, rdata))
            ttls.append(ttl)
        elif i < an and rtype == 28 and rdlen == 16:
            addresses.append(socket.inet_ntop(socket.AF_INET6, rdata))
            ttls.append(ttl)
        elif rtype == 41:
            p = 0
            while p + 4 <= len(rdata):
                code, length = struct.unpack("!HH", rdata[p:p + 4])
                body = rdata[p + 4:p + 4 + length]
                if code == 8 and length >= 4:
                    fam, src, scope = struct.unpack("!HBB", body[:4])
                    ecs = (fam, src, scope, body[4:])
                p += 4 + length
    return {"id": qid, "rcode": flags & 0xF, "aa": bool(flags & 0x0400),
            "addresses": addresses, "ttls": ttls, "ecs": ecs}


class Client:
    """One UDP socket reused for many checks (cheap enough for thousands);
    its queries ask for signatures (DO=1) with `dnssec`."""

    def __init__(self, host, port, timeout=1.0, dnssec=False):
        self.addr = (host, port)
        self.dnssec = dnssec
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.settimeout(timeout)
        self.sock.connect(self.addr)

    def query(self, name, subnet, retries=2):
        last = None
        for _ in range(retries + 1):
            qid, pkt = build_query(name, subnet, dnssec=self.dnssec)
            try:
                self.sock.send(pkt)
                while True:
                    data = self.sock.recv(65535)
                    if len(data) >= 12 and struct.unpack("!H", data[:2])[0] == qid:
                        return parse(data)
            except socket.timeout as e:
                last = e
        raise TimeoutError("no answer from %s:%d for %s (ECS %s): %s"
                           % (self.addr[0], self.addr[1], name, subnet, last))

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
