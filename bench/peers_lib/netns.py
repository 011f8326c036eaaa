"""Two network namespaces joined by a veth pair, for benchmarks that need a
real interface where loopback will not do (native XDP).

The server's end and the client's end each get GRO (so each end keeps a
NAPI instance while XDP programs come and go) and threaded NAPI, whose
kernel thread is pinned to that side's CPU: receive processing, XDP
included, then runs on the CPU of the side that receives, where it can be
accounted. For a server that answers with XDP_TX, the client's end needs
an XDP program that passes everything (attach_pass_program): frames sent
back with XDP_TX wait in the client end's ring until its NAPI runs, and
the kernel (6.18, veth_xdp_flush) wakes it for them only when that end has
an XDP program; without one they sat there until the next ordinary packet
came. Everything made here is removed by
close(), also after an error; namespaces left by a run that was killed
are removed by the next one (their names carry the creating process's id).
"""

import ctypes
import os
import re
import subprocess
import tempfile

PREFIX = "pharos-bench-"
SERVER_ADDRESS = "198.51.100.1"
CLIENT_ADDRESS = "198.51.100.2"
PREFIX_LEN = 24
CLONE_NEWNET = 0x40000000
PASS_PROGRAM = """\
__attribute__((section("xdp"), used)) int pass_up(void *ctx) { return 2; /* XDP_PASS */ }
char _license[] __attribute__((section("license"), used)) = "GPL";
"""


class NetnsError(RuntimeError):
    pass


def run(argv):
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise NetnsError("%s failed (rc=%d): %s" % (" ".join(argv), p.returncode,
                                                   (p.stderr or p.stdout).strip()))
    return p.stdout


def remove_stale(log):
    """Deletes the namespaces of earlier runs whose process is gone."""
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for line in listing.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.fullmatch(re.escape(PREFIX) + r"[sc]-(\d+)", name)
        if m and not os.path.exists("/proc/%s" % m.group(1)):
            log("removing namespace %s left by an earlier run" % name)
            subprocess.run(["ip", "netns", "del", name])


class VethPair:
    """Namespaces `server` and `client` joined by a veth pair.

    The server's end has SERVER_ADDRESS, the client's end CLIENT_ADDRESS and
    `client_sources` (extra /32s the server reaches through the client, so a
    load generator can ask from several addresses)."""

    def __init__(self, server_cpu, client_cpu, client_sources=()):
        pid = os.getpid()
        self.ns = {"server": "%ss-%d" % (PREFIX, pid), "client": "%sc-%d" % (PREFIX, pid)}
        # Interface names are at most 15 octets; NAPI threads are named napi/IFACE-ID.
        self.iface = {"server": "fbs%d" % (pid % 100000), "client": "fbc%d" % (pid % 100000)}
        self.cpu = {"server": server_cpu, "client": client_cpu}
        self.client_sources = list(client_sources)
        self.made = []
        self.scratch = None

    def create(self):
        try:
            for side in ("server", "client"):
                run(["ip", "netns", "add", self.ns[side]])
                self.made.append(self.ns[side])
            run(["ip", "link", "add", self.iface["server"], "netns", self.ns["server"], "type", "veth",
                 "peer", "name", self.iface["client"], "netns", self.ns["client"]])
            addresses = {"server": [SERVER_ADDRESS + "/%d" % PREFIX_LEN],
                         "client": [CLIENT_ADDRESS + "/%d" % PREFIX_LEN]
                         + [s + "/32" for s in self.client_sources]}
            for side in ("server", "client"):
                for address in addresses[side]:
                    self.ip(side, "addr", "add", address, "dev", self.iface[side])
                self.ip(side, "link", "set", "lo", "up")
                self.ip(side, "link", "set", self.iface[side], "up")
                # GRO first: it gives the end its NAPI instance, which
                # threaded mode needs to exist. TSO off: veth hands a TSO
                # sender's UDP packets to the peer's NAPI only if the peer
                # aggregates UDP (GRO forwarding or fraglist); else they
                # take netif_rx and the receive work runs on the sender's
                # CPU, charged to the wrong side.
                run(self.argv(side, ["ethtool", "-K", self.iface[side], "gro", "on", "tso", "off"]))
                run(self.argv(side, ["sh", "-c", "echo 1 > /sys/class/net/%s/threaded" % self.iface[side]]))
            for source in self.client_sources:
                self.ip("server", "route", "add", source + "/32", "via", CLIENT_ADDRESS)
            self.pin_napi()
        except BaseException:
            self.close()
            raise
        return self

    def attach_pass_program(self, side):
        """Attaches PASS_PROGRAM (compiled with clang the first time) to the
        side's end."""
        if self.scratch is None:
            self.scratch = tempfile.TemporaryDirectory()
            source = os.path.join(self.scratch.name, "pass.c")
            with open(source, "w") as f:
                f.write(PASS_PROGRAM)
            run(["clang", "-O2", "-target", "bpf", "-c", source, "-o", os.path.join(self.scratch.name, "pass.o")])
        obj = os.path.join(self.scratch.name, "pass.o")
        self.ip(side, "link", "set", "dev", self.iface[side], "xdp", "obj", obj, "sec", "xdp")

    def has_program(self, side):
        """Whether the side's end has an XDP program attached."""
        return "prog/xdp" in self.ip(side, "-d", "link", "show", "dev", self.iface[side])

    def mac(self, side):
        """The MAC address of the side's end."""
        fields = self.ip(side, "-br", "link", "show", "dev", self.iface[side]).split()
        if len(fields) < 3:
            raise NetnsError("no MAC address of %s in %r" % (self.iface[side], fields))
        return fields[2]

    def detach_program(self, side):
        self.ip(side, "link", "set", "dev", self.iface[side], "xdp", "off")

    def close(self):
        if self.scratch is not None:
            self.scratch.cleanup()
            self.scratch = None
        while self.made:
            subprocess.run(["ip", "netns", "del", self.made.pop()], capture_output=True)

    def __enter__(self):
        return self.create()

    def __exit__(self, *exc):
        self.close()

    def ip(self, side, *args):
        return run(["ip", "-n", self.ns[side]] + list(args))

    def argv(self, side, argv):
        """argv run inside the side's namespace."""
        return ["ip", "netns", "exec", self.ns[side]] + list(argv)

    def drops_toward_client(self):
        """Packets the server's end could not hand to the client's end so
        far (its ring full: the client did not keep up): sent ones dropped
        and XDP_TX frames that failed."""
        link = self.ip("server", "-s", "link", "show", "dev", self.iface["server"])
        m = re.search(r"TX:.*\n\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", link)
        stats = run(self.argv("server", ["ethtool", "-S", self.iface["server"]]))
        xdp = re.findall(r"xdp_tx_errors:\s*(\d+)", stats)
        if not m:
            raise NetnsError("no TX counters on %s: %s" % (self.iface["server"], link))
        return int(m.group(4)) + sum(int(n) for n in xdp)

    def napi_threads(self, side):
        """PIDs of the NAPI kernel threads of the side's end."""
        comm = ("napi/%s-" % self.iface[side])[:15]
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open("/proc/%s/comm" % entry) as f:
                    if f.read().strip().startswith(comm):
                        found.append(int(entry))
            except OSError:
                continue
        return found

    def pin_napi(self):
        """Pins each end's NAPI threads to its side's CPU (again after an XDP
        program came or went, in case the kernel made new ones). Returns
        {side: [pid, ...]}."""
        threads = {}
        for side in ("server", "client"):
            threads[side] = self.napi_threads(side)
            if not threads[side]:
                raise NetnsError("no NAPI thread for %s: threaded NAPI is off?" % self.iface[side])
            for pid in threads[side]:
                os.sched_setaffinity(pid, {self.cpu[side]})
        return threads

    def inside(self, side):
        return Inside(self.ns[side])


class Inside:
    """Context: sockets this thread makes meanwhile belong to the namespace
    (setns(2) on the calling thread; the thread's own namespace comes back
    at exit)."""

    libc = ctypes.CDLL(None, use_errno=True)

    def __init__(self, name):
        self.name = name

    def _setns(self, fd):
        if self.libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise NetnsError("setns into %s: %s" % (self.name, os.strerror(err)))

    def __enter__(self):
        self.home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open("/run/netns/%s" % self.name, os.O_RDONLY)
        try:
            self._setns(target)
        except BaseException:
            os.close(self.home)
            raise
        finally:
            os.close(target)
        return self

    def __exit__(self, *exc):
        try:
            self._setns(self.home)
        finally:
            os.close(self.home)
