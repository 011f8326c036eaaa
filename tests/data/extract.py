#!/usr/bin/env python3
"""Makes the small extracts in this directory from the large data sets
(PHAROS_DATA, by default ../shared/data beside the repository); see
README.md here for what each holds and its licence.

    tests/data/extract.py
"""

import bz2
import gzip
import ipaddress
import os
import shutil
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.get("PHAROS_DATA", HERE.parent.parent.parent / "shared" / "data"))

# What the origin rules of crates/bgp drop as special-purpose space.
SPECIAL = [ipaddress.ip_network(block) for block in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
    "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
    "::/127", "::ffff:0:0/96", "100::/64", "2001:db8::/32", "3fff::/20", "fc00::/7", "fe80::/10", "ff00::/8")]
# Prefixes the tests route by besides those: Google's 8.8.8.0/24.
ROUTED = [ipaddress.ip_network("8.8.8.0/24")]
TABLE_DUMP_V2, PEER_INDEX_TABLE, RIB_IPV4_UNICAST, RIB_IPV6_UNICAST = 13, 1, 2, 4


def mrt_records(stream):
    """(header, body) of each MRT record (RFC 6396 section 2)."""
    while header := stream.read(12):
        _, kind, subtype, length = struct.unpack("!IHHI", header)
        yield header, kind, subtype, stream.read(length)


def rib_prefix(subtype, body):
    """The prefix of a RIB_IPV4_UNICAST or RIB_IPV6_UNICAST record (RFC 6396 section 4.3.2)."""
    length = body[4]
    octets = body[5:5 + (length + 7) // 8]
    width = 4 if subtype == RIB_IPV4_UNICAST else 16
    return ipaddress.ip_network((bytes(octets) + bytes(width - len(octets)), length))


def kept(prefix):
    return prefix.prefixlen == 0 or any(prefix.version == block.version and prefix.subnet_of(block) for block in SPECIAL + ROUTED)


def extract_rib(source, target):
    """The peer index, and every RIB record of a default route, of
    special-purpose space or of a prefix the tests route by."""
    records = 0
    with bz2.open(source) as stream, bz2.open(target, "wb") as out:
        for header, kind, subtype, body in mrt_records(stream):
            keep = kind == TABLE_DUMP_V2 and (
                subtype == PEER_INDEX_TABLE or subtype in (RIB_IPV4_UNICAST, RIB_IPV6_UNICAST) and kept(rib_prefix(subtype, body)))
            if keep:
                out.write(header + body)
                records += 1
    print(f"{target.name}: {records} records")


def extract_asn_table(source, target):
    """pyasn's lines for the prefixes the tests route by, and the lines
    around each (the same origin's neighbours)."""
    with gzip.open(source, "rt") as stream:
        lines = stream.readlines()
    wanted = set()
    for index, line in enumerate(lines):
        if not line.startswith(";") and ipaddress.ip_network(line.split()[0]) in ROUTED:
            wanted.update(range(max(0, index - 5), min(len(lines), index + 6)))
    with gzip.open(target, "wt") as out:
        out.writelines(lines[index] for index in sorted(wanted))
    print(f"{target.name}: {len(wanted)} lines")


def main():
    extract_rib(DATA / "bgp/routeviews.route-views.jinx.ribs.1401487200.bz2", HERE / "jinx-extract.ribs.bz2")
    extract_asn_table(DATA / "ip2asn/pyasn-ipasn_20140513.dat.gz", HERE / "pyasn-ipasn-20140513-extract.dat.gz")
    for name in ("maxmind-test-GeoIP2-City-Test.mmdb", "maxmind-test-GeoIP2-Country-Test.mmdb"):
        shutil.copyfile(DATA / "geoip" / name, HERE / name)
        print(f"{name}: copied")


if __name__ == "__main__":
    main()
