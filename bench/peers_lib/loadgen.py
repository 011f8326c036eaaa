"""Load generators: dnsperf (default) and Pharos' own bench/target/release/dnsload.

Each run returns a dict with the same keys, None where a generator cannot say:
  sent, completed, lost, qps, mean_us, p50_us, p99_us, rcodes {name: count}
"""

import json
import os
import re
import resource
import subprocess
import time


def _children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class LoadgenError(RuntimeError):
    pass


class Dnsperf:
    name = "dnsperf"

    def __init__(self, cpu, clients, outstanding, latency_clients):
        self.cpu = cpu
        self.clients = clients
        self.outstanding = outstanding
        self.latency_clients = latency_clients

    def version(self):
        p = subprocess.run(["dnsperf", "-h"], capture_output=True, text=True)
        m = re.search(r"Version (\S+)", p.stdout + p.stderr)
        return "dnsperf " + (m.group(1) if m else "?")

    def run(self, port, queries, duration, tcp=False, rate=None):
        """Saturation run when rate is None, else a fixed-rate (-Q) latency run.

        dnsperf 2.10 has no latency histogram, so p50/p99 stay None.  Its -v
        mode prints every query with its latency, but the printing itself
        inflated the measured latencies several-fold here (mean 65 -> 170+ us,
        p99.9 up to 0.5 s), so it is not used.
        """
        argv = ["taskset", "-c", str(self.cpu), "dnsperf", "-s", "127.0.0.1", "-p", str(port),
                "-d", queries, "-l", "%g" % duration, "-m", "tcp" if tcp else "udp",
                # a query unanswered after 1 s on loopback is lost; the 5 s default
                # only makes the run linger after the time limit
                "-t", "1"]
        if rate is None:
            argv += ["-c", str(self.clients), "-q", str(self.outstanding)]
        else:
            argv += ["-c", str(self.latency_clients), "-q", "100", "-Q", str(rate)]
        cpu0, t0 = _children_cpu(), time.monotonic()
        p = subprocess.run(argv, capture_output=True, text=True)
        wall, cpu = time.monotonic() - t0, _children_cpu() - cpu0
        out = p.stdout + "\n" + p.stderr
        if p.returncode != 0 or "Queries completed" not in out:
            raise LoadgenError("dnsperf failed (rc=%d): %s\n%s" % (p.returncode, " ".join(argv),
                                                                 out[-2000:]))
        res = self.parse(out)
        res["loadgen_cpu_s"] = cpu
        res["loadgen_cpu_pct"] = 100.0 * cpu / wall if wall > 0 else None
        res["argv"] = argv
        return res

    @staticmethod
    def parse(out):
        def num(pattern, cast=float):
            m = re.search(pattern, out)
            return cast(m.group(1)) if m else None

        rcodes = {}
        m = re.search(r"Response codes:\s*(.*)", out)
        if m:
            for name, count in re.findall(r"([A-Z]+) (\d+) \(", m.group(1)):
                rcodes[name] = int(count)
        avg = num(r"Average Latency \(s\):\s*([0-9.]+)")
        sd = num(r"Latency StdDev \(s\):\s*([0-9.]+)")
        return {
            "sent": num(r"Queries sent:\s*(\d+)", int),
            "completed": num(r"Queries completed:\s*(\d+)", int),
            "lost": num(r"Queries lost:\s*(\d+)", int),
            "qps": num(r"Queries per second:\s*([0-9.]+)"),
            "run_s": num(r"Run time \(s\):\s*([0-9.]+)"),
            "mean_us": avg * 1e6 if avg is not None else None,
            "stddev_us": sd * 1e6 if sd is not None else None,
            "p50_us": None,
            "p99_us": None,
            "rcodes": rcodes,
        }


class Dnsload:
    name = "dnsload"

    def __init__(self, cpu, binary):
        self.cpu = cpu
        self.binary = binary

    def version(self):
        return "dnsload (%s)" % self.binary

    def run(self, port, queries, duration, tcp=False, rate=None):
        argv = ["taskset", "-c", str(self.cpu), self.binary, "--server", "127.0.0.1:%d" % port,
                "--queries", queries, "--duration", "%g" % duration]
        if tcp:
            argv.append("--tcp")
        if rate is not None:
            argv += ["--rate", str(rate)]
        argv.append("--json")
        cpu0, t0 = _children_cpu(), time.monotonic()
        p = subprocess.run(argv, capture_output=True, text=True)
        wall, cpu = time.monotonic() - t0, _children_cpu() - cpu0
        if p.returncode != 0:
            raise LoadgenError("dnsload failed (rc=%d): %s\n%s" % (p.returncode, " ".join(argv),
                                                                 (p.stdout + p.stderr)[-2000:]))
        text = p.stdout.strip()
        doc = last_json_object(text)
        if not isinstance(doc, dict):
            raise LoadgenError("dnsload printed no JSON object: %r" % text[-500:])
        missing = [k for k in ("sent", "answered", "lost", "qps", "mean_us", "p50_us", "p99_us")
                   if k not in doc]
        if missing:
            raise LoadgenError("dnsload JSON lacks %s: %r" % (missing, doc))
        rcodes = doc.get("rcodes") if isinstance(doc.get("rcodes"), dict) else {}
        return {
            "loadgen_cpu_s": cpu,
            "sent": doc["sent"], "completed": doc["answered"], "lost": doc["lost"],
            "qps": doc["qps"], "run_s": doc.get("elapsed_s", duration),
            "mean_us": doc["mean_us"], "stddev_us": doc.get("stddev_us"),
            "p50_us": doc["p50_us"], "p99_us": doc["p99_us"],
            "rcodes": {str(k).upper(): int(v) for k, v in rcodes.items()},
            "loadgen_cpu_pct": 100.0 * cpu / wall if wall > 0 else None,
            "argv": argv, "raw": doc,
        }


def last_json_object(text):
    """The JSON object dnsload printed: the whole output, else the last
    line that parses as one; None if there is none."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        if line.lstrip().startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None
