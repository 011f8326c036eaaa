"""Inputs, configuration and checks for bench/proximity.

One Pharos serves bench.test with a static name (3 A records from the zone)
and one service per proximity policy, each with one replica in each of four
data centers in real cities announced from real transit ASes, plus a
`weighted` service (the proximity policies' fallback) as a reference:

  static.bench.test    3 A from the zone
  weighted.bench.test  weighted (all weights 1): no data, 4 A in random order
  aspath.bench.test    shortest-as-path over the BGP RIB dump
  latency.bench.test   lowest-latency over measurements posted to the API
  nearest.bench.test   nearest over the MaxMind City database

The client subnets are /24s drawn inside prefixes of a real BGP dump (RIS
rrc06, `bgpdump -m` text), so that the AS-path policy has a client AS to
work from. The RTTs are synthetic and seeded. Everything here is a pure
function of the seed except the API calls.
"""

import gzip
import http.client
import ipaddress
import json
import random
import re
import urllib.parse

ZONE = "bench.test"
STATIC = "static.bench.test"

# (id, city, latitude, longitude, ASN, replica address)
DATACENTERS = [
    ("iad", "Ashburn", 39.04, -77.49, 174, "192.0.2.11"),      # Cogent
    ("sjc", "San Jose", 37.34, -121.89, 6939, "192.0.2.12"),   # Hurricane Electric
    ("fra", "Frankfurt", 50.11, 8.68, 3356, "192.0.2.13"),     # Level 3
    ("nrt", "Tokyo", 35.68, 139.69, 2914, "192.0.2.14"),       # NTT
]
DC_ADDRESS = {d[0]: d[5] for d in DATACENTERS}
ADDRESS_DC = {d[5]: d[0] for d in DATACENTERS}
STATIC_ADDRESSES = ["192.0.2.1", "192.0.2.2", "192.0.2.3"]

# key -> (query name, policy); the order is the report's
SERVICES = {
    "static": (STATIC, None),
    "weighted": ("weighted.bench.test", "weighted"),
    "shortest-as-path": ("aspath.bench.test", "shortest-as-path"),
    "lowest-latency": ("latency.bench.test", "lowest-latency"),
    "nearest": ("nearest.bench.test", "nearest"),
}
PROXIMITY = ("shortest-as-path", "lowest-latency", "nearest")


# --------------------------------------------------------------------------- client subnets

def rib_prefixes(path, min_len=8, max_len=24):
    """Distinct global IPv4 prefixes (as (network int, length)) of a
    `bgpdump -m` text dump, plain or gzip, sorted."""
    opener = gzip.open if path.endswith(".gz") else open
    seen = set()
    with opener(path, "rt", errors="replace") as f:
        for line in f:
            parts = line.split("|", 6)
            if len(parts) < 6 or ":" in parts[5]:
                continue
            seen.add(parts[5])
    out = []
    for p in seen:
        try:
            net = ipaddress.IPv4Network(p)
        except ValueError:
            continue
        if min_len <= net.prefixlen <= max_len and net.is_global and not net.is_multicast:
            out.append((int(net.network_address), net.prefixlen))
    out.sort()
    return out


def draw_subnets(prefixes, count, seed):
    """`count` distinct /24s: a prefix drawn uniformly from `prefixes`, then a
    /24 uniformly inside it. Seeded; returned in a shuffled order."""
    rng = random.Random(seed)
    chosen = set()
    tries = 0
    while len(chosen) < count and tries < 20 * count:
        tries += 1
        base, length = prefixes[rng.randrange(len(prefixes))]
        n24 = 1 << (24 - length)
        addr = base + 256 * rng.randrange(n24)
        net = ipaddress.IPv4Network((addr, 24))
        if net.is_global:
            chosen.add(str(net))
    out = sorted(chosen, key=lambda s: int(ipaddress.IPv4Network(s).network_address))
    rng.shuffle(out)
    return out


def make_rtts(subnets, seed, unmeasured=0.0, lo=5.0, hi=250.0):
    """{subnet: {dc: rtt_ms}}: every data center measured from each subnet,
    RTTs uniform in [lo, hi) ms (synthetic, seeded), one decimal. A share
    `unmeasured` of the subnets gets no measurement (the policy falls back)."""
    rng = random.Random(seed * 7919 + 17)
    out = {}
    for s in subnets:
        row = {d[0]: round(rng.uniform(lo, hi), 1) for d in DATACENTERS}
        if rng.random() >= unmeasured:
            out[s] = row
    return out


def measurement_batches(rtts, batch_rows):
    """The API's JSON rows, in batches of at most `batch_rows`."""
    rows = [{"subnet": s, "datacenter": dc, "rtt_ms": rtt}
            for s, row in rtts.items() for dc, rtt in row.items()]
    return [rows[i:i + batch_rows] for i in range(0, len(rows), batch_rows)]


# --------------------------------------------------------------------------- files

def zone_text():
    lines = ["$ORIGIN %s." % ZONE, "$TTL 3600",
             "@ IN SOA ns1.%s. hostmaster.%s. 1 3600 900 604800 300" % (ZONE, ZONE),
             "@ IN NS ns1.%s." % ZONE,
             "ns1 IN A 192.0.2.53"]
    lines += ["static 60 IN A %s" % a for a in STATIC_ADDRESSES]
    return "\n".join(lines) + "\n"


def pharos_config(port, api_port, token, zonefile, bgp_table, geo_db, seed=None,
                  max_age_seconds=3600):
    parts = ["[server]", 'listen = ["127.0.0.1:%d"]' % port, "threads = 1"]
    if seed is not None:
        parts.append("random_seed = %d" % seed)
    parts += ["[control]", 'listen = "127.0.0.1:%d"' % api_port, 'token = "%s"' % token,
              "[bgp]", 'table = "%s"' % bgp_table,
              "[geo]", 'database = "%s"' % geo_db,
              "[latency]", "max_age_seconds = %d" % max_age_seconds]
    for dc, city, lat, lon, asn, _ in DATACENTERS:
        parts += ["[[datacenter]]  # %s" % city, 'id = "%s"' % dc, "latitude = %s" % lat,
                  "longitude = %s" % lon, "asn = %d" % asn]
    for key, (name, policy) in SERVICES.items():
        if policy is None:
            continue
        parts += ["[[service]]", 'name = "%s"' % name, 'policy = "%s"' % policy, "ttl = 60"]
        for dc, _, _, _, _, addr in DATACENTERS:
            parts += ["[[service.replica]]", 'id = "%s"' % dc, 'address = "%s"' % addr,
                      'datacenter = "%s"' % dc]
    parts += ["[[zone]]", 'origin = "%s"' % ZONE, 'file = "%s"' % zonefile]
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------- control API

class Api:
    """A keep-alive client for the control API (reconnects once on error)."""

    def __init__(self, port, token, timeout=10.0):
        self.port, self.token, self.timeout = port, token, timeout
        self.conn = None

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": "Bearer " + self.token}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            try:
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                text = r.read().decode("utf-8", "replace")
                break
            except (OSError, http.client.HTTPException):
                self.close()
                if attempt == 2:
                    raise
        try:
            doc = json.loads(text) if text else None
        except ValueError:
            doc = text
        return r.status, doc

    def explain(self, name, subnet):
        q = urllib.parse.urlencode({"name": name, "client": subnet})
        status, doc = self.call("GET", "/v1/explain?" + q)
        if status != 200:
            raise RuntimeError("explain %s %s: HTTP %d %s" % (name, subnet, status, doc))
        return doc

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


# --------------------------------------------------------------------------- explanations

_LIST = re.compile(r"(\w+) (unknown|[0-9.]+)")


def _keyed(text):
    """'fra 2, iad unknown' -> {'fra': 2.0, 'iad': None}"""
    out = {}
    for rid, v in _LIST.findall(text):
        out[rid] = None if v == "unknown" else float(v)
    return out


def read_explanation(policy, doc):
    """What the policy's own data said about this client, from explain's steps:
    {"fallback": bool, "why": reason when it fell back, "keys": {replica: distance
    or None}, "best": set of replicas with the smallest key, "extra": {...}}."""
    steps = doc.get("steps") or []
    text = " | ".join(steps)
    out = {"fallback": "falling back" in text, "why": None, "keys": {}, "best": set(), "extra": {}}
    if out["fallback"]:
        idx = next(i for i, s in enumerate(steps) if "falling back" in s)
        reason = steps[idx - 1] if idx > 0 else ""
        out["why"] = re.sub(r"AS\d+", "AS*", re.sub(r"/\d+", "/N", reason))
    for s in steps:
        if policy == "shortest-as-path" and "AS hops to each replica" in s:
            m = re.match(r"client AS(\d+) \(BGP prefix /(\d+)\)", s)
            if m:
                out["extra"] = {"asn": int(m.group(1)), "bgp_prefix": int(m.group(2))}
            out["keys"] = _keyed(s.split("data center:", 1)[1])
        elif policy == "nearest" and "distances:" in s:
            out["keys"] = {rid: (None if v == "unknown" else float(v))
                           for rid, v in re.findall(r"(\w+) (unknown|[0-9.]+)(?: km)?(?:,|$)",
                                                    s.split("distances:", 1)[1])}
        elif policy == "lowest-latency" and s.startswith("measured from "):
            body = s.split(": ", 1)[1]
            out["keys"] = {rid: float(v) for rid, v in re.findall(r"(\w+) ([0-9.]+) ms", body)}
    known = {k: v for k, v in out["keys"].items() if v is not None}
    if known and not out["fallback"]:
        lo = min(known.values())
        out["best"] = {k for k, v in known.items() if v == lo}
    return out


def great_circle_km(lat1, lon1, lat2, lon2):
    """Haversine on a sphere of the Earth's mean radius (as crates/route does)."""
    import math
    r = 6371.0088
    p1, p2 = math.radians(lat1), math.radians(lat2)
    hdlat, hdlon = (p2 - p1) / 2.0, math.radians(lon2 - lon1) / 2.0
    a = math.sin(hdlat) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(hdlon) ** 2
    return 2.0 * r * math.asin(min(1.0, math.sqrt(a)))


def survey(api, policy, name, subnets, rtts=None, limit=None):
    """Explain `name` for each subnet (all, or the first `limit`) and tally
    what decided. Returns (stats, per_subnet) where per_subnet[subnet] =
    (fallback, best replica set, scope) for the DNS checks, and stats holds
    counts: decided / fallback (with reasons), ties at the top, the first
    replica explain answered, ECS scopes, and `mismatches` -- explanations
    that disagree with an independent computation (lowest-latency: the RTTs
    this benchmark posted; nearest: the distance from the client's
    coordinates to each data center, recomputed here)."""
    dcs = {d[0]: d for d in DATACENTERS}
    st = {"n": 0, "decided": 0, "fallback": 0, "reasons": {}, "ties": 0, "first": {},
          "scopes": {}, "mismatches": 0, "mismatch_examples": [], "top_key": {}}
    per = {}
    for s in subnets[:limit] if limit else subnets:
        doc = api.explain(name, s)
        info = read_explanation(policy, doc)
        st["n"] += 1
        st["scopes"][doc["scope"]] = st["scopes"].get(doc["scope"], 0) + 1
        first = doc["answer"][0][0] if doc.get("answer") else None
        bad = None
        if info["fallback"]:
            st["fallback"] += 1
            st["reasons"][info["why"]] = st["reasons"].get(info["why"], 0) + 1
            if policy == "lowest-latency" and rtts is not None and s in rtts:
                bad = "measured subnet fell back"
        else:
            st["decided"] += 1
            st["first"][first] = st["first"].get(first, 0) + 1
            if len(info["best"]) > 1:
                st["ties"] += 1
            if first not in info["best"]:
                bad = "explain answered %s first, best %s" % (first, sorted(info["best"]))
            known = [v for v in info["keys"].values() if v is not None]
            if known and policy == "shortest-as-path":
                k = "%d hops" % min(known)
                st["top_key"][k] = st["top_key"].get(k, 0) + 1
            if policy == "lowest-latency" and rtts is not None:
                mine = rtts.get(s)
                if mine is None:
                    bad = "unmeasured subnet decided"
                elif info["keys"] != mine:
                    bad = "RTTs %s, posted %s" % (info["keys"], mine)
            if policy == "nearest":
                m = re.search(r"client at (-?[0-9.]+), (-?[0-9.]+)", " ".join(doc["steps"]))
                if m:
                    lat, lon = float(m.group(1)), float(m.group(2))
                    for rid, km in info["keys"].items():
                        d = dcs.get(rid)
                        if d and km is not None and abs(great_circle_km(lat, lon, d[2], d[3]) - km) > 1.0:
                            bad = "%s: %s km shown, %.1f km recomputed" % (rid, km, great_circle_km(lat, lon, d[2], d[3]))
                    if known:
                        k = "%d km" % (min(known) // 1000 * 1000)
                        st["top_key"][k] = st["top_key"].get(k, 0) + 1
        if bad:
            st["mismatches"] += 1
            if len(st["mismatch_examples"]) < 5:
                st["mismatch_examples"].append("%s: %s" % (s, bad))
        per[s] = (info["fallback"], info["best"], doc["scope"])
    return st, per
