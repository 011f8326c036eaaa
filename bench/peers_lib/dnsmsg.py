"""Minimal DNS client: build one query, parse the parts of a reply we check."""

import random
import socket
import struct

TYPES = {"A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "MX": 15, "TXT": 16, "AAAA": 28}
TYPE_NAMES = {v: k for k, v in TYPES.items()}
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}


def build_query(name, rtype, qid=None):
    qid = random.randrange(65536) if qid is None else qid
    hdr = struct.pack("!HHHHHH", qid, 0x0000, 1, 0, 0, 0)  # RD clear: we ask an authority
    q = b""
    for label in name.rstrip(".").split("."):
        if label:
            q += bytes([len(label)]) + label.encode()
    q += b"\x00" + struct.pack("!HH", TYPES[rtype], 1)
    return qid, hdr + q


def _skip_name(msg, off):
    while True:
        n = msg[off]
        if n == 0:
            return off + 1
        if n & 0xC0 == 0xC0:
            return off + 2
        off += 1 + n


def parse_reply(msg):
    """Return dict(id, rcode, aa, tc, answer=[types], authority=[types])."""
    qid, flags, qd, an, ns, _ar = struct.unpack("!HHHHHH", msg[:12])
    off = 12
    for _ in range(qd):
        off = _skip_name(msg, off) + 4
    sections = []
    for count in (an, ns):
        types = []
        for _ in range(count):
            off = _skip_name(msg, off)
            rtype, _cls, _ttl, rdlen = struct.unpack("!HHIH", msg[off:off + 10])
            off += 10 + rdlen
            types.append(TYPE_NAMES.get(rtype, str(rtype)))
        sections.append(types)
    return {
        "id": qid,
        "rcode": RCODES.get(flags & 0xF, str(flags & 0xF)),
        "aa": bool(flags & 0x0400),
        "tc": bool(flags & 0x0200),
        "answer": sections[0],
        "authority": sections[1],
    }


def query_udp(host, port, name, rtype, timeout=1.0):
    qid, pkt = build_query(name, rtype)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(pkt, (host, port))
        while True:
            data, _ = s.recvfrom(65535)
            if len(data) >= 12 and struct.unpack("!H", data[:2])[0] == qid:
                return parse_reply(data)


def query_tcp(host, port, name, rtype, timeout=2.0):
    qid, pkt = build_query(name, rtype)
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(struct.pack("!H", len(pkt)) + pkt)
        buf = b""
        while len(buf) < 2 or len(buf) < 2 + struct.unpack("!H", buf[:2])[0]:
            chunk = s.recv(65535)
            if not chunk:
                raise ConnectionError("connection closed before full reply")
            buf += chunk
        return parse_reply(buf[2:2 + struct.unpack("!H", buf[:2])[0]])


def check_reply(r, check):
    """Compare a parsed reply with one entry of checks.json; return None or a problem string."""
    if r["rcode"] != check["rcode"]:
        return "rcode %s, expected %s" % (r["rcode"], check["rcode"])
    kind = check["kind"]
    if kind == "answer":
        if not r["answer"]:
            return "empty answer"
        if check.get("answer_type") and r["answer"][0] != check["answer_type"]:
            return "answer starts with %s, expected %s" % (r["answer"][0], check["answer_type"])
        if not r["aa"]:
            return "AA bit not set"
        if check.get("answers") and len(r["answer"]) != check["answers"]:
            return "%d answer records, expected %d" % (len(r["answer"]), check["answers"])
    elif kind == "negative":
        if r["answer"]:
            return "answer not empty: %s" % r["answer"]
        if "SOA" not in r["authority"]:
            return "no SOA in authority"
        if not r["aa"]:
            return "AA bit not set"
    elif kind == "referral":
        if r["answer"]:
            return "answer not empty: %s" % r["answer"]
        if "NS" not in r["authority"]:
            return "no NS in authority (referral expected)"
        if r["aa"]:
            return "AA bit set on a referral"
    return None
