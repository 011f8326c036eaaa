#!/usr/bin/env python3
"""Deterministic generator for the benchmark zone `bench.test.` and its query mix.

Writes, into the output directory:
  bench.test.zone   RFC 1035 master file, ~1000 owner names
  queries.txt       dnsperf input ("name TYPE" per line)
  checks.json       a few queries per category with the expected outcome,
                    used to verify each server before it is measured
  mix.json          the realised share of each query category

Everything derives from one seeded random.Random, so the same seed gives
byte-identical files.  Stdlib only.

    python3 bench/zones/gen_zone.py --out bench/out/zones [--seed 1] [--queries 50000]
"""

import argparse
import json
import os
import random

ORIGIN = "bench.test."
ZONE = "bench.test"

PREFIXES = [
    "www", "api", "cdn", "app", "db", "cache", "edge", "img", "auth", "shop",
    "vpn", "git", "ci", "docs", "static", "m", "status", "blog", "dev", "login",
]
REGIONS = ["eu", "us", "ap"]

# Query mix, in percent.  Categories and what each expects:
#   a / aaaa   existing name, positive answer of that type
#   mx / txt   existing name with that type
#   cname_a    A query on a CNAME owner (answer starts with the CNAME)
#   cname      CNAME query on a CNAME owner
#   wildcard   A/AAAA under *.wild (synthesised answer)
#   referral   name below a delegation (NOERROR, no answer, NS in authority)
#   nxdomain   name that does not exist
#   nodata     existing name, type it does not have (NOERROR, empty answer)
MIX = [
    ("a", 50.0),
    ("aaaa", 22.0),
    ("mx", 6.0),
    ("txt", 5.0),
    ("cname_a", 4.0),
    ("cname", 2.0),
    ("wildcard", 2.0),
    ("referral", 1.0),
    ("nxdomain", 5.0),
    ("nodata", 3.0),
]


def _v4(rng, block):
    return "10.%d.%d.%d" % (block, rng.randrange(256), rng.randrange(1, 255))


def _v6(rng):
    return "2001:db8:%x:%x::%x" % (rng.randrange(1 << 16), rng.randrange(1 << 16), rng.randrange(1, 1 << 16))


def _word(rng, n):
    letters = "abcdefghijklmnopqrstuvwxyz"
    return "".join(rng.choice(letters) for _ in range(n))


def build(seed=1):
    """Return (zone_text, names) where names maps category -> list of owner names."""
    rng = random.Random(seed)
    rr = []  # (owner, type, rdata)
    owners = {}  # owner -> set of types

    def add(owner, rtype, rdata):
        rr.append((owner, rtype, rdata))
        owners.setdefault(owner, set()).add(rtype)

    # Apex.
    add("@", "SOA", "ns1.bench.test. hostmaster.bench.test. 2024010101 7200 3600 1209600 300")
    add("@", "NS", "ns1.bench.test.")
    add("@", "NS", "ns2.bench.test.")
    add("@", "MX", "10 mx1.bench.test.")
    add("@", "MX", "20 mx2.bench.test.")
    add("@", "TXT", '"v=spf1 mx -all"')
    add("@", "A", "192.0.2.1")
    add("@", "AAAA", "2001:db8::1")
    add("ns1", "A", "192.0.2.53")
    add("ns1", "AAAA", "2001:db8::53")
    add("ns2", "A", "192.0.2.54")
    add("ns2", "AAAA", "2001:db8::54")
    for i in range(1, 5):
        add("mx%d" % i, "A", "192.0.2.%d" % (60 + i))
        add("mx%d" % i, "AAAA", "2001:db8::%x" % (0x60 + i))

    # Hosts: ~740 names, A and/or AAAA.  A fifth live one level down under a
    # region label, which creates empty non-terminals (eu.bench.test. ...).
    hosts = []
    used = set(owners)
    while len(hosts) < 740:
        label = "%s%d" % (rng.choice(PREFIXES), rng.randrange(1000))
        if rng.random() < 0.2:
            label = "%s.%s" % (label, rng.choice(REGIONS))
        if label in used:
            continue
        used.add(label)
        hosts.append(label)
        kind = rng.random()
        if kind < 0.05:  # AAAA only
            add(label, "AAAA", _v6(rng))
        else:
            for _ in range(2 if rng.random() < 0.1 else 1):
                add(label, "A", _v4(rng, 1 + len(hosts) % 250))
            if kind < 0.60:
                add(label, "AAAA", _v6(rng))

    # Mail domains: MX (plus an A for some).
    mail = []
    while len(mail) < 50:
        label = "mail-%s" % _word(rng, 6)
        if label in used:
            continue
        used.add(label)
        mail.append(label)
        for pref in (10, 20)[: rng.choice((1, 2))]:
            add(label, "MX", "%d mx%d.bench.test." % (pref, rng.randrange(1, 5)))
        if rng.random() < 0.5:
            add(label, "A", _v4(rng, 251))

    # TXT: 60 names, half of them also carry an A record.
    txt = []
    while len(txt) < 60:
        label = "txt-%s" % _word(rng, 7)
        if label in used:
            continue
        used.add(label)
        txt.append(label)
        add(label, "TXT", '"id=%s" "rev=%d"' % (_word(rng, 16), rng.randrange(100000)))
        if rng.random() < 0.5:
            add(label, "A", _v4(rng, 252))

    # CNAMEs: 120 aliases, most to in-zone hosts, a few out of zone.
    cnames = []
    while len(cnames) < 120:
        label = "alias-%s" % _word(rng, 5)
        if label in used:
            continue
        used.add(label)
        cnames.append(label)
        if rng.random() < 0.06:
            add(label, "CNAME", "edge%d.cdn.example.net." % rng.randrange(100))
        else:
            add(label, "CNAME", "%s.bench.test." % rng.choice(hosts))

    # Delegations with glue.
    add("sub1", "NS", "ns1.sub1.bench.test.")
    add("sub1", "NS", "ns2.sub1.bench.test.")
    add("ns1.sub1", "A", "198.51.100.1")
    add("ns1.sub1", "AAAA", "2001:db8:100::1")
    add("ns2.sub1", "A", "198.51.100.2")
    add("sub2", "NS", "ns.sub2.bench.test.")
    add("sub2", "NS", "ns.example.net.")
    add("ns.sub2", "A", "198.51.100.10")

    # Wildcard.
    add("*.wild", "A", "203.0.113.7")
    add("*.wild", "AAAA", "2001:db8:7::7")
    add("wild", "TXT", '"wildcard parent"')

    lines = [
        "; bench.test. -- generated by bench/zones/gen_zone.py seed=%d; do not edit" % seed,
        "$ORIGIN %s" % ORIGIN,
        "$TTL 3600",
    ]
    for owner, rtype, rdata in rr:
        lines.append("%-24s IN %-5s %s" % (owner, rtype, rdata))
    zone_text = "\n".join(lines) + "\n"

    def fq(label):
        return ORIGIN if label == "@" else "%s.%s" % (label, ORIGIN)

    names = {
        "a": [fq(o) for o, t in owners.items() if "A" in t and "CNAME" not in t],
        "aaaa": [fq(o) for o, t in owners.items() if "AAAA" in t],
        "mx": [fq(o) for o, t in owners.items() if "MX" in t],
        "txt": [fq(o) for o, t in owners.items() if "TXT" in t],
        "cname": [fq(o) for o in cnames],
        "hosts_noaaaa": [fq(o) for o in hosts if "AAAA" not in owners[o]],
        "hosts_nomx": [fq(o) for o in hosts],
        "ents": ["%s.%s" % (r, ORIGIN) for r in REGIONS],
        "owners": sorted(fq(o) for o in owners if not o.startswith("*")),
    }
    return zone_text, names, len(owners)


def gen_queries(names, count, seed=1):
    """Return (lines, per_category_counts, checks)."""
    rng = random.Random(seed * 7919 + 17)
    existing = set(n.lower() for n in names["owners"])
    cats = [c for c, _ in MIX]
    weights = [w for _, w in MIX]

    def nx_name():
        while True:
            if rng.random() < 0.5:
                n = "%s%d.%s" % (rng.choice(PREFIXES), 1000 + rng.randrange(9000), ORIGIN)
            else:
                n = "%s.%s" % (_word(rng, rng.randrange(4, 10)), ORIGIN)
            if n.lower() not in existing:
                return n

    def one(cat):
        if cat == "a":
            return rng.choice(names["a"]), "A"
        if cat == "aaaa":
            return rng.choice(names["aaaa"]), "AAAA"
        if cat == "mx":
            return rng.choice(names["mx"]), "MX"
        if cat == "txt":
            return rng.choice(names["txt"]), "TXT"
        if cat == "cname_a":
            return rng.choice(names["cname"]), "A"
        if cat == "cname":
            return rng.choice(names["cname"]), "CNAME"
        if cat == "wildcard":
            return "%s.wild.%s" % (_word(rng, 8), ORIGIN), rng.choice(("A", "A", "AAAA"))
        if cat == "referral":
            return "%s.%s.%s" % (rng.choice(("www", "mail", "host%d" % rng.randrange(50))),
                                 rng.choice(("sub1", "sub2")), ORIGIN), rng.choice(("A", "AAAA"))
        if cat == "nxdomain":
            return nx_name(), rng.choice(("A", "A", "AAAA"))
        if cat == "nodata":
            r = rng.random()
            if r < 0.4:
                return rng.choice(names["hosts_noaaaa"]), "AAAA"
            if r < 0.8:
                return rng.choice(names["hosts_nomx"]), rng.choice(("MX", "TXT"))
            return rng.choice(names["ents"]), "A"
        raise ValueError(cat)

    lines = []
    counts = {c: 0 for c in cats}
    for cat in rng.choices(cats, weights=weights, k=count):
        name, rtype = one(cat)
        counts[cat] += 1
        lines.append("%s %s" % (name, rtype))

    # Verification set: three of each category with the expected outcome.
    expect = {
        "a": ("NOERROR", "answer", "A"),
        "aaaa": ("NOERROR", "answer", "AAAA"),
        "mx": ("NOERROR", "answer", "MX"),
        "txt": ("NOERROR", "answer", "TXT"),
        "cname_a": ("NOERROR", "answer", "CNAME"),
        "cname": ("NOERROR", "answer", "CNAME"),
        "wildcard": ("NOERROR", "answer", None),
        "referral": ("NOERROR", "referral", None),
        "nxdomain": ("NXDOMAIN", "negative", None),
        "nodata": ("NOERROR", "negative", None),
    }
    checks = []
    for cat in cats:
        for _ in range(3):
            name, rtype = one(cat)
            rcode, kind, atype = expect[cat]
            if cat == "wildcard":
                atype = rtype
            checks.append({"category": cat, "name": name, "type": rtype,
                           "rcode": rcode, "kind": kind, "answer_type": atype})
    return lines, counts, checks


def generate(out_dir, seed=1, queries=50000):
    os.makedirs(out_dir, exist_ok=True)
    zone_text, names, n_owners = build(seed)
    lines, counts, checks = gen_queries(names, queries, seed)
    paths = {
        "zone": os.path.join(out_dir, "bench.test.zone"),
        "queries": os.path.join(out_dir, "queries.txt"),
        "checks": os.path.join(out_dir, "checks.json"),
        "mix": os.path.join(out_dir, "mix.json"),
    }
    with open(paths["zone"], "w") as f:
        f.write(zone_text)
    with open(paths["queries"], "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(paths["checks"], "w") as f:
        json.dump(checks, f, indent=1)
    mix = {c: round(100.0 * n / queries, 2) for c, n in counts.items()}
    with open(paths["mix"], "w") as f:
        json.dump({"seed": seed, "owner_names": n_owners, "queries": queries,
                   "percent": mix}, f, indent=1)
    return {"paths": paths, "checks": checks, "owner_names": n_owners, "mix": mix}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "out", "zones"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--queries", type=int, default=50000)
    a = ap.parse_args()
    info = generate(os.path.normpath(a.out), a.seed, a.queries)
    print("zone %s: %d owner names" % (info["paths"]["zone"], info["owner_names"]))
    print("queries %s: %d lines, mix %s" % (info["paths"]["queries"], a.queries,
                                             json.dumps(info["mix"])))


if __name__ == "__main__":
    main()
