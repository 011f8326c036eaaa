"""bench/oscillation's parts: the Pharos config, the browser-cluster clients,
the recorder, the numbers and the plots.

The experiment is MyXDNS section 7 (WWW 2007), time-scaled: two replicas,
one region whose clients rank replica 1 first, 20 browser clusters behind a
resolver cache that re-resolve once per TTL and send 1-3 requests a second
to the replica they were answered, and a control loop that recomputes the
region's probabilities from the replicas' loads.
"""

import asyncio
import http.client
import json
import random
import socket
import statistics
import struct
import time

from .dnsmsg import _skip_name, build_query

ZONE = "bench.test"
SERVICE = "www.bench.test"
REPLICAS = [("r1", "127.0.0.11"), ("r2", "127.0.0.12")]


# --------------------------------------------------------------------------- config

def pharos_config(port, api_port, token, store, zonefile, cfg, a):
    """TOML for one configuration `cfg` ({"algorithm", "smoothing", "max_step"})."""
    lc = ['algorithm = "%s"' % cfg["algorithm"],
          "threshold = %g" % a.threshold,
          "high_watermark = %g" % a.high, "low_watermark = %g" % a.low,
          "interval_ms = %d" % a.interval_ms, "ttl = %d" % a.ttl,
          "smoothing = %g" % cfg["smoothing"], "max_step = %g" % cfg["max_step"],
          "ranks = { default = { r1 = 1, r2 = 2 } }"]
    lines = [
        "[server]", 'listen = ["127.0.0.1:%d"]' % port, "threads = 1", "random_seed = %d" % a.seed,
        "[control]", 'listen = "127.0.0.1:%d"' % api_port, 'token = "%s"' % token,
        "[store]", 'path = "%s"' % store,
        "[load]",
        # the replica's own number is used as it is: no second smoothing in Pharos
        "smoothing = 1.0", "max_age_seconds = 10",
        "[[zone]]", 'origin = "%s"' % ZONE, 'file = "%s"' % zonefile,
        "[[service]]", 'name = "%s"' % SERVICE, 'policy = "region-probabilities"',
        "ttl = %d" % a.ttl,
        'load_probe = { kind = "http", port = %d, path = "/load", interval_ms = %d, timeout_ms = %d }'
        % (a.replica_port, a.probe_ms, max(50, a.probe_ms - 100)),
        "load_control = { %s }" % ", ".join(lc),
    ]
    for rid, addr in REPLICAS:
        lines += ["[[service.replica]]", 'id = "%s"' % rid, 'address = "%s"' % addr]
    lines += ["[service.probabilities.default]"]
    for rid, _ in REPLICAS:
        lines.append("%s = { probability = 0.5, ttl = %d }" % (rid, a.ttl))
    return "\n".join(lines) + "\n"


def zone_text():
    return "\n".join(["$ORIGIN %s." % ZONE, "$TTL 3600",
                      "@ IN SOA ns1.%s. hostmaster.%s. 1 3600 900 604800 300" % (ZONE, ZONE),
                      "@ IN NS ns1.%s." % ZONE, "ns1 IN A 127.0.0.53"]) + "\n"


# --------------------------------------------------------------------------- DNS

def resolve_a(server, port, name, timeout=1.0):
    """One UDP query for `name` A; returns [(address, ttl)] in answer order."""
    qid, q = build_query(name, "A")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(q, (server, port))
        while True:
            msg, _ = s.recvfrom(4096)
            if len(msg) >= 12 and struct.unpack("!H", msg[:2])[0] == qid:
                break
    _, flags, qd, an, _, _ = struct.unpack("!HHHHHH", msg[:12])
    if flags & 0xF:
        raise ValueError("rcode %d" % (flags & 0xF))
    off = 12
    for _ in range(qd):
        off = _skip_name(msg, off) + 4
    out = []
    for _ in range(an):
        off = _skip_name(msg, off)
        rtype, _, ttl, rdlen = struct.unpack("!HHIH", msg[off:off + 10])
        off += 10
        if rtype == 1 and rdlen == 4:
            out.append((socket.inet_ntoa(msg[off:off + 4]), ttl))
        off += rdlen
    return out


# --------------------------------------------------------------------------- HTTP

async def http_get(host, port, path, timeout):
    """(status, body) of a GET over a fresh connection (HTTP/1.0, server closes)."""
    async def go():
        r, w = await asyncio.open_connection(host, port)
        try:
            w.write(("GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" % (path, host)).encode())
            await w.drain()
            data = await r.read()
        finally:
            w.close()
        head, _, body = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
        return status, body
    return await asyncio.wait_for(go(), timeout)


def api_get(api_port, path, token, timeout=2.0):
    c = http.client.HTTPConnection("127.0.0.1", api_port, timeout=timeout)
    try:
        c.request("GET", path, headers={"Authorization": "Bearer " + token})
        r = c.getresponse()
        body = r.read()
        return r.status, json.loads(body) if body else None
    finally:
        c.close()


# --------------------------------------------------------------------------- the run

class Run:
    """20 browser clusters and the recorder, for warmup + duration seconds."""

    def __init__(self, a, dns_port, api_port, token, seed):
        self.a, self.dns_port, self.api_port, self.token = a, dns_port, api_port, token
        self.rng = random.Random(seed)
        self.by_addr = {addr: rid for rid, addr in REPLICAS}
        self.requests = []      # (t, replica, latency s or None, ok)
        self.resolutions = []   # (t, first replica, ttl)
        self.dns_errors = 0
        self.samples = []       # recorder, once a second: replicas' /stats
        self.rounds = []        # distinct control-loop rounds seen at GET /v1/load
        self.api_errors = 0
        self.cache = {}

    async def resolver(self, i, start, end):
        await asyncio.sleep(max(0.0, start - time.monotonic()))
        while time.monotonic() < end:
            try:
                ans = await asyncio.to_thread(resolve_a, "127.0.0.1", self.dns_port, SERVICE)
            except (OSError, ValueError):
                self.dns_errors += 1
                await asyncio.sleep(0.2)
                continue
            if not ans:
                self.dns_errors += 1
                await asyncio.sleep(0.2)
                continue
            addr, ttl = ans[0]
            self.cache[i] = addr
            self.resolutions.append((time.monotonic() - self.t0, self.by_addr.get(addr, addr), ttl))
            await asyncio.sleep(max(0.5, ttl))

    async def one_request(self, i):
        addr = self.cache.get(i)
        if addr is None:
            return
        t = time.monotonic()
        try:
            status, _ = await http_get(addr, self.a.replica_port, "/work", 15.0)
            ok = status == 200
        except (OSError, asyncio.TimeoutError, ValueError, IndexError):
            ok = False
        self.requests.append((t - self.t0, self.by_addr.get(addr, addr), time.monotonic() - t, ok))

    async def browsers(self, i, start, end, rng):
        """Each second (from the cluster's start): 1-3 requests at random moments."""
        slot = start
        tasks = set()
        while slot < end:
            k = rng.randint(self.a.min_rps, self.a.max_rps)
            for off in sorted(rng.uniform(0, 1) for _ in range(k)):
                at = slot + off
                if at >= end:
                    break
                await asyncio.sleep(max(0.0, at - time.monotonic()))
                task = asyncio.ensure_future(self.one_request(i))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            slot += 1.0
        if tasks:
            await asyncio.wait(tasks, timeout=20)

    async def recorder(self, end):
        tick = self.t0
        last_round = None
        count = 0
        while time.monotonic() < end:
            tick += 0.25
            count += 1
            await asyncio.sleep(max(0.0, tick - time.monotonic()))
            now = time.monotonic() - self.t0
            try:
                st, doc = await asyncio.to_thread(api_get, self.api_port, "/v1/load", self.token)
                runs = [r for r in (doc or {}).get("runs", []) if r.get("service") == SERVICE]
                if st == 200 and runs:
                    r = runs[0]
                    key = json.dumps([r["at"], r["previous"], r["targets"], r["installed"], r["loads"]],
                                     sort_keys=True)
                    if key != last_round:
                        last_round = key
                        self.rounds.append({"t": now, "at": r["at"], "loads": r["loads"],
                                            "target": r["targets"].get("default", {}),
                                            "installed": r["installed"].get("default", {}),
                                            "previous": r["previous"].get("default", {})})
            except (OSError, ValueError, http.client.HTTPException):
                self.api_errors += 1
            if count % 4 == 0:
                rec = {"t": now}
                for rid, addr in REPLICAS:
                    try:
                        status, body = await http_get(addr, self.a.replica_port, "/stats", 2.0)
                        rec[rid] = json.loads(body) if status == 200 else None
                    except (OSError, asyncio.TimeoutError, ValueError):
                        rec[rid] = None
                self.samples.append(rec)

    async def main(self, total):
        self.t0 = time.monotonic()
        end = self.t0 + total
        jobs = [self.recorder(end)]
        for i in range(self.a.clusters):
            start = self.t0 + self.rng.uniform(0, self.a.ttl)     # staggered, as in MyXDNS
            jobs.append(self.resolver(i, start, end))
            jobs.append(self.browsers(i, start + 0.05, end, random.Random(self.rng.random())))
        await asyncio.gather(*jobs)

    def go(self, total):
        asyncio.run(self.main(total))
        return {"requests": self.requests, "resolutions": self.resolutions,
                "dns_errors": self.dns_errors, "samples": self.samples, "rounds": self.rounds,
                "api_errors": self.api_errors}


# --------------------------------------------------------------------------- numbers

def share_series(requests, t_from, t_to, width=1.0):
    """[(bin start, requests to r1, requests to r2)] in `width`-second bins."""
    n = int((t_to - t_from) // width)
    bins = [[t_from + k * width, 0, 0] for k in range(n)]
    for t, rid, _, _ in requests:
        k = int((t - t_from) // width)
        if 0 <= k < n:
            bins[k][1 if rid == "r1" else 2] += 1
    return bins


def shares(bins):
    return [b[1] / (b[1] + b[2]) for b in bins if b[1] + b[2] > 0]


def steady_floor(a, p, duration, width, reps=20, seed=7):
    """The std of replica 1's share, in `width`-second bins, that the same
    clients would show under a policy that never moves (probability p):
    the noise of 20 clusters' coin flips and request counts alone."""
    rng = random.Random(seed)
    out = []
    for _ in range(reps):
        n = int(duration // width)
        c1, c2 = [0] * n, [0] * n
        for _ in range(a.clusters):
            t = rng.uniform(0, a.ttl) - a.ttl      # already running when measuring starts
            choice, expiry = None, t
            slot = t
            while slot < duration:
                k = rng.randint(a.min_rps, a.max_rps)
                for off in sorted(rng.uniform(0, 1) for _ in range(k)):
                    at = slot + off
                    while at >= expiry:
                        choice = rng.random() < p
                        expiry += a.ttl
                    j = int(at // width)
                    if 0 <= j < n:
                        if choice:
                            c1[j] += 1
                        else:
                            c2[j] += 1
                slot += 1.0
        s = [x / (x + y) for x, y in zip(c1, c2) if x + y]
        out.append(statistics.pstdev(s))
    return statistics.median(out)


def pct(values, q):
    v = sorted(values)
    if not v:
        return None
    return v[min(len(v) - 1, int(q * len(v)))]


def summarize(res, a, algorithm):
    """The numbers of one configuration's run, after the warm-up."""
    w, end = a.warmup, a.warmup + a.duration
    reqs = [r for r in res["requests"] if w <= r[0] < end]
    b1 = share_series(res["requests"], w, end, 1.0)
    b5 = share_series(res["requests"], w, end, 5.0)
    s1, s5 = shares(b1), shares(b5)
    rounds = [r for r in res["rounds"] if w <= r["t"] < end]
    p1 = [r["installed"].get("r1") for r in rounds if r["installed"].get("r1") is not None]
    loads = {rid: [r["loads"].get(rid) for r in rounds if r["loads"].get(rid) is not None]
             for rid, _ in REPLICAS}
    lat = {rid: [x[2] for x in reqs if x[1] == rid and x[3]] for rid, _ in REPLICAS}
    mean_share = statistics.mean(s1) if s1 else None
    out = {
        "requests": len(reqs), "failed": sum(1 for x in reqs if not x[3]),
        "req_per_s": len(reqs) / a.duration,
        "share_r1_mean": mean_share,
        "share_r1_std_1s": statistics.pstdev(s1) if s1 else None,
        "share_r1_std_5s": statistics.pstdev(s5) if s5 else None,
        "share_r1_min_5s": min(s5) if s5 else None, "share_r1_max_5s": max(s5) if s5 else None,
        "rounds": len(rounds),
        "p1_mean": statistics.mean(p1) if p1 else None,
        "p1_std": statistics.pstdev(p1) if p1 else None,
        "p1_min": min(p1) if p1 else None, "p1_max": max(p1) if p1 else None,
        "p1_moves_over_0.2": sum(1 for x, y in zip(p1, p1[1:]) if abs(y - x) > 0.2),
        "dns_errors": res["dns_errors"], "api_errors": res["api_errors"],
        "resolutions": sum(1 for r in res["resolutions"] if w <= r[0] < end),
    }
    for rid, _ in REPLICAS:
        v = loads[rid]
        out["load_%s_mean" % rid] = statistics.mean(v) if v else None
        out["load_%s_std" % rid] = statistics.pstdev(v) if v else None
        # overloaded: above the threshold (I) or the high watermark (II)
        limit = a.threshold if algorithm == "I" else a.high
        out["load_%s_over" % rid] = (sum(1 for x in v if x > limit) / len(v)) if v else None
        out["lat_%s_mean_ms" % rid] = 1000 * statistics.mean(lat[rid]) if lat[rid] else None
        out["lat_%s_p95_ms" % rid] = 1000 * pct(lat[rid], 0.95) if lat[rid] else None
        out["req_%s_per_s" % rid] = sum(1 for x in reqs if x[1] == rid) / a.duration
    if mean_share is not None:
        out["floor_std_1s"] = steady_floor(a, mean_share, a.duration, 1.0)
        f = out["floor_std_1s"]
        # what the policy's own movement adds to the noise (independent parts add in squares)
        out["excess_std_1s"] = max(0.0, out["share_r1_std_1s"] ** 2 - f ** 2) ** 0.5
    return out


# --------------------------------------------------------------------------- plots

def save_small(fig, path):
    """PNG with a 32-colour palette (a third of the bytes of a full-colour
    one for line plots); full colour if Pillow is missing."""
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=88)
    try:
        from PIL import Image
    except ImportError:
        with open(path, "wb") as f:
            f.write(buf.getvalue())
        return
    buf.seek(0)
    Image.open(buf).convert("RGB").quantize(colors=32).save(path, optimize=True)


def plot(doc, path_for, log=print):
    """One PNG per configuration: load per replica (top), replica 1's share
    of requests and its installed probability (bottom)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a = doc["args"]
    paths = []
    for cfg in doc["configs"]:
        res = cfg["result"]
        fig, (top, bot) = plt.subplots(2, 1, figsize=(10, 4.8), dpi=72, sharex=True)
        rounds = res["rounds"]
        for rid, color in (("r1", "tab:blue"), ("r2", "tab:red")):
            xs = [r["t"] for r in rounds if r["loads"].get(rid) is not None]
            ys = [r["loads"][rid] for r in rounds if r["loads"].get(rid) is not None]
            top.plot(xs, ys, color=color, lw=1.1,
                     label="replica %s (rank %s)" % (rid[1], rid[1]))
        if cfg["algorithm"] == "I":
            top.axhline(a["threshold"], color="k", ls=":", lw=0.8, label="threshold")
        else:
            top.axhline(a["high"], color="k", ls=":", lw=0.8, label="HW / LW")
            top.axhline(a["low"], color="k", ls=":", lw=0.8)
        top.set_ylabel("load (as probed)")
        top.set_ylim(0, max(1.2, max([r["loads"].get("r1") or 0 for r in rounds] + [0]) * 1.05))
        top.legend(loc="upper right", fontsize=7, ncol=3)
        top.set_title(cfg["title"], fontsize=10)
        t_end = a["warmup"] + a["duration"]
        b1 = share_series(res["requests"], 0, t_end, 1.0)
        bot.plot([b[0] + 0.5 for b in b1 if b[1] + b[2]], shares(b1), color="tab:blue", lw=0.9,
                 label="share of requests to replica 1 (per s)")
        xs = [r["t"] for r in rounds if r["installed"].get("r1") is not None]
        ys = [r["installed"]["r1"] for r in rounds if r["installed"].get("r1") is not None]
        bot.step(xs, ys, where="post", color="tab:orange", lw=1.0, label="probability installed")
        bot.axvspan(0, a["warmup"], color="0.92", lw=0)
        top.axvspan(0, a["warmup"], color="0.92", lw=0)
        bot.set_ylim(-0.02, 1.02)
        bot.set_ylabel("replica 1")
        bot.set_xlabel("seconds (grey: warm-up, left out of the numbers)")
        bot.set_xlim(0, t_end)
        bot.legend(loc="lower right", fontsize=7, ncol=2)
        s = cfg["summary"]
        bot.set_title("after warm-up: std of share %.3f (steady-policy floor %.3f), mean share %.2f, "
                      "p installed %.2f ± %.2f"
                      % (s["share_r1_std_1s"] or 0, s.get("floor_std_1s") or 0, s["share_r1_mean"] or 0,
                         s["p1_mean"] or 0, s["p1_std"] or 0), fontsize=8)
        fig.tight_layout()
        path = path_for(cfg["name"])
        save_small(fig, path)
        plt.close(fig)
        paths.append(path)
        log("wrote %s" % path)
    return paths
