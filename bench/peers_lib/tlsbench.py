"""Servers and the load generator of bench/encrypted (DNS over TLS and HTTPS).

Pharos serves DoT and DoH itself; dnsdist (Debian) fronts a backend -- a
plain Pharos on UDP/TCP -- with its packet cache. Both present the same
certificate (ECDSA P-256, made by `tlsload gencert` the way Pharos makes its
own). bench/target/release/tlsload is the client: one process per server address,
driven line by line over stdin/stdout (see bench/tlsload/src/main.rs).
"""

import json
import os
import resource
import select
import shutil
import socket
import subprocess
import time

from . import procs

ZONE = "bench.test"


class LoadError(RuntimeError):
    pass


# --------------------------------------------------------------------------- limits

def nofile_limits():
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def raise_own_nofile(want):
    """Raise this process's RLIMIT_NOFILE (children inherit it): the hard
    limit to `want` if allowed (CAP_SYS_RESOURCE), the soft one to the hard
    one. Returns (soft, hard, raised_hard: bool)."""
    soft, hard = nofile_limits()
    raised = False
    if hard != resource.RLIM_INFINITY and hard < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
            raised = True
        except (ValueError, OSError):
            pass
    soft, hard = nofile_limits()
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    soft, hard = nofile_limits()
    return soft, hard, raised


def process_nofile(pid):
    """(soft, hard) RLIMIT_NOFILE of a running process, from /proc."""
    try:
        with open("/proc/%d/limits" % pid) as f:
            for line in f:
                if line.startswith("Max open files"):
                    parts = line.split()
                    return int(parts[3]), int(parts[4])
    except (OSError, ValueError, IndexError):
        pass
    return None


# --------------------------------------------------------------------------- /proc

def rss_kib(root):
    """Sum of VmRSS over the process tree under root, KiB."""
    total = 0
    for pid in procs.tree(root):
        try:
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            pass
    return total


def fd_count(root):
    n = 0
    for pid in procs.tree(root):
        try:
            n += len(os.listdir("/proc/%d/fd" % pid))
        except OSError:
            pass
    return n


def sockstat_tcp():
    """/proc/net/sockstat TCP line as a dict (inuse, orphan, tw, alloc, mem pages)."""
    try:
        with open("/proc/net/sockstat") as f:
            for line in f:
                if line.startswith("TCP:"):
                    parts = line.split()[1:]
                    return {parts[i]: int(parts[i + 1]) for i in range(0, len(parts) - 1, 2)}
    except (OSError, ValueError):
        pass
    return {}


def port_free(port):
    """Free for a server on 127.0.0.1, UDP and TCP. Unlike harness.port_free,
    binds TCP with SO_REUSEADDR, as the servers do, so that connections in
    TIME_WAIT from an earlier run do not count."""
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
        with socket.socket(socket.AF_INET, kind) as s:
            if kind == socket.SOCK_STREAM:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def tcp_port_open(port, timeout=0.2):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


# --------------------------------------------------------------------------- servers

class TlsServer:
    """Common shape, as harness.Running expects: name, dir, port (plain
    DNS, for readiness), prepare() -> argv."""
    name = ""
    dot_port = None
    doh_port = None
    nofile = None   # (soft, hard) to start the process with, via prlimit

    def _prefix(self):
        if self.nofile and shutil.which("prlimit"):
            return ["prlimit", "--nofile=%d:%d" % self.nofile, "--"]
        return []

    def ready_probe(self):
        ports = [p for p in (self.dot_port, self.doh_port) if p]

        def probe():
            for p in ports:
                if not tcp_port_open(p):
                    return "TCP %d not accepting" % p
            return None
        return probe


class PharosTls(TlsServer):
    """Pharos with DNS over TLS and HTTPS, one worker (threads = 1)."""

    def __init__(self, name, workdir, exe, zonefile, cert, key, port, dot_port, doh_port,
                 max_connections, per_client, idle_ms):
        self.name = name
        self.dir = os.path.join(workdir, name)
        self.exe, self.zonefile, self.cert, self.key = exe, zonefile, cert, key
        self.port, self.dot_port, self.doh_port = port, dot_port, doh_port
        self.max_connections, self.per_client, self.idle_ms = max_connections, per_client, idle_ms

    def prepare(self):
        os.makedirs(self.dir, exist_ok=True)
        conf = os.path.join(self.dir, "pharos.toml")
        tls = ""
        if self.dot_port or self.doh_port:
            tls = "[tls]\n"
            if self.dot_port:
                tls += 'listen = ["127.0.0.1:%d"]\n' % self.dot_port
            if self.doh_port:
                tls += 'https_listen = ["127.0.0.1:%d"]\n' % self.doh_port
            tls += 'certificate = "%s"\nkey = "%s"\n' % (self.cert, self.key)
        with open(conf, "w") as f:
            f.write(f"""\
# written by bench/encrypted
[server]
listen = ["127.0.0.1:{self.port}"]
threads = 1

[tcp]
idle_timeout_ms = {self.idle_ms}
max_connections = {self.max_connections}
max_connections_per_client = {self.per_client}

{tls}
[[zone]]
origin = "{ZONE}"
file = "{self.zonefile}"
""")
        return self._prefix() + [self.exe, "serve", "--config", conf]


class Dnsdist(TlsServer):
    """dnsdist with a DoT and a DoH frontend and a packet cache, in front of
    `backend_port` (plain DNS). One TCP worker thread (the frontends'
    handshakes and queries), as the servers here get one worker each."""
    packages = ("dnsdist",)
    CONSOLE_KEY = "MXNeLFWHUe4363BBKrY06cAsH8NWNb+Se2eXU5+Bb74="

    def __init__(self, name, workdir, cert, key, port, dot_port, doh_port, backend_port,
                 console_port, idle_s, max_in_flight):
        self.name = name
        self.dir = os.path.join(workdir, name)
        self.cert, self.key = cert, key
        self.port, self.dot_port, self.doh_port = port, dot_port, doh_port
        self.backend_port, self.console_port = backend_port, console_port
        self.idle_s, self.max_in_flight = idle_s, max_in_flight
        self.conf = os.path.join(self.dir, "dnsdist.conf")

    def prepare(self):
        os.makedirs(self.dir, exist_ok=True)
        doh = ""
        if self.doh_port:
            doh = ('addDOHLocal("127.0.0.1:%d", "%s", "%s", "/dns-query", { idleTimeout=%d })\n'
                   % (self.doh_port, self.cert, self.key, self.idle_s))
        with open(self.conf, "w") as f:
            f.write(f"""\
-- written by bench/encrypted
setSecurityPollSuffix("")          -- no security-status lookup over the Internet
setLocal("127.0.0.1:{self.port}")
addTLSLocal("127.0.0.1:{self.dot_port}", "{self.cert}", "{self.key}", {{ provider="openssl", maxInFlight={self.max_in_flight} }})
{doh}newServer({{address="127.0.0.1:{self.backend_port}", name="backend", checkName="{ZONE}.", checkType="SOA"}})
pc = newPacketCache(200000, {{maxTTL=86400, minTTL=0}})
getPool(""):setCache(pc)
setMaxTCPClientThreads(1)
setMaxTCPQueuedConnections(100000)
setTCPRecvTimeout({self.idle_s})
setTCPSendTimeout(60)
controlSocket("127.0.0.1:{self.console_port}")
setKey("{self.CONSOLE_KEY}")
""")
        return self._prefix() + ["dnsdist", "--supervised", "--disable-syslog", "-C", self.conf]

    def console(self, command, timeout=10):
        try:
            p = subprocess.run(["dnsdist", "-C", self.conf, "-c", "-e", command],
                               capture_output=True, text=True, timeout=timeout)
            return p.stdout + p.stderr
        except (OSError, subprocess.TimeoutExpired) as e:
            return "console failed: %s" % e


def dnsdist_version():
    try:
        p = subprocess.run(["dnsdist", "--version"], capture_output=True, text=True, timeout=10)
        return p.stdout.splitlines()[0].strip() if p.stdout else "?"
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return "?"


# --------------------------------------------------------------------------- tlsload

class TlsLoad:
    """One `tlsload run` process pinned to a CPU; cmd() sends a command line
    and returns its JSON answer (with the process's CPU seconds added)."""

    def __init__(self, binary, cpu, server_port, proto, ca, queries, sources, log_path,
                 timeout_ms=20000):
        self.argv = ["taskset", "-c", str(cpu), binary, "run",
                     "--server", "127.0.0.1:%d" % server_port, "--proto", proto,
                     "--ca", ca, "--queries", queries, "--timeout-ms", str(timeout_ms),
                     # the client skips certificate checks (probes still verify),
                     # so that one client core keeps up with the server's handshakes
                     "--no-verify"]
        if sources:
            self.argv += ["--sources", sources]
        self.log = open(log_path, "a")
        self.log.write("\n===== %s\n" % " ".join(self.argv))
        self.log.flush()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, bufsize=1,
                                     start_new_session=True)
        self.start = self._read(30.0, "start")

    def cpu_s(self):
        return procs.cpu_seconds_between({}, procs.snapshot(self.proc.pid))

    def _read(self, timeout, what):
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                self.stop()
                raise LoadError("tlsload: no answer to %r in %gs" % (what, timeout))
            ready, _, _ = select.select([self.proc.stdout], [], [], min(left, 1.0))
            if not ready:
                continue
            line = self.proc.stdout.readline()
            if not line:
                rc = self.proc.wait(timeout=5)
                raise LoadError("tlsload exited (rc=%s) during %r; see %s" % (rc, what, self.log.name))
            line = line.strip()
            if line.startswith("{"):
                return json.loads(line)

    def cmd(self, line, timeout):
        c0 = self.cpu_s()
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise LoadError("tlsload: cannot send %r: %s" % (line, e))
        out = self._read(timeout, line)
        if "error" in out:
            raise LoadError("tlsload %r: %s" % (line, out["error"]))
        out["loadgen_cpu_s"] = self.cpu_s() - c0
        return out

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired, ValueError):
                try:
                    os.killpg(self.proc.pid, 9)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
        self.log.close()


def gencert(binary, directory):
    os.makedirs(directory, exist_ok=True)
    p = subprocess.run([binary, "gencert", "--dir", directory], capture_output=True, text=True,
                       timeout=60)
    if p.returncode != 0:
        raise LoadError("tlsload gencert failed: %s" % p.stderr)
    return os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
