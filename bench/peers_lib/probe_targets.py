#!/usr/bin/env python3
"""Listeners for bench/health: one listening TCP socket per replica address,
all in this one process (epoll), so every health probe reaches a real socket.

    python3 probe_targets.py --port 18400 --addresses FILE [--http] [--flappers FILE]

FILE holds one IPv4 address per line (127.x.y.z). A TCP probe is accepted
and closed at once; with --http the request is read and answered
"HTTP/1.0 200 OK" with body "ok". Flappers are the addresses whose listener
is closed for --half seconds, then open for --half seconds, over and over
(each with its own phase), while flapping is on: a closed listener refuses
the connection, so the probe fails at once.

Commands on stdin, one per line, each answered with one JSON line:
  stats      {"accepts": n, "served": n, "flapping": bool,
              "flappers": {address: [open, seconds since the last toggle]},
              "phase": accepts since the last stats by 50 ms slice of the second}
  flap on    start flapping (phases start now)
  flap off   every listener open again
  quit
Prints "ready" once every socket listens.
"""

import argparse
import json
import selectors
import socket
import sys
import time


class Targets:
    def __init__(self, addresses, port, http, flappers, half):
        self.port, self.http, self.half = port, http, half
        self.sel = selectors.DefaultSelector()
        self.socks = {}
        self.accepts = 0
        self.served = 0
        # accepts by where in the second they came (20 bins of 50 ms), since the last stats
        self.phase = [0] * 20
        self.flappers = list(flappers)
        self.flapping = False
        self.flap_t0 = 0.0
        self.is_open = {}
        self.toggled = {}
        for addr in addresses:
            self.open(addr)
        self.sel.register(sys.stdin, selectors.EVENT_READ, "stdin")

    def open(self, addr):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, self.port))
        s.listen(512)
        s.setblocking(False)
        self.sel.register(s, selectors.EVENT_READ, addr)
        self.socks[addr] = s
        self.is_open[addr] = True
        self.toggled[addr] = time.monotonic()

    def close(self, addr):
        s = self.socks.pop(addr)
        self.sel.unregister(s)
        s.close()
        self.is_open[addr] = False
        self.toggled[addr] = time.monotonic()

    def should_be_open(self, i, now):
        """Flapper i: closed for `half`, open for `half`, phase spread over the period."""
        phase = (now - self.flap_t0 + (2 * self.half) * i / max(1, len(self.flappers))) % (2 * self.half)
        return phase >= self.half

    def tick(self):
        now = time.monotonic()
        for i, addr in enumerate(self.flappers):
            want = (not self.flapping) or self.should_be_open(i, now)
            if want and not self.is_open[addr]:
                self.open(addr)
            elif not want and self.is_open[addr]:
                self.close(addr)

    def command(self, line):
        cmd = line.strip()
        if cmd == "stats":
            now = time.monotonic()
            out = {"accepts": self.accepts, "served": self.served, "flapping": self.flapping,
                   "flappers": {a: [self.is_open[a], now - self.toggled[a]] for a in self.flappers},
                   "phase": self.phase}
            self.phase = [0] * 20
        elif cmd == "flap on":
            self.flapping, self.flap_t0 = True, time.monotonic()
            self.tick()
            out = {"ok": True}
        elif cmd == "flap off":
            self.flapping = False
            self.tick()
            out = {"ok": True}
        elif cmd in ("quit", ""):
            return False
        else:
            out = {"error": "unknown command %r" % cmd}
        print(json.dumps(out), flush=True)
        return True

    def serve(self):
        print("ready", flush=True)
        while True:
            for key, _ in self.sel.select(timeout=0.05):
                if key.data == "stdin":
                    if not self.command(sys.stdin.readline()):
                        return
                    continue
                try:
                    conn, _ = key.fileobj.accept()
                except (BlockingIOError, OSError):
                    continue
                self.accepts += 1
                self.phase[int((time.monotonic() % 1.0) * 20) % 20] += 1
                if self.http:
                    try:
                        conn.settimeout(0.2)
                        conn.recv(4096)
                        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                        self.served += 1
                    except OSError:
                        pass
                conn.close()
            self.tick()


def read_lines(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--addresses", required=True)
    ap.add_argument("--flappers", help="file of addresses (a subset) that flap when told to")
    ap.add_argument("--half", type=float, default=5.0, help="seconds closed, then seconds open")
    ap.add_argument("--http", action="store_true")
    a = ap.parse_args(argv)
    addresses = read_lines(a.addresses)
    flappers = read_lines(a.flappers) if a.flappers else []
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, len(addresses) + 1024)), hard))
    except (ValueError, OSError):
        pass
    Targets(addresses, a.port, a.http, flappers, a.half).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
