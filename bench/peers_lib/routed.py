"""The routed service shared by bench/dynamic and bench/storm.

One name, svc.bench.test, answered per client region: 8 regions defined by
CIDR (each a /12 and a /16, plus a /22 carved out of a neighbour's /12 so
longest-prefix matching matters), region 0 for everyone else, 3 replicas.
The same regions and the same preference go into every server's
configuration: Pharos (region-probabilities), gdnsd (geoip plugin with a
`nets` map, optionally layered over its weighted plugin) and PowerDNS (a LUA
record testing netmask() on the ECS address).

Everything here is a pure function of the seed; no I/O except writing files.
"""

import glob
import ipaddress
import json
import math
import os
import random

from . import servers

ZONE = "bench.test"
SERVICE = "svc.bench.test"
STATIC = "static.bench.test"
REPLICAS = [("a", "192.0.2.1"), ("b", "192.0.2.2"), ("c", "192.0.2.3")]
ADDRESS = dict(REPLICAS)
NREGIONS = 8
DEFAULT_DOMINANT = "c"    # region 0 (unclassified) prefers c
UNCLASSIFIED_NETS = ["172.16.0.0/12", "198.18.0.0/15"]


# --------------------------------------------------------------------------- regions

def region_prefixes():
    """{region id: [CIDR, ...]} for regions 1..8."""
    out = {}
    for i in range(1, NREGIONS + 1):
        out[i] = [
            "10.%d.0.0/12" % (16 * (i - 1)),                    # 10.0/12, 10.16/12, ...
            "100.%d.0.0/16" % (64 + i),                         # 100.65/16 ... 100.72/16
            # a /22 inside the /12 of region (i mod 8) + 1: longest prefix must win
            "10.%d.%d.0/22" % (16 * (i % NREGIONS) + 8, 4 * i),
        ]
    return out


def dominant(region):
    """The replica a region prefers (first with probability 0.8)."""
    if region == 0:
        return DEFAULT_DOMINANT
    return REPLICAS[(region - 1) % len(REPLICAS)][0]


def preference(region):
    """Ordered replica ids for a region: dominant first, then the others in order."""
    d = dominant(region)
    return [d] + [r for r, _ in REPLICAS if r != d]


class Classifier:
    """Longest-prefix match over the region prefixes (the reference answer)."""

    def __init__(self, prefixes):
        self.nets = sorted(((ipaddress.ip_network(p), r) for r, ps in prefixes.items() for p in ps),
                           key=lambda x: -x[0].prefixlen)

    def region(self, subnet):
        net = ipaddress.ip_network(subnet, strict=False)
        for n, r in self.nets:
            if net.subnet_of(n):
                return r
        return 0


def make_subnets(seed, per_region=1400, unclassified=800):
    """Distinct /24 subnets: about `per_region` in each region, `unclassified`
    in none, in a seeded shuffled order. Returns [(subnet, region)]."""
    rng = random.Random(seed)
    prefixes = region_prefixes()
    cls = Classifier(prefixes)
    chosen = {}

    def take(net, count, want_region):
        net = ipaddress.ip_network(net)
        n24 = 2 ** (24 - net.prefixlen)
        got, tries = 0, 0
        while got < count and tries < count * 20:
            tries += 1
            sub = "%s/24" % ipaddress.ip_address(int(net.network_address) + 256 * rng.randrange(n24))
            if sub in chosen:
                continue
            r = cls.region(sub)
            if want_region is not None and r != want_region:
                continue
            chosen[sub] = r
            got += 1
        return got

    for r, (p12, p16, p22) in prefixes.items():
        got = take(p22, 4, r)                      # all four /24s of the carve-out
        got += take(p16, per_region // 4, r)
        take(p12, per_region - got, r)
    for i in range(unclassified):
        take(UNCLASSIFIED_NETS[i % len(UNCLASSIFIED_NETS)], 1, 0)
    items = sorted(chosen.items())
    rng.shuffle(items)
    return items


def write_inputs(outdir, seed, per_region=1400, unclassified=800):
    """Write zone, ECS file and query files; return a dict describing them."""
    os.makedirs(outdir, exist_ok=True)
    subnets = make_subnets(seed, per_region, unclassified)
    ecs_path = os.path.join(outdir, "ecs.txt")
    with open(ecs_path, "w") as f:
        for s, _ in subnets:
            f.write(s + "\n")
    paths = {"ecs": ecs_path}
    for key, name in (("routed", SERVICE), ("static", STATIC)):
        p = os.path.join(outdir, "queries-%s.txt" % key)
        with open(p, "w") as f:
            f.write("%s A\n" % name)
        paths["queries_" + key] = p
    zone = os.path.join(outdir, "bench.test.zone")
    with open(zone, "w") as f:
        f.write(zone_text())
    paths["zone"] = zone
    per = {}
    for _, r in subnets:
        per[r] = per.get(r, 0) + 1
    return {"paths": paths, "subnets": subnets, "per_region": dict(sorted(per.items())),
            "prefixes": region_prefixes()}


def zone_text(extra=""):
    """bench.test: SOA, NS and the static name (three A records, like the
    routed answer's three replicas). svc.bench.test is deliberately absent."""
    lines = ["$ORIGIN %s." % ZONE, "$TTL 3600",
             "@ IN SOA ns1.%s. hostmaster.%s. 1 3600 900 604800 300" % (ZONE, ZONE),
             "@ IN NS ns1.%s." % ZONE,
             "ns1 IN A 192.0.2.53"]
    lines += ["static 60 IN A %s" % addr for _, addr in REPLICAS]
    return "\n".join(lines) + "\n" + extra


# --------------------------------------------------------------------------- policy tables

def base_table():
    """The probability table of the benchmark (API JSON shape):
    each region's dominant replica 0.8, the two others 0.1; TTL 60."""
    table = {}
    for region in range(0, NREGIONS + 1):
        key = "default" if region == 0 else "r%d" % region
        d = dominant(region)
        table[key] = {rid: {"probability": 0.8 if rid == d else 0.1, "ttl": 60}
                      for rid, _ in REPLICAS}
    return table


def table_dominants(table):
    """{region: replica with the highest probability} for an API-shaped table."""
    out = {}
    for key, row in table.items():
        region = 0 if key == "default" else int(key[1:])
        out[region] = max(sorted(row), key=lambda rid: row[rid]["probability"])
    return out


def least_dominant_share(table):
    """The smallest probability any region gives its dominant replica."""
    return min(max(e["probability"] for e in row.values()) for row in table.values())


def storm_table(k, rng):
    """Upload number k of the storm: region r prefers replica (r + k) mod 3 with
    a probability drawn in [0.85, 0.97]; the rest is split unevenly. Every
    upload moves every region's preferred replica, so it changes the answers."""
    table = {}
    for region in range(0, NREGIONS + 1):
        key = "default" if region == 0 else "r%d" % region
        d = REPLICAS[(region + k) % len(REPLICAS)][0]
        p = round(rng.uniform(0.85, 0.97), 4)
        rest = 1.0 - p
        split = round(rng.uniform(0.2, 0.8), 4)
        others = [rid for rid, _ in REPLICAS if rid != d]
        row = {d: {"probability": p, "ttl": 30 + (k % 60)},
               others[0]: {"probability": round(rest * split, 4), "ttl": 60},
               others[1]: {"probability": round(rest * (1 - split), 4), "ttl": 60}}
        table[key] = row
    return table


def storm_upload(seed, k):
    """The table bench/storm's upload number k carries: storm_table with its
    own seeded generator, so any upload can be rebuilt from (seed, k)."""
    return storm_table(k, random.Random(seed * 1000003 + k))


# --------------------------------------------------------------------------- server configs

def _toml_table(table):
    out = []
    for key, row in table.items():
        out.append("[service.probabilities.%s]" % key)
        for rid, e in row.items():
            out.append("%s = { probability = %s, ttl = %d }" % (rid, repr(float(e["probability"])),
                                                               e["ttl"]))
    return "\n".join(out)


def pharos_config(port, zonefile, api_port=None, token="bench", store=None, seed=None,
                  max_answers=None, host="127.0.0.1", resolver_view=False, dnssec=False):
    """TOML for `pharos serve --config`: the routed service plus the zone
    (signed with `dnssec`: its keys must be in `store`)."""
    parts = ["[server]", 'listen = ["%s:%d"]' % (host, port), "threads = 1"]
    # A [server] key: written before the next table's header opens it.
    if seed is not None:
        parts.append("random_seed = %d" % seed)
    # Said either way: the resolver view is on by default, and
    # pharos-routed is its "off" against pharos-routed-rv.
    parts += ["[metrics]", "resolver_view = %s" % ("true" if resolver_view else "false")]
    if api_port is not None:
        parts += ["[control]", 'listen = "127.0.0.1:%d"' % api_port, 'token = "%s"' % token]
    if store is not None:
        parts += ["[store]", 'path = "%s"' % store]
    for r, ps in region_prefixes().items():
        parts += ["[[region]]", "id = %d" % r, 'name = "r%d"' % r,
                  "prefixes = [%s]" % ", ".join('"%s"' % p for p in ps)]
    parts += ["[[service]]", 'name = "%s"' % SERVICE, 'policy = "region-probabilities"', "ttl = 300"]
    if max_answers:
        parts.append("max_answers = %d" % max_answers)
    for rid, addr in REPLICAS:
        parts += ["[[service.replica]]", 'id = "%s"' % rid, 'address = "%s"' % addr]
    parts.append(_toml_table(base_table()))
    parts += ["[[zone]]", 'origin = "%s"' % ZONE, 'file = "%s"' % zonefile]
    if dnssec:
        parts.append("dnssec = true")
    return "\n".join(parts) + "\n"


class PharosRouted(servers.Pharos):
    """Pharos with the region-probability service; `query_key` says which
    query file measures it (routed name or the static name in the same zone)."""
    name = "pharos-routed"
    query_key = "routed"
    answers = "3 A, ordered by MyXDNS Alg. 1 (region probabilities)"
    threads = "[server] threads = 1"
    max_answers = None
    resolver_view = False

    def __init__(self, port, outdir, zonefile, repo, api_port=None, store=False, seed=None):
        super().__init__(port, outdir, zonefile, repo)
        self.api_port = api_port
        self.store = store
        self.seed = seed

    def prepare(self):
        os.makedirs(self.dir, exist_ok=True)
        store = None
        if self.store:
            store = os.path.join(self.dir, "state.sqlite")
            for suffix in ("", "-wal", "-shm", "-journal"):
                if os.path.exists(store + suffix):
                    os.unlink(store + suffix)
        conf = os.path.join(self.dir, "pharos.toml")
        with open(conf, "w") as f:
            f.write(pharos_config(self.port, self.zonefile, self.api_port, store=store,
                                  seed=self.seed, max_answers=self.max_answers, host=self.host,
                                  resolver_view=self.resolver_view))
        exe = getattr(self, "copy", None) or self.binary
        return [exe, "serve", "--config", conf]


class PharosRouted1(PharosRouted):
    """The same service with max_answers = 1: one A per answer, like gdnsd and PowerDNS."""
    name = "pharos-routed-1"
    answers = "1 A: the first replica of MyXDNS Alg. 1 (max_answers = 1)"
    max_answers = 1


class PharosRoutedResolverView(PharosRouted):
    """The same service with `[metrics] resolver_view = true`: each routed
    answer also tallied per resolver (the cost of the caching-skew view)."""
    name = "pharos-routed-rv"
    answers = PharosRouted.answers + ", tallied per resolver"
    resolver_view = True


class PharosStatic(PharosRouted):
    name = "pharos-static"
    query_key = "static"
    answers = "3 A from the zone (static.bench.test), same process config"


class GdnsdGeoip(servers.Server):
    """gdnsd 3 with plugin_geoip, no GeoIP database, the regions as a `nets`
    map. Each region maps to its preference order of 3 single-address
    datacenters, so the answer is the region's preferred replica (one A,
    deterministic: geoip/metafo answer the first datacenter that is up)."""
    name = "gdnsd-geoip"
    binary = "gdnsd"
    packages = ("gdnsd",)
    query_key = "routed"
    answers = "1 A: the region's first datacenter (deterministic)"
    threads = "udp_threads 1, tcp_threads 1"
    weighted = False

    def _plugin_config(self):
        prefixes = region_prefixes()
        nets = []
        for r, ps in prefixes.items():
            for p in ps:
                nets.append("          %s => [ %s ]" % (p, ", ".join(preference(r))))
        dcmap = ", ".join("%s => %s" % (rid, addr) for rid, addr in REPLICAS)
        return f"""\
plugins => {{
  geoip => {{
    maps => {{
      regions => {{
        # no geoip2_db: the nets map alone classifies clients
        datacenters => [ {", ".join(preference(0))} ]
        nets => {{
{chr(10).join(nets)}
        }}
      }}
    }}
    resources => {{
      svc => {{
        map => regions
        dcmap => {{ {dcmap} }}
      }}
    }}
  }}
}}
"""

    def prepare(self):
        for sub in ("zones", "run", "state"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        d = self.dir
        with open(os.path.join(d, "zones", ZONE), "w") as f:
            f.write(zone_text("svc 60 DYNA geoip!svc\n"))
        with open(os.path.join(d, "config"), "w") as f:
            f.write(f"""\
# written by bench/dynamic
options => {{
    listen => [ "127.0.0.1:{self.port}" ]
    udp_threads => 1
    tcp_threads => 1
    run_dir => "{d}/run"
    state_dir => "{d}/state"
    edns_client_subnet => true
}}
""" + self._plugin_config())
        return ["gdnsd", "-c", d, "start"]


class GdnsdGeoipWeighted(GdnsdGeoip):
    """gdnsd geoip -> weighted: each region maps to its own pseudo-datacenter
    whose resource is a weighted-plugin set with the region's probabilities
    (80/10/10). One A per answer, drawn by weight: the same first-answer
    distribution as Pharos' table."""
    name = "gdnsd-geoip+w"
    answers = "1 A drawn by weight per region (geoip -> weighted)"
    weighted = True

    def _plugin_config(self):
        prefixes = region_prefixes()
        dcs = ["d%d" % r for r in range(0, NREGIONS + 1)]
        nets = ["          %s => d%d" % (p, r) for r, ps in prefixes.items() for p in ps]
        dcmap = ", ".join("d%d => %%weighted!w%d" % (r, r) for r in range(0, NREGIONS + 1))
        table = base_table()
        wres = []
        for r in range(0, NREGIONS + 1):
            row = table["default" if r == 0 else "r%d" % r]
            wres.append("    w%d => { %s }" % (r, ", ".join(
                "%s = [ %s, %d ]" % (rid, addr, round(100 * row[rid]["probability"]))
                for rid, addr in REPLICAS)))
        return f"""\
plugins => {{
  geoip => {{
    maps => {{
      regions => {{
        datacenters => [ {", ".join(dcs)} ]
        nets => {{
{chr(10).join(nets)}
        }}
      }}
    }}
    resources => {{
      svc => {{
        map => regions
        dcmap => {{ {dcmap} }}
      }}
    }}
  }}
  weighted => {{
    multi => false
{chr(10).join(wres)}
  }}
}}
"""


def pdns_lua_record():
    """A LUA A record: netmask() on bestwho (the ECS address when the query has
    one), tested most specific first, then pickwrandom with the region's weights."""
    prefixes = region_prefixes()
    table = base_table()

    def pick(r):
        row = table["default" if r == 0 else "r%d" % r]
        return "pickwrandom({%s})" % ",".join(
            "{%d,'%s'}" % (round(100 * row[rid]["probability"]), addr) for rid, addr in REPLICAS)

    branches = []
    # the /22 carve-outs first (they sit inside other regions' /12s) ...
    for r, ps in prefixes.items():
        branches.append((["'%s'" % ps[2]], r))
    # ... then each region's /12 and /16 together
    for r, ps in prefixes.items():
        branches.append((["'%s'" % ps[0], "'%s'" % ps[1]], r))
    code = []
    for i, (nets, r) in enumerate(branches):
        kw = "if" if i == 0 else "elseif"
        code.append("%s netmask({%s}) then return %s" % (kw, ",".join(nets), pick(r)))
    code.append("end return %s" % pick(0))
    return ";" + " ".join(code)


class PdnsLua(servers.Server):
    name = "pdns-lua"
    binary = "pdns_server"
    packages = ("pdns-server", "pdns-backend-bind")
    query_key = "routed"
    answers = "1 A: pickwrandom per region (LUA record, netmask() on the ECS address)"
    threads = "receiver-threads 1, distributor-threads 1; packet cache on (default)"

    def missing(self):
        miss = servers.Server.missing(self)
        if not glob.glob("/usr/lib/*/pdns/libbindbackend.so") and \
                not glob.glob("/usr/lib/pdns/libbindbackend.so"):
            miss.append("libbindbackend.so (pdns-backend-bind)")
        return miss

    def prepare(self):
        os.makedirs(self.dir, exist_ok=True)
        d = self.dir
        zone = os.path.join(d, "bench.test.zone")
        with open(zone, "w") as f:
            f.write(zone_text('svc 60 IN LUA A "%s"\n' % pdns_lua_record()))
        with open(os.path.join(d, "named.conf"), "w") as f:
            f.write('zone "%s" { type master; file "%s"; };\n' % (ZONE, zone))
        with open(os.path.join(d, "pdns.conf"), "w") as f:
            f.write("# written by bench/dynamic\n" + servers.pdns_base_conf(d, self.port)
                    + "enable-lua-records=yes\nedns-subnet-processing=yes\n")
        return ["pdns_server", "--config-dir=%s" % d]


# --------------------------------------------------------------------------- answer checks

def sample_by_region(subnets, per_region, seed):
    """{region: [subnet, ...]} with up to per_region subnets each (seeded)."""
    rng = random.Random(seed)
    by = {}
    for s, r in subnets:
        by.setdefault(r, []).append(s)
    return {r: rng.sample(v, min(per_region, len(v))) for r, v in sorted(by.items())}


def first_answers(client, name, samples):
    """Query each sampled subnet once. Returns {region: {"first": {addr: n},
    "scopes": {scope: n}, "rcodes": {rc: n}, "n": count, "sizes": {len: n}}}."""
    out = {}
    for r, subs in samples.items():
        st = {"first": {}, "scopes": {}, "rcodes": {}, "sizes": {}, "n": 0}
        for s in subs:
            rep = client.query(name, s)
            st["n"] += 1
            st["rcodes"][rep["rcode"]] = st["rcodes"].get(rep["rcode"], 0) + 1
            n = len(rep["addresses"])
            st["sizes"][n] = st["sizes"].get(n, 0) + 1
            if rep["addresses"]:
                a = rep["addresses"][0]
                st["first"][a] = st["first"].get(a, 0) + 1
            scope = rep["ecs"][2] if rep["ecs"] else None
            st["scopes"][scope] = st["scopes"].get(scope, 0) + 1
        out[r] = st
    return out


# A correct server fails the per-region check at most this often: the
# check runs before every measured slot, so it must not flake.
SIGNIFICANCE = 1e-6


def binomial_tail(k, n, p):
    """P(X <= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1))


def judge(stats, expect, deterministic, share=0.8):
    """Problems (strings) when answers do not follow `expect` {region: replica id}.

    deterministic: every first answer must be the expected replica;
    otherwise the server puts the expected replica first with probability
    `share`, and a region fails only when so few of its first answers are
    that replica that a server drawing with `share` would show it less than
    once in 1/SIGNIFICANCE checks (a binomial test). Also flags a server
    whose answers do not depend on the region at all (it ignores ECS)."""
    problems = []
    for r, st in stats.items():
        want = ADDRESS[expect[r]]
        if st["rcodes"].get(0, 0) != st["n"]:
            problems.append("region %d: rcodes %s" % (r, st["rcodes"]))
            continue
        total = sum(st["first"].values())
        if not total:
            problems.append("region %d: empty answers" % r)
            continue
        hits = st["first"].get(want, 0)
        top = max(st["first"], key=st["first"].get)
        if deterministic and hits < total:
            problems.append("region %d: first answer %s in %.0f%% of %d, expected always %s"
                            % (r, top, 100 * hits / total, total, want))
        elif not deterministic and binomial_tail(hits, total, share) < SIGNIFICANCE:
            problems.append("region %d: first answer %s: %s only %d of %d times, improbable "
                            "(p < %g) for a server that puts it first with probability %.2f"
                            % (r, json.dumps(st["first"]), want, hits, total, SIGNIFICANCE, share))
    tops = {max(st["first"], key=st["first"].get) for st in stats.values() if st["first"]}
    if len(tops) <= 1 and len(set(expect.values())) > 1:
        problems.append("answers do not depend on the client's subnet (ECS ignored?): always %s"
                        % (tops.pop() if tops else "nothing"))
    return problems


def scope_summary(stats):
    scopes = {}
    for st in stats.values():
        for s, n in st["scopes"].items():
            scopes[s] = scopes.get(s, 0) + n
    vals = sorted(s for s in scopes if s is not None)
    if not vals:
        return "no ECS echoed"
    txt = "/%d" % vals[0] if vals[0] == vals[-1] else "/%d-/%d" % (vals[0], vals[-1])
    if None in scopes:
        txt += " (some without ECS)"
    return txt

