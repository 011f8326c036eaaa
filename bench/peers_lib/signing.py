"""Servers and answer checks of bench/signing: signed answers, live.

The zone is routed.py's bench.test (SOA, NS, `static` with 3 A) with the
routed service svc.bench.test (3 replicas, 8 regions by client prefix,
0.8/0.1/0.1 per region) in each server's own form:

- Pharos: the region-probabilities service in a zone with `dnssec = true`
  (a CSK, ECDSA P-256, made by `pharos key generate` into the server's
  store), or the same config unsigned;
- PowerDNS: routed.py's LUA record (netmask() on the ECS address, then
  pickwrandom) in a gsqlite3 zone secured by `pdnsutil secure-zone` (a CSK,
  ECDSA P-256, signed live), or the same zone unsigned;
- Knot DNS: svc as 3 static A records (Knot cannot route), signed by
  mod-onlinesign (a CSK, ECDSA P-256, made by Knot), or unsigned.

Every server is set up once (keys and databases made, `setup`) and
started once per round (`prepare`). Checks (`check_dig`, `check_delv`)
ask through BIND's dig and delv, not through this harness's own parser.
"""

import glob
import os
import shutil
import sqlite3
import subprocess

from . import routed, servers

ZONE = routed.ZONE
PDNS_SCHEMA = "/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql"
# Names that do not exist, numbered.
NX_NAME = "nx%d." + ZONE
# What each query file asks (for the nonexistent names: the first).
QUESTIONS = {"routed": routed.SERVICE, "static": routed.STATIC, "nx": NX_NAME % 0}


class SetupFailed(RuntimeError):
    """A server's keys or database could not be made."""


def run_tool(argv, cwd=None):
    """Runs a setup command; its output, or SetupFailed saying what it said."""
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise SetupFailed("%s failed (rc=%d):\n%s" % (" ".join(argv), p.returncode, (p.stdout + p.stderr)[-2000:]))
    return p.stdout


def write_queries(outdir, nx_names):
    """One query file per kind of question: {kind: path}. `nx` holds
    `nx_names` distinct names that do not exist, asked in turn."""
    paths = {}
    for kind in ("routed", "static"):
        paths[kind] = os.path.join(outdir, "queries-%s.txt" % kind)
        with open(paths[kind], "w") as f:
            f.write("%s A\n" % QUESTIONS[kind])
    paths["nx"] = os.path.join(outdir, "queries-nx.txt")
    with open(paths["nx"], "w") as f:
        f.writelines("%s A\n" % (NX_NAME % i) for i in range(nx_names))
    return paths


def fresh_dir(path):
    """Empties `path` of an earlier run's keys, databases and logs."""
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)


# --------------------------------------------------------------------------- servers

class PharosRows(routed.PharosRouted):
    """Pharos with routed.py's service and `[store]`, its zone signed when
    `signed`; `query_key` names the query file that measures it."""
    signed = True
    routes = True
    replicas_answered = 3

    def __init__(self, port, outdir, zonefile, repo):
        super().__init__(port, outdir, zonefile, repo)
        self.store_path = os.path.join(self.dir, "state.sqlite")
        self.conf = os.path.join(self.dir, "pharos.toml")

    def setup(self):
        fresh_dir(self.dir)
        with open(self.conf, "w") as f:
            f.write(routed.pharos_config(self.port, self.zonefile, store=self.store_path, host=self.host,
                                         dnssec=self.signed))
        if self.signed:
            exe = getattr(self, "copy", None) or self.binary
            run_tool([exe, "key", "generate", ZONE, "--config", self.conf, "--algorithm", "ecdsap256sha256"],
                     cwd=self.dir)

    def prepare(self):
        exe = getattr(self, "copy", None) or self.binary
        return [exe, "serve", "--config", self.conf]


class PharosUnsigned(PharosRows):
    name = "pharos-unsigned"
    signed = False
    answers = "3 A, routed (region probabilities), zone unsigned"


class PharosSigned(PharosRows):
    name = "pharos-signed"
    answers = "3 A + RRSIG, routed, signature cached per address set"


class PharosStaticSigned(PharosRows):
    name = "pharos-static-signed"
    query_key = "static"
    answers = "3 A + RRSIG of static.bench.test, signed at load"


class PharosNxSigned(PharosRows):
    name = "pharos-nx-signed"
    query_key = "nx"
    answers = "compact denial (NSEC with NXNAME + RRSIG), signed per name"


class PdnsLua(servers.Server):
    """PowerDNS with the LUA record in a gsqlite3 zone, live-signed when `signed`."""
    name = "pdns-lua-unsigned"
    binary = "pdns_server"
    packages = ("pdns-server", "pdns-backend-sqlite3")
    extra_files = (PDNS_SCHEMA,)
    query_key = "routed"
    signed = False
    routes = True
    replicas_answered = 1
    answers = "1 A: LUA pickwrandom per region, zone unsigned"
    threads = "receiver-threads 1, distributor-threads 1; packet cache on (default)"

    def missing(self):
        miss = super().missing()
        if not glob.glob("/usr/lib/*/pdns/libgsqlite3backend.so") and \
                not glob.glob("/usr/lib/pdns/libgsqlite3backend.so"):
            miss.append("libgsqlite3backend.so (pdns-backend-sqlite3)")
        return miss

    def setup(self):
        fresh_dir(self.dir)
        d = self.dir
        database = os.path.join(d, "pdns.sqlite3")
        with open(PDNS_SCHEMA) as f:
            schema = f.read()
        with sqlite3.connect(database) as db:
            db.executescript(schema)
        backend = "launch=gsqlite3\ngsqlite3-database=%s\ngsqlite3-dnssec=yes\n" % database
        with open(os.path.join(d, "pdns.conf"), "w") as f:
            f.write("# written by bench/signing\n" + servers.pdns_base_conf(d, self.port, backend)
                    + "enable-lua-records=yes\nedns-subnet-processing=yes\n")
        zone = os.path.join(d, "bench.test.zone")
        with open(zone, "w") as f:
            f.write(routed.zone_text('svc 60 IN LUA A "%s"\n' % routed.pdns_lua_record()))
        pdnsutil = ["pdnsutil", "--config-dir=%s" % d]
        run_tool(pdnsutil + ["load-zone", ZONE, zone])
        if self.signed:
            # a CSK, ECDSA P-256 (pdnsutil's default), NSEC
            run_tool(pdnsutil + ["secure-zone", ZONE])
        run_tool(pdnsutil + ["rectify-zone", ZONE])

    def prepare(self):
        return ["pdns_server", "--config-dir=%s" % self.dir]


class PdnsLuaSigned(PdnsLua):
    name = "pdns-lua-signed"
    signed = True
    answers = "1 A + RRSIG: LUA pickwrandom per region, signed live"


class Knot(servers.Knot):
    """Knot DNS over the zone with svc as 3 static A, signed by
    mod-onlinesign when `signed` (its key made by Knot at the first start)."""
    name = "knot-unsigned"
    query_key = "routed"
    signed = False
    routes = False
    replicas_answered = 3
    answers = "3 static A (no routing), zone unsigned"

    def setup(self):
        fresh_dir(self.dir)
        self.zonefile = os.path.join(self.dir, "bench.test.zone")
        with open(self.zonefile, "w") as f:
            f.write(routed.zone_text("".join("svc 60 IN A %s\n" % addr for _, addr in routed.REPLICAS)))

    def extra_conf(self):
        return "    module: mod-onlinesign\n" if self.signed else ""


class KnotOnlinesign(Knot):
    name = "knot-onlinesign"
    signed = True
    answers = "3 static A + RRSIG, mod-onlinesign (signs every answer)"


ALL = [PharosUnsigned, PharosSigned, PharosStaticSigned, PharosNxSigned, PdnsLuaSigned, PdnsLua,
       KnotOnlinesign, Knot]
BY_NAME = {c.name: c for c in ALL}


# --------------------------------------------------------------------------- checks

def dig(port, name, rtype, subnet=None):
    """dig +dnssec's answer: {"rcode", "answer": [fields], "authority": [fields]},
    each record as its whitespace-split presentation fields."""
    argv = ["dig", "@127.0.0.1", "-p", str(port), "+dnssec", "+norec", "+time=2", "+tries=2",
            "+noall", "+comments", "+answer", "+authority", name, rtype]
    if subnet:
        argv.append("+subnet=%s" % subnet)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    reply = {"rcode": None, "answer": [], "authority": []}
    section = None
    for line in out.splitlines():
        if "status:" in line:
            reply["rcode"] = line.split("status:")[1].split(",")[0].strip()
        elif line.startswith(";; ANSWER SECTION"):
            section = "answer"
        elif line.startswith(";; AUTHORITY SECTION"):
            section = "authority"
        elif line.startswith(";") or not line.strip():
            continue
        elif section:
            reply[section].append(line.split())
    if reply["rcode"] is None:
        raise ValueError("dig printed no reply: %s" % out[-300:])
    return reply


def rrsig_problems(records, rtype, owner):
    """Problems with the RRSIG over `owner`'s `rtype` among `records`: one
    must be there, signed by the zone."""
    sigs = [r for r in records if r[3] == "RRSIG" and r[4] == rtype and r[0].rstrip(".").lower() == owner.lower()]
    if not sigs:
        return ["no RRSIG over %s %s" % (owner, rtype)]
    return ["RRSIG over %s signed by %s, not %s." % (rtype, r[11], ZONE) for r in sigs
            if r[11].rstrip(".").lower() != ZONE]


def check_dig(srv, name, subnet):
    """Problems with one dig +dnssec answer of `srv` to NAME A from `subnet`."""
    try:
        reply = dig(srv.port, name, "A", subnet)
    except (ValueError, subprocess.TimeoutExpired) as e:
        return ["%s from %s: %s" % (name, subnet, e)]
    where = "%s from %s" % (name, subnet)
    records = reply["answer"] + reply["authority"]
    if srv.query_key == "nx":
        # Compact denial (RFC 9824): NOERROR, an NSEC at the name itself.
        problems = [] if reply["rcode"] == "NOERROR" else ["rcode %s, expected NOERROR" % reply["rcode"]]
        if reply["answer"]:
            problems.append("answer not empty")
        nsec = [r for r in reply["authority"] if r[3] == "NSEC" and r[0].rstrip(".").lower() == name.lower()]
        if not nsec:
            problems.append("no NSEC at %s in authority" % name)
        problems += rrsig_problems(reply["authority"], "NSEC", name)
        return ["%s: %s" % (where, p) for p in problems]
    problems = [] if reply["rcode"] == "NOERROR" else ["rcode %s" % reply["rcode"]]
    addresses = [r for r in reply["answer"] if r[3] == "A"]
    if len(addresses) != srv.replicas_answered:
        problems.append("%d A, expected %d" % (len(addresses), srv.replicas_answered))
    if srv.signed:
        problems += rrsig_problems(reply["answer"], "A", name)
    elif any(r[3] == "RRSIG" for r in records):
        problems.append("RRSIG in an unsigned zone's answer")
    return ["%s: %s" % (where, p) for p in problems]


def check_delv(srv, name, workdir):
    """Problems with delv's validation of `srv`'s answer to NAME A from a
    trust anchor of the DNSKEYs the server publishes (None when it
    validates). Asked over TCP, without ECS (the unclassified region)."""
    try:
        keys = [r for r in dig(srv.port, ZONE, "DNSKEY")["answer"] if r[3] == "DNSKEY"]
    except (ValueError, subprocess.TimeoutExpired) as e:
        return "DNSKEY: %s" % e
    if not keys:
        return "no DNSKEY at %s" % ZONE
    secure_entry = [r for r in keys if r[4] == "257"] or keys
    anchors = os.path.join(workdir, "%s-anchors.conf" % srv.name)
    with open(anchors, "w") as f:
        f.write("trust-anchors {\n%s};\n" % "".join(
            '  %s. static-key %s %s %s "%s";\n' % (ZONE, r[4], r[5], r[6], "".join(r[7:])) for r in secure_entry))
    argv = ["delv", "@127.0.0.1", "-p", str(srv.port), "-a", anchors, "+root=%s" % ZONE, "+nomtrace", "+tcp",
            name, "A"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    said = p.stdout + p.stderr
    return None if "fully validated" in said else "delv %s A: %s" % (name, " ".join(said.split())[:300])
