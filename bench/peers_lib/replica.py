#!/usr/bin/env python3
"""A replica for bench/oscillation: an HTTP server whose requests cost real CPU.

    python3 replica.py --listen 127.0.0.11:18300 --cost-ms 10 --budget 0.5 --window 2

GET /work   burns --cost-ms of this thread's CPU time (floating-point
            multiplications until time.thread_time() has advanced that much,
            like MyXDNS's dummy servlet), then answers "ok".
GET /load   the replica's load as a bare number, for Pharos's load_probe:
            the process's CPU time (user + system, every thread, HTTP
            handling included) over the last --window seconds, divided by
            the window and by --budget (the share of one CPU the replica is
            sized for). 1.0 = the budget fully used. With --tau > 0 the
            number is instead an exponentially decayed average with that
            time constant (uptime's load average, time-scaled).
GET /stats  JSON: cumulative CPU seconds and requests, the load, the CPU
            used in the last second, for the benchmark's recorder.

Runs until killed (the benchmark stops it). Stdlib only.
"""

import argparse
import collections
import json
import math
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def process_cpu():
    t = os.times()
    return t.user + t.system


class Meter:
    """Samples the process's CPU time every `step` seconds."""

    def __init__(self, window, budget, tau, step=0.1):
        self.window, self.budget, self.tau, self.step = window, budget, tau, step
        self.samples = collections.deque()      # (monotonic, cpu seconds)
        self.lock = threading.Lock()
        self.requests = 0
        self.decayed = 0.0
        self.last_decay = None
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            now, cpu = time.monotonic(), process_cpu()
            with self.lock:
                self.samples.append((now, cpu))
                while self.samples and self.samples[0][0] < now - max(self.window, 1.0) - 1.0:
                    self.samples.popleft()
                if self.tau > 0:
                    if self.last_decay is not None:
                        t0, c0 = self.last_decay
                        dt = now - t0
                        if dt > 0:
                            u = (cpu - c0) / dt / self.budget
                            a = math.exp(-dt / self.tau)
                            self.decayed = a * self.decayed + (1 - a) * u
                    self.last_decay = (now, cpu)
            time.sleep(self.step)

    def _rate(self, span):
        """CPU seconds per second over the last `span` seconds (of samples)."""
        with self.lock:
            if len(self.samples) < 2:
                return 0.0
            now, cpu = self.samples[-1]
            old = self.samples[0]
            for s in self.samples:
                if s[0] >= now - span:
                    old = s
                    break
        dt = now - old[0]
        return (cpu - old[1]) / dt if dt > 0 else 0.0

    def load(self):
        if self.tau > 0:
            with self.lock:
                return self.decayed
        return self._rate(self.window) / self.budget

    def stats(self):
        return {"cpu_s": process_cpu(), "requests": self.requests, "load": self.load(),
                "util_1s": self._rate(1.0) / self.budget, "t": time.time()}


def burn(seconds):
    end = time.thread_time() + seconds
    x = 1.0000001
    while time.thread_time() < end:
        for _ in range(500):
            x *= 1.0000001
    return x


def make_handler(meter, cost):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def _send(self, code, body, ctype="text/plain"):
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.startswith("/work"):
                burn(cost)
                meter.requests += 1
                self._send(200, "ok\n")
            elif self.path.startswith("/load"):
                self._send(200, "%.4f\n" % meter.load())
            elif self.path.startswith("/stats"):
                self._send(200, json.dumps(meter.stats()) + "\n", "application/json")
            else:
                self._send(404, "no such path\n")

        def log_message(self, fmt, *args):
            pass

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--listen", required=True, help="IP:PORT")
    ap.add_argument("--cost-ms", type=float, default=10.0, help="CPU ms each /work request burns")
    ap.add_argument("--budget", type=float, default=0.5, help="share of one CPU that is load 1.0")
    ap.add_argument("--window", type=float, default=2.0, help="seconds of CPU use /load averages")
    ap.add_argument("--tau", type=float, default=0.0,
                    help="if > 0: /load is an exponentially decayed average with this time constant")
    a = ap.parse_args(argv)
    host, port = a.listen.rsplit(":", 1)
    meter = Meter(a.window, a.budget, a.tau)
    srv = Server((host, int(port)), make_handler(meter, a.cost_ms / 1000.0))
    print("ready", flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
