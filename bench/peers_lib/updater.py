#!/usr/bin/env python3
"""Update driver for bench/storm: PUT a service's whole probability table at a
paced rate over keep-alive HTTP/1.1 connections (http.client, a few threads).

    python3 bench/peers_lib/updater.py --api 127.0.0.1:5580 --token bench \
        --service svc.bench.test --rate 1000 --threads 4 --duration 5 --seed 1

Upload k carries routed.storm_table(k, Random(table_seed(seed, k))), so the
harness can rebuild any upload's table from (seed, k). The bodies are built
before the run starts. Prints "ready" once the connections are open, then at
the end one JSON line: counts, achieved rate, latency percentiles, schedule
lag, the driver's own CPU time, and per-upload (k, send, ack) of the last
uploads so the harness can tell which table must be live.
"""

import argparse
import http.client
import json
import os
import random
import resource
import sys
import threading
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.dont_write_bytecode = True
    from peers_lib import routed  # noqa: E402
else:
    from . import routed


def table_seed(seed, k):
    return seed * 1000003 + k


def body_for(seed, k):
    return routed.storm_table(k, random.Random(table_seed(seed, k)))


def pct(sorted_vals, q):
    if not sorted_vals:
        return None
    i = min(len(sorted_vals) - 1, max(0, int(round(q * (len(sorted_vals) - 1)))))
    return sorted_vals[i]


def cpu_self():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main(argv):
    ap = argparse.ArgumentParser(prog="updater.py")
    ap.add_argument("--api", required=True, help="host:port of the control API")
    ap.add_argument("--token", required=True)
    ap.add_argument("--service", required=True)
    ap.add_argument("--rate", type=float, default=1000.0, help="PUTs per second (paced)")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--first-k", type=int, default=1, help="number of the first upload")
    ap.add_argument("--timeout", type=float, default=10.0, help="per request, seconds")
    ap.add_argument("--expect-status", type=int, default=200,
                    help="HTTP status that counts as success (404 for the HTTP-only control, "
                         "which PUTs to a service that does not exist)")
    a = ap.parse_args(argv)

    host, port = a.api.rsplit(":", 1)
    path = "/v1/services/%s/probabilities" % a.service
    headers = {"Authorization": "Bearer %s" % a.token, "Content-Type": "application/json",
               "Connection": "keep-alive"}
    n_max = int(a.rate * a.duration) + 1
    bodies = [json.dumps(body_for(a.seed, a.first_k + i), separators=(",", ":")).encode()
              for i in range(n_max)]

    conns = []
    for _ in range(a.threads):
        c = http.client.HTTPConnection(host, int(port), timeout=a.timeout)
        c.connect()
        conns.append(c)
    lock = threading.Lock()
    state = {"next": 0}
    recs = []            # (k, t_sched, t_send, t_ack, status)
    errors = []          # HTTP status other than 200
    failures = []        # no reply (connection error, timeout)
    print("ready", flush=True)

    cpu0 = cpu_self()
    t0 = time.monotonic() + 0.005
    end = t0 + a.duration

    def worker(idx):
        conn = conns[idx]
        local = []
        while True:
            with lock:
                i = state["next"]
                state["next"] += 1
            t_sched = t0 + i / a.rate
            if i >= n_max or t_sched >= end:
                break
            delay = t_sched - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            t_send = time.monotonic()
            try:
                conn.request("PUT", path, body=bodies[i], headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                t_ack = time.monotonic()
                local.append((a.first_k + i, t_sched, t_send, t_ack, resp.status))
                if resp.status != a.expect_status:
                    errors.append("k=%d: HTTP %d %s" % (a.first_k + i, resp.status, data[:200]))
            except (OSError, http.client.HTTPException) as e:
                failures.append("k=%d: %s: %s" % (a.first_k + i, type(e).__name__, e))
                conn.close()
                conn = http.client.HTTPConnection(host, int(port), timeout=a.timeout)
        with lock:
            recs.extend(local)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(a.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    t_end = time.monotonic()
    cpu = cpu_self() - cpu0
    for c in conns:
        c.close()

    ok = sorted((r for r in recs if r[4] == a.expect_status), key=lambda r: r[3])
    lat = sorted(1e3 * (r[3] - r[2]) for r in ok)
    lag = sorted(1e3 * (r[2] - r[1]) for r in recs)
    span = (ok[-1][3] - t0) if ok else None
    statuses = {}
    for r in recs:
        statuses[str(r[4])] = statuses.get(str(r[4]), 0) + 1
    last = ok[-1] if ok else None
    # uploads whose request overlapped the last acknowledged one: any of them
    # may have been committed last
    overlapping = sorted(r[0] for r in ok if last and r[3] >= last[2]) if last else []
    out = {
        "planned": min(n_max, int(a.rate * a.duration)), "attempted": len(recs) + len(failures),
        "ok": len(ok), "errors": len(errors) + len(failures),
        "error_samples": (errors + failures)[:5], "statuses": statuses,
        "rate_asked": a.rate, "duration_s": a.duration, "threads": a.threads,
        "elapsed_s": t_end - t0,
        "achieved_per_s": len(ok) / span if span else 0.0,
        "ok_per_s_of_duration": len(ok) / a.duration,
        "latency_ms": {"p50": pct(lat, 0.5), "p90": pct(lat, 0.9), "p99": pct(lat, 0.99),
                       "max": lat[-1] if lat else None,
                       "mean": sum(lat) / len(lat) if lat else None},
        "lag_ms": {"p50": pct(lag, 0.5), "p99": pct(lag, 0.99), "max": lag[-1] if lag else None},
        "cpu_s": cpu, "cpu_pct": 100.0 * cpu / (t_end - t0) if t_end > t0 else None,
        "body_bytes": len(bodies[0]) if bodies else 0,
        "last_k": last[0] if last else None, "last_candidates": overlapping,
        "seed": a.seed,
    }
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
