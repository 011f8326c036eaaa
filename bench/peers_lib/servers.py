"""Per-server configuration: which binary, which Debian package, how to start it.

Every server gets its own directory under bench/out/<name>/ holding the config
files this module writes, plus any state the daemon insists on keeping.  All of
them listen on 127.0.0.1 only, on their own port, with one worker where the
server lets us say so.  When we run as root, no daemon is allowed to switch
user (none is configured with a user to switch to) and every path it writes
to is inside its own directory.
"""

import glob
import hashlib
import os
import shutil
import time

from . import binaries

ZONE = "bench.test"


class Server:
    name = ""
    binary = ""          # checked with shutil.which (or an absolute path)
    extra_files = ()     # other files the package must provide
    packages = ()        # Debian packages that provide binary + extra_files
    threads = ""         # human-readable note on the worker configuration
    host = "127.0.0.1"   # the address it listens on

    def __init__(self, port, outdir, zonefile, repo):
        self.port = port
        self.dir = os.path.join(outdir, self.name)
        self.zonefile = zonefile
        self.repo = repo

    def missing(self):
        """List of missing binaries/files (empty when the server can run)."""
        miss = []
        if not (os.path.isabs(self.binary) and os.access(self.binary, os.X_OK)) \
                and not shutil.which(self.binary):
            miss.append(self.binary)
        miss += [f for f in self.extra_files if not os.path.exists(f)]
        return miss

    def prepare(self):
        """Write config files; return argv (without taskset)."""
        raise NotImplementedError

    def _write(self, rel, text):
        path = os.path.join(self.dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def _mkdirs(self, *rels):
        for rel in rels:
            os.makedirs(os.path.join(self.dir, rel), exist_ok=True)


class Pharos(Server):
    name = "pharos"
    threads = "--threads 1"

    @property
    def binary(self):
        return binaries.path("pharos")

    def snapshot_binary(self):
        """Copy the binary once, so every round measures the same build even if
        cargo rebuilds target/release/pharos meanwhile. Returns its identity."""
        os.makedirs(self.dir, exist_ok=True)
        self.copy = os.path.join(self.dir, "pharos")
        shutil.copy2(self.binary, self.copy)
        h = hashlib.sha256()
        with open(self.copy, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        st = os.stat(self.copy)
        return {"source": self.binary, "sha256": h.hexdigest(), "bytes": st.st_size,
                "built": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(st.st_mtime))}

    def prepare(self):
        os.makedirs(self.dir, exist_ok=True)
        exe = getattr(self, "copy", None) or self.binary
        return [exe, "serve", "--listen", "127.0.0.1:%d" % self.port,
                "--zone", "%s=%s" % (ZONE, self.zonefile), "--threads", "1"]


class PharosNoMetrics(Pharos):
    """The same build and flags with `[metrics] counting = false`: beside
    `pharos` in one run, the q/s ratio is what counting costs (issue 17)."""
    name = "pharos-nometrics"
    threads = Pharos.threads + ", [metrics] counting = false"

    def prepare(self):
        exe, command, *flags = super().prepare()
        conf = self._write("pharos.toml", "# written by bench/peers\n[metrics]\ncounting = false\n")
        return [exe, command, "--config", conf] + flags


class Knot(Server):
    name = "knot"
    binary = "knotd"
    packages = ("knot",)
    threads = "udp-workers 1, tcp-workers 1, background-workers 1"

    def prepare(self):
        self._mkdirs("run", "db", "storage")
        d = self.dir
        conf = self._write("knot.conf", f"""\
# written by bench/peers
server:
    rundir: "{d}/run"
    pidfile: "{d}/run/knot.pid"
    listen: {self.host}@{self.port}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1

log:
  - target: stderr
    any: warning

database:
    storage: "{d}/db"

control:
    listen: "{d}/run/knot.sock"

template:
  - id: default
    storage: "{d}/storage"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none

zone:
  - domain: {ZONE}
    file: "{self.zonefile}"
{self.extra_conf()}""")
        return ["knotd", "-c", conf]

    def extra_conf(self):
        """More of knot.conf, for subclasses."""
        return ""


class Nsd(Server):
    name = "nsd"
    binary = "nsd"
    packages = ("nsd",)
    threads = "server-count 1 (plus NSD's main and xfrd processes, CPU summed); RRL off"

    def prepare(self):
        self._mkdirs("xfr")
        d = self.dir
        conf = self._write("nsd.conf", f"""\
# written by bench/peers
server:
    ip-address: 127.0.0.1@{self.port}
    do-ip6: no
    server-count: 1
    reuseport: no
    username: ""
    chroot: ""
    zonesdir: "{d}"
    database: ""
    zonelistfile: "{d}/zone.list"
    xfrdfile: "{d}/xfrd.state"
    xfrdir: "{d}/xfr"
    pidfile: "{d}/nsd.pid"
    logfile: "{d}/nsd.log"
    verbosity: 1
    hide-version: yes
    # Debian's NSD has response-rate limiting on by default (200 q/s per
    # source); one load generator on 127.0.0.1 would be throttled.
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0

remote-control:
    control-enable: no

zone:
    name: {ZONE}
    zonefile: "{self.zonefile}"
""")
        return ["nsd", "-d", "-c", conf]


class Bind(Server):
    name = "bind"
    binary = "named"
    packages = ("bind9",)
    threads = "named -n 1 (one network/worker loop)"

    def prepare(self):
        os.makedirs(self.dir, exist_ok=True)
        d = self.dir
        conf = self._write("named.conf", f"""\
// written by bench/peers
options {{
    directory "{d}";
    pid-file "{d}/named.pid";
    session-keyfile "{d}/session.key";
    managed-keys-directory "{d}";
    listen-on port {self.port} {{ 127.0.0.1; }};
    listen-on-v6 {{ none; }};
    recursion no;
    allow-query {{ any; }};
    dnssec-validation no;
    notify no;
}};

controls {{ }};

zone "{ZONE}" {{
    type primary;
    file "{self.zonefile}";
}};
""")
        return ["named", "-g", "-4", "-n", "1", "-c", conf]


class PowerDns(Server):
    name = "pdns"
    binary = "pdns_server"
    packages = ("pdns-server", "pdns-backend-bind")
    threads = ("receiver-threads 1, distributor-threads 1 (TCP is served by its own thread); "
               "packet cache left on (default)")

    def missing(self):
        miss = super().missing()
        # the backend module lives in an architecture-specific directory
        if not glob.glob("/usr/lib/*/pdns/libbindbackend.so") and \
                not glob.glob("/usr/lib/pdns/libbindbackend.so"):
            miss.append("libbindbackend.so (pdns-backend-bind)")
        return miss

    def prepare(self):
        os.makedirs(self.dir, exist_ok=True)
        d = self.dir
        self._write("named.conf", f"""\
// written by bench/peers (PowerDNS bind backend)
zone "{ZONE}" {{
    type master;
    file "{self.zonefile}";
}};
""")
        self._write("pdns.conf", "# written by bench/peers\n" + pdns_base_conf(d, self.port))
        return ["pdns_server", "--config-dir=%s" % d]


class Gdnsd(Server):
    name = "gdnsd"
    binary = "gdnsd"
    packages = ("gdnsd",)
    threads = "udp_threads 1, tcp_threads 1"

    def prepare(self):
        self._mkdirs("zones", "run", "state")
        d = self.dir
        with open(self.zonefile) as src:
            self._write(os.path.join("zones", ZONE), src.read())
        self._write("config", f"""\
# written by bench/peers
options => {{
    listen => [ "127.0.0.1:{self.port}" ]
    udp_threads => 1
    tcp_threads => 1
    run_dir => "{d}/run"
    state_dir => "{d}/state"
}}
""")
        return ["gdnsd", "-c", d, "start"]


ALL = [Pharos, Knot, Nsd, Bind, PowerDns, Gdnsd, PharosNoMetrics]
BY_NAME = {c.name: c for c in ALL}
# Offsets from --base-port, fixed per server so logs and configs are stable.
PORT_OFFSET = {"pharos": 0, "knot": 1, "nsd": 2, "bind": 3, "pdns": 4, "gdnsd": 5,
               "pharos-nometrics": 6}


def pdns_base_conf(directory, port, backend=None):
    """pdns.conf for one pinned-down PowerDNS on loopback with `backend`'s
    lines (by default the bind backend reading DIRECTORY/named.conf);
    callers append their extras."""
    backend = backend or f"launch=bind\nbind-config={directory}/named.conf\n"
    return backend + f"""\
local-address=127.0.0.1:{port}
daemon=no
guardian=no
socket-dir={directory}
receiver-threads=1
distributor-threads=1
reuseport=no
webserver=no
api=no
disable-syslog=yes
loglevel=4
# no DNS lookup of the security-status name at startup
security-poll-suffix=
"""
