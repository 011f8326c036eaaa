"""Running servers and measuring them, for bench/dynamic and bench/storm.

Same conventions as bench/peers: each server in its own session pinned with
taskset, readiness polled with a deadline, CPU of the whole process tree from
/proc, and a noise indicator (CPU used by everything else on the machine).
"""

import atexit
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from . import dnsmsg, loadgen, procs


class ServerFailed(Exception):
    pass


class LoadError(RuntimeError):
    pass


class SetupError(RuntimeError):
    """Something the benchmark needs is missing and could not be installed."""


def logger(tag):
    def log(msg):
        print("[%s %s] %s" % (tag, time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)
    return log


def parse_args(ap, argv, smoke):
    """Parses `argv` with `ap`, which gains --smoke: one short round, with
    the argument values `smoke` gives in place of the defaults (flags given
    still win), so that scripts/test.sh sees a benchmark that no longer runs
    (every server and load generator it names starts, the tables print, a
    failure exits non-zero). BENCH_SMOKE=1 in the environment does the same.
    Its figures mean nothing: its report goes to a temporary directory."""
    ap.add_argument("--smoke", action="store_true",
                    help="one short round to show the benchmark still runs (figures mean nothing); "
                         "also BENCH_SMOKE=1")
    args = ap.parse_args(argv)
    if not (args.smoke or os.environ.get("BENCH_SMOKE") == "1"):
        return args
    ap.set_defaults(smoke=True, **smoke)
    if hasattr(args, "out"):
        # A smoke round's report is thrown away, with its directory: CI
        # runs fifteen of them on a disk that may be nearly full.
        out = tempfile.mkdtemp(prefix="bench-smoke-")
        atexit.register(shutil.rmtree, out, ignore_errors=True)
        ap.set_defaults(out=out)
    return ap.parse_args(argv)


def port_free(port):
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


class Running:
    """One started server process, in its own session so its group can be stopped."""

    def __init__(self, srv, cpu, label):
        self.srv = srv
        argv = ["taskset", "-c", str(cpu)] + srv.prepare()
        self.log_path = os.path.join(srv.dir, "server.log")
        self.log = open(self.log_path, "a")
        self.log.write("\n===== %s: %s\n" % (label, " ".join(argv)))
        self.log.flush()
        self.proc = subprocess.Popen(argv, cwd=srv.dir, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.argv = argv

    @property
    def host(self):
        """The server's address: loopback unless it says otherwise."""
        return getattr(self.srv, "host", "127.0.0.1")

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def log_tail(self, n=15):
        try:
            with open(self.log_path) as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def wait_ready(self, deadline_s, extra_probe=None):
        """Poll an SOA query over UDP (and `extra_probe()`, which returns None
        when ready or a reason string) until both succeed, or fail."""
        end = time.monotonic() + deadline_s
        dns_ok, last = False, "no answer"
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise ServerFailed("%s exited with status %s during startup:\n%s"
                                   % (self.srv.name, self.proc.returncode, self.log_tail()))
            if not dns_ok:
                try:
                    r = dnsmsg.query_udp(self.host, self.srv.port, "bench.test", "SOA", timeout=0.2)
                    if r["rcode"] == "NOERROR" and "SOA" in r["answer"]:
                        dns_ok = True
                    else:
                        last = "SOA query: rcode %s answer %s" % (r["rcode"], r["answer"])
                except (OSError, ValueError) as e:
                    last = "udp: %s" % e
            if dns_ok:
                if extra_probe is None:
                    return
                why = extra_probe()
                if why is None:
                    return
                last = why
            time.sleep(0.05)  # poll interval
        raise ServerFailed("%s not ready after %gs (%s):\n%s"
                           % (self.srv.name, deadline_s, last, self.log_tail()))

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)   # stragglers in the group
        except (ProcessLookupError, PermissionError):
            pass
        self.log.close()


class QuietGate:
    """Wait (bounded) until other processes leave the machine alone.

    Before a measured run, samples /proc/stat over `window` seconds; the
    machine is quiet when everything busy adds up to less than `threshold`
    percent of one CPU (nothing of ours is under load at that moment). Waits
    at most `per_wait` seconds each time and `budget` seconds in all."""

    def __init__(self, threshold=15.0, per_wait=15.0, budget=150.0, window=0.5, log=None):
        self.threshold, self.per_wait, self.budget, self.window = threshold, per_wait, budget, window
        self.waited = 0.0
        self.log = log

    def busy_pct(self):
        a = procs.system_cpu()
        time.sleep(self.window)
        b = procs.system_cpu()
        return 100.0 * (b["busy"] - a["busy"]) / self.window

    def wait(self):
        t0 = time.monotonic()
        limit = min(self.per_wait, max(0.0, self.budget - self.waited))
        busy = self.busy_pct()
        while busy > self.threshold and time.monotonic() - t0 < limit:
            busy = self.busy_pct()
        spent = time.monotonic() - t0
        self.waited += spent
        if spent > 2 * self.window and self.log:
            self.log("  waited %.1fs for other processes (now %.0f%% of a CPU busy; %.0fs of %.0fs "
                     "budget used)" % (spent, busy, self.waited, self.budget))
        return busy


def _children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def dnsload(binary, cpu, port, queries, duration, rate=None, ecs=None, outstanding=None,
            sockets=None, timeout_ms=None, host="127.0.0.1", sources=(), wrap=(), dnssec=False):
    """Run bench/target/release/dnsload pinned to `cpu` (inside `wrap`, e.g. `ip
    netns exec NS`; DO=1 with `dnssec`); return the peers-style dict (sent,
    completed, lost, qps, mean_us, p50_us, p99_us, rcodes, loadgen_cpu_*)."""
    argv = ["taskset", "-c", str(cpu)] + list(wrap) + [binary, "--server", "%s:%d" % (host, port),
                                                        "--queries", queries, "--duration", "%g" % duration]
    for source in sources:
        argv += ["--source", source]
    if rate is not None:
        argv += ["--rate", str(int(rate))]
    if ecs:
        argv += ["--ecs-file", ecs]
    if outstanding:
        argv += ["--outstanding", str(outstanding)]
    if sockets:
        argv += ["--sockets", str(sockets)]
    if timeout_ms:
        argv += ["--timeout-ms", str(timeout_ms)]
    if dnssec:
        argv.append("--dnssec")
    argv.append("--json")
    return run_generator("dnsload", argv, duration)


def run_generator(name, argv, duration):
    """Runs a load generator that prints dnsload's JSON summary line
    (dnsload, xdpgen) and returns the same dict as dnsload()."""
    cpu0, t0 = _children_cpu(), time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60)
    wall, used = time.monotonic() - t0, _children_cpu() - cpu0
    if p.returncode != 0:
        raise LoadError("%s failed (rc=%d): %s\n%s" % (name, p.returncode, " ".join(argv),
                                                     (p.stdout + p.stderr)[-2000:]))
    doc = loadgen.last_json_object(p.stdout.strip())
    if not isinstance(doc, dict):
        raise LoadError("%s printed no JSON object: %r" % (name, p.stdout[-500:]))
    missing = [k for k in ("sent", "answered", "lost", "qps", "mean_us", "p50_us", "p99_us")
               if k not in doc]
    if missing:
        raise LoadError("%s JSON lacks %s: %r" % (name, missing, doc))
    rcodes = doc.get("rcodes") if isinstance(doc.get("rcodes"), dict) else {}
    return {
        "sent": doc["sent"], "completed": doc["answered"], "lost": doc["lost"],
        "qps": doc["qps"], "run_s": doc.get("elapsed_s") or duration,
        "mean_us": doc["mean_us"], "p50_us": doc["p50_us"], "p99_us": doc["p99_us"],
        "p999_us": doc.get("p999_us"), "max_us": doc.get("max_us"),
        "rcodes": {str(k).upper(): int(v) for k, v in rcodes.items() if int(v)},
        "loadgen_cpu_s": used, "loadgen_cpu_pct": 100.0 * used / wall if wall > 0 else None,
        "argv": argv, "raw": doc,
    }


def cpu_busy(cpu):
    """Busy seconds (user+nice+system+irq, no softirq) of one CPU, from /proc/stat."""
    tag = "cpu%d" % cpu
    with open("/proc/stat") as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] == tag:
                v = [int(x) for x in fields[1:8]]
                return (v[0] + v[1] + v[2] + v[5]) / procs.CLK_TCK
    return 0.0


def measured(run_fn, root_pid, other_known_cpu=None, server_cpu=None, **kw):
    """Run `run_fn(**kw)` and add the server tree's CPU and the noise indicators.

    other_known_cpu: a callable returning CPU seconds used meanwhile by known
    helpers (e.g. the update driver), so they are not counted as noise.
    server_cpu: the CPU the server is pinned to; adds `other_server_cpu_pct`,
    what else ran on that CPU (the server's CPU minus the server)."""
    sys0 = procs.system_cpu()
    c0 = cpu_busy(server_cpu) if server_cpu is not None else None
    before = procs.snapshot(root_pid)
    t0 = time.monotonic()
    res = run_fn(**kw)
    wall = time.monotonic() - t0
    after = procs.snapshot(root_pid)
    sys1 = procs.system_cpu()
    c1 = cpu_busy(server_cpu) if server_cpu is not None else None
    cpu_s = procs.cpu_seconds_between(before, after)
    if c0 is not None:
        res["other_server_cpu_pct"] = 100.0 * max(0.0, c1 - c0 - cpu_s) / wall
    known = (res.get("loadgen_cpu_s") or 0.0) + (other_known_cpu() if other_known_cpu else 0.0)
    other = sys1["busy"] - sys0["busy"] - cpu_s - known
    res["wall_s"] = wall
    res["other_cpu_pct"] = 100.0 * max(0.0, other) / wall
    res["steal_pct"] = 100.0 * (sys1["steal"] - sys0["steal"]) / wall
    res["softirq_pct"] = 100.0 * (sys1["softirq"] - sys0["softirq"]) / wall
    res["server_cpu_s"] = cpu_s
    res["server_cpu_us_per_query"] = (1e6 * cpu_s / res["completed"]) if res.get("completed") else None
    res["server_cpu_pct"] = 100.0 * cpu_s / (res.get("run_s") or wall)
    return res


def noisy(x, threshold):
    """A run is noisy when other processes used more than `threshold` % of a
    CPU, or -- at saturation -- when neither the server (< 90 %) nor dnsload
    (< 95 %) was saturated: something outside the guest held both back (on a
    shared host whose steal time the guest does not see); or -- at a fixed
    rate -- when dnsload did not get the asked rate answered (it fell behind).

    At a fixed rate only the server's CPU counts (when measured): dnsload,
    lightly loaded there, leaves kernel time on its own CPU that no process
    is charged for (about 40% of a CPU when it paces 1,000 q/s), which is
    not other processes' doing."""
    if x.get("mode") == "rate" and x.get("rate"):
        other = x.get("other_server_cpu_pct", x["other_cpu_pct"])
        return other > threshold or (x["qps"] or 0) < 0.97 * x["rate"]
    if x["other_cpu_pct"] > threshold:
        return True
    return x.get("mode") == "saturation" and (x["server_cpu_pct"] or 0) < 90 \
        and (x["loadgen_cpu_pct"] or 0) < 95


PERF_HZ = 4000


def perf_profile(pid, load, log, label, top=20):
    """Samples process `pid` with perf (cpu-clock, PERF_HZ) while `load()` runs;
    `load` returns how many queries were answered. Logs ns per answered query:
    in all, per thread, kernel and user space, and the busiest user-space
    symbols. Returns the samples as (thread, dso, symbol, count) rows and the
    count of answered queries, for comparisons (see ns_per_query_growth)."""
    import shutil
    import tempfile
    if not shutil.which("perf"):
        raise RuntimeError("perf missing (apt-get install linux-perf)")
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "perf.data")
        rec = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(PERF_HZ), "-p", str(pid),
                                "-o", data], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            answered = max(load(), 1)
        finally:
            rec.send_signal(signal.SIGINT)
            rec.wait(timeout=60)
        report = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "comm,dso,sym",
                                 "-F", "sample,comm,dso,sym", "--field-separator", "\t"],
                                capture_output=True, text=True, timeout=300)
    rows = []
    for line in report.stdout.splitlines():
        fields = [f.strip() for f in line.split("\t")]
        if len(fields) == 4 and fields[0].isdigit():
            rows.append((fields[1], fields[2], fields[3], int(fields[0])))
    rows.sort(key=lambda row: -row[3])

    def ns(samples):
        return samples * 1e9 / PERF_HZ / answered

    def total(keep):
        return sum(row[3] for row in rows if keep(row))

    in_kernel = lambda row: row[1].startswith("[kernel")  # noqa: E731
    threads = sorted({row[0] for row in rows}, key=lambda t: -total(lambda row: row[0] == t))
    log("%s: %d answered; %.0f ns/query sampled: kernel %.0f, user space %.0f" % (
        label, answered, ns(total(lambda row: True)), ns(total(in_kernel)), ns(total(lambda row: not in_kernel(row)))))
    for thread in threads:
        log("  thread %-16s %6.0f ns/q (kernel %.0f)" % (thread, ns(total(lambda row: row[0] == thread)),
                                                         ns(total(lambda row: row[0] == thread and in_kernel(row)))))
    for row in [row for row in rows if not in_kernel(row)][:top]:
        log("  %6.0f ns/q  %-12s %-14s %s" % (ns(row[3]), row[0][:12], row[1][:14], row[2][:100]))
    return rows, answered


def ns_per_query_growth(base, other, thread, log, label, top=15):
    """Logs the symbols of `thread` (kernel ones included) whose ns per answered
    query grew most from profile `base` to profile `other` (perf_profile's
    results): where a thread's own cost per query went."""
    def per_query(profile):
        rows, answered = profile
        costs = {}
        for row_thread, dso, symbol, count in rows:
            if row_thread == thread:
                costs[(dso, symbol)] = costs.get((dso, symbol), 0) + count * 1e9 / PERF_HZ / answered
        return costs
    before, after = per_query(base), per_query(other)
    growth = sorted(((after.get(key, 0) - before.get(key, 0), key) for key in set(before) | set(after)), reverse=True)
    log("%s: thread %s, %.0f -> %.0f ns/q; grew most:" % (label, thread, sum(before.values()), sum(after.values())))
    for grew, (dso, symbol) in growth[:top]:
        log("  %+6.0f ns/q  %-14s %s" % (grew, dso[:14], symbol[:100]))


VENV = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "out", "venv")


def ensure_matplotlib(script, argv, log):
    """Re-runs `script` with `argv` under bench/out/venv (made, with
    matplotlib from PyPI, if missing) when this Python has no matplotlib."""
    try:
        import matplotlib  # noqa: F401
        return
    except ImportError:
        pass
    py = os.path.join(VENV, "bin", "python")
    if os.path.abspath(sys.executable) == os.path.abspath(py):
        raise SetupError("matplotlib missing even in %s" % VENV)
    if not os.access(py, os.X_OK):
        log("making %s for matplotlib" % VENV)
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    if subprocess.run([py, "-c", "import matplotlib"], capture_output=True).returncode != 0:
        log("pip install matplotlib into %s" % VENV)
        subprocess.run([py, "-m", "pip", "install", "-q", "matplotlib"], check=True)
    os.execv(py, [py, script] + argv)


def apt_install(packages, allow, log):
    """Installs Debian packages (root, unless `allow` is false: then fails
    naming them), trying `apt-get update` once if the first try fails."""
    packages = sorted(set(packages))
    if not packages:
        return
    if not allow or os.geteuid() != 0:
        raise SetupError("missing; install with: apt-get install -y %s" % " ".join(packages))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "--no-install-recommends"] + packages
    log("running %s" % " ".join(cmd))
    if subprocess.run(cmd, env=env).returncode != 0:
        log("apt-get install failed; trying apt-get update first")
        subprocess.run(["apt-get", "update"], env=env)
        if subprocess.run(cmd, env=env).returncode != 0:
            raise SetupError("apt-get install -y %s failed" % " ".join(packages))


def binary_identity(path):
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    st = os.stat(path)
    return {"sha256": h.hexdigest(), "bytes": st.st_size,
            "built": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(st.st_mtime))}


def fmt(v, pattern):
    return pattern % v if v is not None else "–"
