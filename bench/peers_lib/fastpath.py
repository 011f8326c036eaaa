"""bench/fastpath's parts: the zone and query mixes, the servers run in the
server's namespace, the check of their answers (and Pharos's own count of
what its kernel path answered), the load generators (xdpgen or dnsload
at a rate, kxdpgun flat out), the search for the rate at which a server
saturates, the CPU accounting of one core, and the plot.

Mixes: a share of queries the kernel path can answer (static names of the
zone, A or AAAA, installed in its map) and the rest queries it passes up:
names the zone answers NXDOMAIN for (a map miss; user space answers them
from the zone's negative answer, as cheap as a hit there). Besides those,
`routed` asks for svc.bench.test (a region-probabilities service, 3
replicas: routed.py) and `static` for static.bench.test (3 A in the zone):
the same number of names and the same answer size.
"""

import ctypes
import json
import math
import os
import platform
import random
import re
import struct
import subprocess
import time
import urllib.request

from . import dnsmsg, harness, netns, procs, routed, servers

HIT_PERCENTS = (0, 25, 50, 75, 100)
ROUTED_MIXES = ("routed", "static")
HIT_NAMES = 200
PORT = 53
API_PORT = 5380
TOKEN = "bench"
# One client address unclassified and one in each of routed.py's 8 regions
# (100.65.0.0/16 ... 100.72.0.0/16), so routed answers take every class.
SOURCES = ["100.64.0.2"] + ["100.%d.0.2" % (64 + region) for region in range(1, routed.NREGIONS + 1)]
SAMPLE = 24


def mix_label(mix):
    return "%d %%" % mix if isinstance(mix, int) else mix


def mix_key(text):
    """A mix from its command-line or JSON name: '25' -> 25, 'routed'."""
    if text in ROUTED_MIXES:
        return text
    value = int(text)
    if not 0 <= value <= 100:
        raise ValueError("hit share %d is not a percentage" % value)
    return value


# --------------------------------------------------------------------------- zone and mixes

def write_inputs(outdir, seed, lines):
    """The zone and one query file per mix; returns {'zone': path,
    'mixes': {mix: {'queries': path, 'sample': [(name, type, check)],
    'noerror': expected NOERROR share}}}."""
    rng = random.Random(seed)
    os.makedirs(outdir, exist_ok=True)
    hits = ["h%03d.%s" % (i, routed.ZONE) for i in range(HIT_NAMES)]
    records = []
    for i in range(HIT_NAMES):
        records.append("h%03d 300 IN A 192.0.2.%d" % (i, 10 + i % 240))
        records.append("h%03d 300 IN AAAA 2001:db8::%x" % (i, 0x100 + i))
    zone = os.path.join(outdir, "bench.test.zone")
    with open(zone, "w") as f:
        f.write(routed.zone_text("\n".join(records) + "\n"))
    hit_check = {"rcode": "NOERROR", "kind": "answer", "answers": 1}
    miss_check = {"rcode": "NXDOMAIN", "kind": "negative"}
    mixes = {}
    for percent in HIT_PERCENTS:
        count = round(lines * percent / 100)
        queries = [(rng.choice(hits), rng.choice(("A", "AAAA")), "hit") for _ in range(count)]
        queries += [("nx%05d-%d.%s" % (i, rng.randrange(10 ** 6), routed.ZONE), "A", "miss")
                    for i in range(lines - count)]
        rng.shuffle(queries)
        checked = [(name, qtype, dict(hit_check, answer_type=qtype) if kind == "hit" else miss_check)
                   for name, qtype, kind in queries]
        mixes[percent] = _mix_file(outdir, percent, checked, count / lines, rng)
    for mix, name in (("routed", routed.SERVICE), ("static", routed.STATIC)):
        check = {"rcode": "NOERROR", "kind": "answer", "answer_type": "A", "answers": len(routed.REPLICAS)}
        mixes[mix] = _mix_file(outdir, mix, [(name, "A", check)], 1.0, rng)
    return {"zone": zone, "mixes": mixes}


def _mix_file(outdir, mix, checked, noerror, rng):
    path = os.path.join(outdir, "queries-%s.txt" % mix)
    with open(path, "w") as f:
        for name, qtype, _ in checked:
            f.write("%s %s\n" % (name, qtype))
    sample = rng.sample(checked, min(SAMPLE, len(checked)))
    return {"queries": path, "sample": sample, "noerror": noerror, "lines": len(checked)}


# --------------------------------------------------------------------------- servers

class InNamespace:
    """Runs the server inside the benchmark's server namespace, on its
    address and port 53. Set `namespace` and `interface` before prepare().
    `xdp`: it puts an XDP program on the interface; `xdp_tx`: that program
    answers with XDP_TX (the client's end then needs one too: netns)."""
    namespace = None
    interface = None
    host = netns.SERVER_ADDRESS
    xdp = False
    xdp_tx = False
    label = ""

    def prepare(self):
        return ["ip", "netns", "exec", self.namespace] + super().prepare()


class PharosSocket(InNamespace, routed.PharosRouted):
    name = "pharos"
    label = "Pharos socket"
    threads = "[server] threads = 1"


class PharosXdp(PharosSocket):
    name = "pharos-xdp"
    label = "Pharos XDP"
    xdp = True
    xdp_tx = True

    def prepare(self):
        return super().prepare() + ["--xdp", self.interface]


class PharosPass(PharosSocket):
    """The socket server with a program on its end that passes every
    packet up: what having any XDP program there costs veth's receive
    path, apart from what Pharos's program does."""
    name = "pharos-pass"
    label = "Pharos socket + XDP pass"
    xdp = True
    pass_program = True


class KnotSocket(InNamespace, servers.Knot):
    name = "knot"
    label = "Knot socket"


class KnotXdp(KnotSocket):
    name = "knot-xdp"
    label = "Knot XDP"
    threads = "udp-workers 1 (one XDP worker per queue; the veth has one), tcp-workers 1"
    xdp = True

    def extra_conf(self):
        return "xdp:\n    listen: %s@%d\n    udp: on\n" % (self.interface, PORT)


ALL = [PharosSocket, PharosXdp, KnotSocket, KnotXdp, PharosPass]
BY_NAME = {c.name: c for c in ALL}


def make_server(cls, outdir, zone, repo, pair, seed):
    if issubclass(cls, routed.PharosRouted):
        # The control API (on the namespace's loopback) reports the kernel's counters.
        srv = cls(PORT, outdir, zone, repo, api_port=API_PORT, seed=seed)
    else:
        srv = cls(PORT, outdir, zone, repo)
    srv.namespace = pair.ns["server"]
    srv.interface = pair.iface["server"]
    return srv


def serves_mix(srv, mix):
    """Knot has no routed service: it runs the hit mixes only."""
    return isinstance(mix, int) or isinstance(srv, PharosSocket)


def xdp_attached(pair):
    """'native', 'generic' or None: the XDP program on the server's end."""
    link = pair.ip("server", "-d", "link", "show", "dev", pair.iface["server"])
    if "prog/xdp " in link:
        return "native"
    if "prog/xdpgeneric " in link:
        return "generic"
    return None


def detach_leftover(pair, log):
    """Removes an XDP program a stopped server left on the server's end
    (Knot's stays after it exits), so the next server starts clean."""
    if xdp_attached(pair):
        log("  removing the XDP program left on %s" % pair.iface["server"])
        pair.ip("server", "link", "set", "dev", pair.iface["server"], "xdp", "off")


def check_attachment(srv, pair):
    """Raises ServerFailed unless an XDP server has its program on the
    interface in native mode and a socket server has none (a Pharos that
    could not attach serves from user space and says so only in its log)."""
    mode = xdp_attached(pair)
    if srv.xdp and mode != "native":
        raise harness.ServerFailed("%s: no native XDP program on %s (%s)"
                                   % (srv.name, pair.iface["server"], mode or "none attached"))
    if not srv.xdp and mode:
        raise harness.ServerFailed("%s: an XDP program (%s) is still on %s" % (srv.name, mode, pair.iface["server"]))


def has_xdp_flag(binary):
    p = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True)
    return "--xdp" in p.stdout + p.stderr


def kernel_counters(pair):
    """Pharos's fast-path counters on the server's end (GET /v1/fastpath):
    {'answered': n, 'passed_up': n, 'misses': {reason: n}}."""
    request = urllib.request.Request("http://127.0.0.1:%d/v1/fastpath" % API_PORT,
                                     headers={"Authorization": "Bearer %s" % TOKEN})
    with pair.inside("server"):
        with urllib.request.urlopen(request, timeout=5) as response:
            doc = json.load(response)
    for interface in doc["interfaces"]:
        if interface["name"] == pair.iface["server"]:
            traffic = interface["traffic"]
            return {"answered": traffic["answered_static"] + traffic["answered_routed"],
                    "passed_up": traffic["passed_up"], "misses": traffic["misses"]}
    raise harness.ServerFailed("/v1/fastpath has no interface %s: %s" % (pair.iface["server"], doc))


def kernel_share(before, after, sent):
    """Share of the queries sent that the kernel answered between two
    kernel_counters() (not of the answers received: one lost on the way
    back counts in the kernel but not at the client), and the pass-up
    reasons that grew, as {reason: count}."""
    grew = {k: v - before["misses"].get(k, 0) for k, v in after["misses"].items() if v > before["misses"].get(k, 0)}
    return (after["answered"] - before["answered"]) / sent if sent else None, grew


# --------------------------------------------------------------------------- checking answers

def verify_sample(pair, mix_info):
    """Asks the mix's sample over UDP from the client's namespace; returns
    the problems (rcode, answer count and type, AA, SOA on negatives)."""
    problems = []
    with pair.inside("client"):
        for name, qtype, check in mix_info["sample"]:
            try:
                r = ask(name, qtype)
            except (OSError, ValueError) as e:
                problems.append("%s %s: %s" % (name, qtype, e))
                continue
            why = dnsmsg.check_reply(r, check)
            if why:
                problems.append("%s %s: %s" % (name, qtype, why))
    return problems


def ask(name, qtype, tries=3):
    """One UDP query, asked again when no answer came (a datagram may be
    lost right after a saturating run); a wrong answer is returned."""
    for attempt in range(1, tries + 1):
        try:
            return dnsmsg.query_udp(netns.SERVER_ADDRESS, PORT, name, qtype, timeout=1.0)
        except TimeoutError:
            if attempt == tries:
                raise


def bulk_problems(run, mix_info, tolerance=0.01):
    """What is wrong with a measured run's answers as a whole: an unexpected
    share of NOERROR, other response codes, answers to other questions, TC."""
    rc = run["rcodes"]
    answered = run["completed"] or 0
    problems = []
    if not answered:
        return ["no answers"]
    share = rc.get("NOERROR", 0) / answered
    if abs(share - mix_info["noerror"]) > tolerance:
        problems.append("NOERROR %.2f %% of answers, expected %.2f %%" % (100 * share, 100 * mix_info["noerror"]))
    odd = {k: v for k, v in rc.items() if k not in ("NOERROR", "NXDOMAIN") and v}
    if odd:
        problems.append("unexpected response codes %s" % odd)
    raw = run["raw"]
    for key in ("unexpected", "truncated"):
        if raw.get(key):
            problems.append("%d %s answers" % (raw[key], key))
    return problems


# --------------------------------------------------------------------------- load and CPU

class Load:
    """dnsload from the client's namespace, on the client's CPU, one UDP
    socket per source address, open loop at a given rate."""

    def __init__(self, binary, pair, timeout_ms):
        self.binary, self.pair, self.timeout_ms = binary, pair, timeout_ms

    def run(self, queries, rate, duration):
        return harness.dnsload(self.binary, self.pair.cpu["client"], PORT, queries, duration, rate=rate,
                               sockets=len(SOURCES), timeout_ms=self.timeout_ms, host=netns.SERVER_ADDRESS,
                               sources=SOURCES, wrap=self.pair.argv("client", []))


class XdpLoad:
    """xdpgen from the client's namespace, on the client's CPU: the mix as
    XDP frames out of the client's end (BPF_PROG_TEST_RUN in live-frames
    mode; the server's end receives xdp_frames as from a NIC's driver, no
    socket's skb and no copy), from the same source addresses in turn,
    EDNS on every query, open loop at a rate. Its own XDP program on the
    client's end counts the responses (rcode, TC, answers to questions not
    asked) and drops them; it replaces the client end's pass program for
    the run, which is put back after. xdpgen spins its CPU (its program
    paces the queries by the kernel clock), so the client end's NAPI
    thread, on the same CPU, runs real-time for the run: it takes the
    responses as they come instead of waiting for the scheduler to share
    the CPU while the end's 256-frame ring overflows. Adds `refused`:
    frames the server end's ring had no room for."""

    # xdpgen's exit status when the kernel refuses its live-frames test
    # runs (EXIT_LIVE_FRAMES_REFUSED in bench/xdpgen/src/lib.rs).
    LIVE_FRAMES_REFUSED = 3

    def __init__(self, binary, pair, timeout_ms):
        self.binary, self.pair, self.timeout_ms = binary, pair, timeout_ms
        self.server_mac = pair.mac("server")

    def argv(self, queries, rate, duration):
        argv = [self.binary, "--iface", self.pair.iface["client"], "--server", netns.SERVER_ADDRESS,
                "--server-mac", self.server_mac, "--port", str(PORT), "--mix", queries, "--rate", str(int(rate)),
                "--duration", "%g" % duration, "--timeout-ms", str(self.timeout_ms)]
        for source in SOURCES:
            argv += ["--source", source]
        return self.pair.argv("client", argv)

    def refusal(self, queries):
        """Why this kernel will not let xdpgen send (xdpgen's own words),
        or None when it will: xdpgen --count 0 loads and attaches its
        program and runs it on one frame, which it drops. Call it while
        the client's end has no program of its own."""
        p = subprocess.run(self.argv(queries, 1, 1) + ["--count", "0"], capture_output=True, text=True, timeout=60)
        if p.returncode == self.LIVE_FRAMES_REFUSED:
            return p.stderr.strip().removeprefix("xdpgen: ")
        if p.returncode != 0:
            raise harness.LoadError("xdpgen --count 0 failed (rc=%d): %s" % (p.returncode, (p.stdout + p.stderr)[-2000:]))
        return None

    def run(self, queries, rate, duration):
        argv = ["taskset", "-c", str(self.pair.cpu["client"])] + self.argv(queries, rate, duration)
        had_program = self.pair.has_program("client")
        if had_program:
            self.pair.detach_program("client")
        napi = self.pair.napi_threads("client")
        try:
            for pid in napi:
                os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(50))
            res = harness.run_generator("xdpgen", argv, duration)
        finally:
            for pid in napi:
                os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
            if had_program:
                self.pair.attach_pass_program("client")
        res["refused"] = res["raw"].get("refused")
        return res


# The BPF helper Knot's XDP program (libknot's bpf-kernel.c, which knotd's
# XDP mode and kxdpgun load) calls first, and which some kernels' builds
# do not offer XDP programs, though upstream Linux has since 4.15.
XDP_ADJUST_META = 54  # BPF_FUNC_xdp_adjust_meta in <linux/bpf.h>


def knot_xdp_refusal():
    """Why Knot's XDP program cannot load on this kernel (then neither
    Knot's XDP mode nor kxdpgun runs), or None when it can."""
    refused = [line for line in verifier_log_of_helper_call(XDP_ADJUST_META).splitlines() if "cannot use helper" in line]
    if not refused:
        return None
    return ("this kernel (%s) does not let XDP programs call bpf_xdp_adjust_meta, which Knot's XDP program does "
            "(its verifier: %s), so Knot's XDP mode and kxdpgun cannot run here (bench/fastpath --servers "
            "pharos,pharos-xdp,knot --flood '' leaves them out)" % (platform.release(), refused[0]))


# The bpf system call's number, by machine.
SYS_BPF = {"x86_64": 321, "aarch64": 280}


def verifier_log_of_helper_call(helper):
    """The verifier's log of an XDP program that calls BPF helper number
    `helper` (r2 = -4) and passes: loaded with bpf(BPF_PROG_LOAD), closed
    again. Root needed."""
    if platform.machine() not in SYS_BPF:
        raise harness.SetupError("no bpf system call number known for %s" % platform.machine())
    # struct bpf_insn: code, dst and src registers, offset, immediate.
    insns = b"".join(struct.pack("<BBhi", *insn) for insn in (
        (0xb7, 0x02, 0, -4),      # r2 = -4
        (0x85, 0x00, 0, helper),  # call helper
        (0xb7, 0x00, 0, 2),       # r0 = XDP_PASS
        (0x95, 0x00, 0, 0)))      # exit
    code, gpl, log = (ctypes.create_string_buffer(insns), ctypes.create_string_buffer(b"GPL"),
                      ctypes.create_string_buffer(65536))
    # union bpf_attr for BPF_PROG_LOAD: prog_type (XDP), insn_cnt, insns,
    # license, log_level, log_size, log_buf; the rest zero.
    attr = ctypes.create_string_buffer(struct.pack("<IIQQIIQ", 6, len(insns) // 8, ctypes.addressof(code),
                                                   ctypes.addressof(gpl), 1, len(log), ctypes.addressof(log)), 128)
    fd = ctypes.CDLL(None, use_errno=True).syscall(SYS_BPF[platform.machine()], 5, attr, len(attr))  # BPF_PROG_LOAD
    if fd >= 0:
        os.close(fd)
    return log.value.decode(errors="replace")


class Flood:
    """kxdpgun (Knot's AF_XDP generator) from the client's end at the
    highest rate it reaches: for servers that answer everything in XDP,
    where an overload costs no receive livelock (an excess is dropped at a
    ring), to find their q/s beyond what dnsload can send. It attaches its
    own XDP program to the client's end (which also wakes that end for
    XDP_TX frames) and leaves it there: run() removes it. Every query
    carries EDNS, as dnsload's do. It sleeps about a second before sending
    and waits one after, so the cores' busy shares of its run mean little:
    compare CPU per query."""

    RATE = 10_000_000

    def __init__(self, pair):
        self.pair = pair

    def run(self, queries, duration):
        path = queries + ".kxdpgun"
        with open(queries) as src, open(path, "w") as dst:
            for line in src:
                dst.write("%s E\n" % line.strip())
        cpu = self.pair.cpu["client"]
        argv = ["taskset", "-c", str(cpu)] + self.pair.argv("client", [
            "kxdpgun", "-t", "%g" % duration, "-Q", str(self.RATE), "-F", str(cpu), "-I", self.pair.iface["client"],
            "-i", path, netns.SERVER_ADDRESS])
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 30)
        finally:
            self.pair.detach_program("client")
        if p.returncode != 0:
            raise harness.LoadError("kxdpgun failed (rc=%d): %s\n%s" % (p.returncode, " ".join(argv),
                                                                       (p.stdout + p.stderr)[-1500:]))
        return self.parse(p.stdout, duration)

    @staticmethod
    def parse(out, duration):
        sent = re.search(r"total queries:\s+(\d+)", out)
        replies = re.search(r"total replies:\s+(\d+)", out)
        if not sent or not replies:
            raise harness.LoadError("kxdpgun printed no totals:\n%s" % out[-1500:])
        rcodes = {name: int(n) for name, n in re.findall(r"responded (\w+):\s+(\d+)", out)}
        sent, replies = int(sent.group(1)), int(replies.group(1))
        # Answered (nearly) all it sent: the server kept up with kxdpgun.
        return {"sent": sent, "completed": replies, "qps": replies / duration, "run_s": duration,
                "rcodes": rcodes, "raw": {}, "generator_bound": replies >= 0.99 * sent}


def sustained(run, rate, duration, share=0.97):
    """The rate was sent for the duration, and answered, within `share`
    (counted, not divided by dnsload's elapsed time, which a late answer
    stretches)."""
    sent = run["sent"] or 0
    return sent >= share * rate * duration and (run["completed"] or 0) >= share * sent


def find_saturation(probe, start, first_step, tolerance=1.05, max_probes=12, floor=1000):
    """The highest rate `probe(rate)` sustains, within `tolerance`: steps
    up (or down) from `start` by `first_step`, squaring the step each time,
    until a rate holds and one above it fails, then bisects geometrically.
    Returns (rate, [(rate, held)]); rate None if nothing held."""
    tried = []
    low = high = None
    rate, step = float(start), first_step
    while len(tried) < max_probes and rate >= floor:
        held = probe(rate)
        tried.append((round(rate), held))
        if held:
            low = rate
        else:
            high = rate
        if low and high:
            if high / low <= tolerance:
                break
            rate = math.sqrt(low * high)
        else:
            rate = rate * step if held else rate / step
            step *= step
    return (round(low) if low else None), tried


class CoreMeter:
    """CPU of the server's core and the client's core over one run, from
    /proc/stat: everything that ran there (processes, NAPI threads,
    interrupts and softirqs, where XDP runs), and of it the server's process
    tree and the server end's NAPI thread: the rest is other processes
    (noise). The kernel here samples interrupt time by tick
    (no IRQ_TIME_ACCOUNTING), so only the core's total is free of overlap."""

    def __init__(self, pair, server_pid):
        self.pair, self.server_pid = pair, server_pid

    def _read(self):
        napi = self.pair.napi_threads("server")
        return {"server": procs.core_cpu(self.pair.cpu["server"]),
                "client": procs.core_cpu(self.pair.cpu["client"]),
                "ours": sum(procs.snapshot(self.server_pid).values()) + sum(procs.cpu_ticks(p) for p in napi)}

    def around(self, fn):
        before, t0 = self._read(), time.monotonic()
        res = fn()
        after, wall = self._read(), time.monotonic() - t0
        server = after["server"]["busy"] - before["server"]["busy"]
        ours = (after["ours"] - before["ours"]) / procs.CLK_TCK
        res["server_cpu_s"] = server
        res["server_core_pct"] = 100.0 * server / wall
        res["server_irq_pct"] = 100.0 * (after["server"]["irq"] - before["server"]["irq"]) / wall
        res["other_pct"] = 100.0 * max(0.0, server - ours) / wall
        res["client_core_pct"] = 100.0 * (after["client"]["busy"] - before["client"]["busy"]) / wall
        completed = res.get("completed") or 0
        res["cpu_us_per_query"] = 1e6 * server / completed if completed else None
        res["per_cpu_s"] = completed / server if server > 0 else None
        return res


def client_limited(run, rate, duration, dropped_toward_client):
    """Whether a failed probe failed on the client's side: dnsload could
    not send the rate, or most of what was lost was dropped on the way
    back because the client's end did not take it (its NAPI thread shares
    the client's core with dnsload; the veth's ring holds 256 frames)."""
    lost = max(0, (run["sent"] or 0) - (run["completed"] or 0))
    return (run["sent"] or 0) < 0.97 * rate * duration or dropped_toward_client * 2 > lost


def generator_bound(run):
    """The client's core was full while the server's was not: the rate is
    the generator's ceiling, not the server's."""
    return (run.get("client_core_pct") or 0) >= 95 and (run.get("server_core_pct") or 0) < 90


# --------------------------------------------------------------------------- plot

def plot(doc, path, log):
    """Figure 3: q/s at saturation and queries per CPU-second against the
    share of kernel-path hits, one curve per server; routed, static and
    kxdpgun points at 100 %."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = doc["summary"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    panels = (("qps", "queries/s at saturation (k)"), ("per_cpu_s", "queries per CPU-second of the server core (k)"))
    styles = {"pharos": ("tab:blue", "--"), "pharos-xdp": ("tab:blue", "-"),
              "knot": ("tab:orange", "--"), "knot-xdp": ("tab:orange", "-")}
    for ax, (key, title) in zip(axes, panels):
        for name in doc["args"]["server_names"]:
            xs, ys = [], []
            for percent in HIT_PERCENTS:
                cell = summary.get(name, {}).get(str(percent))
                if cell and cell.get(key):
                    xs.append(percent)
                    ys.append(cell[key] / 1000)
            if xs:
                color, line = styles.get(name, ("gray", "-"))
                ax.plot(xs, ys, line, marker="o", color=color, label=BY_NAME[name].label)
            flood = (doc.get("flood") or {}).get(name, {}).get("100")
            if flood and flood.get(key):
                ax.plot([100], [flood[key] / 1000], "*", color=styles.get(name, ("gray",))[0], markersize=12,
                        label="%s, kxdpgun at its highest rate" % BY_NAME[name].label)
            for mix, marker in (("routed", "^"), ("static", "s")):
                cell = summary.get(name, {}).get(mix)
                if cell and cell.get(key):
                    ax.plot([100], [cell[key] / 1000], marker, color=styles.get(name, ("gray",))[0],
                            fillstyle="full" if BY_NAME[name].xdp else "none", markersize=9,
                            label="%s, %s" % (BY_NAME[name].label, mix))
        ax.set_xlabel("queries answerable in the kernel path (%)")
        ax.set_title(title, fontsize=10)
        ax.set_xticks(list(HIT_PERCENTS))
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, loc="upper left")
    fig.suptitle("Kernel fast path (issue 14), Santa's Figure 3 on a veth pair: %s, %d round(s), medians"
                 % (doc["host"]["node"] or "?", doc["args"]["rounds"]), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    log("plot: %s" % path)
    return path
