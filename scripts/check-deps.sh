#!/usr/bin/env bash
# The dependency rules: between crates, checked on the resolved graph of
# `cargo metadata`, and between the modules of each crate:
#
# 1. The sans-IO crates (the query path and the control core) depend on no
#    async runtime, socket or thread crate, through their normal
#    dependencies, however indirectly. Dev- and build-dependencies do not
#    count: they never reach the library a server links.
# 2. No mechanism crate depends on the control plane's internals.
# 3. No library crate depends on anyhow: errors at a crate's edge are
#    typed (thiserror), so that callers can tell them apart; the binary
#    alone wraps them with context.
# 4. No module of a crate imports, through others, one that imports it
#    (scripts/check-cycles.py).
#
# It prints each rule and crate it checked, then every violation with the
# chain of crates (or the modules' lines) that leads to it, and exits 1 if
# there was one.
#
#   scripts/check-deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."

python3 - <<'PY'
import json
import subprocess
import sys
from collections import deque
from fnmatch import fnmatch

# Must exist: the rule is about them, and a renamed crate must not slip
# out of it unnoticed.
SANS_IO = ["pharos-wire", "pharos-secondary", "pharos-zone", "pharos-answer", "pharos-route", "pharos-ranges", "pharos-bgp", "pharos-rrl", "pharos-dnssec", "pharos-model", "pharos-control", "pharos-update"]
MECHANISMS = ["pharos-transport", "pharos-xdp", "pharos-artemis", "pharos-artemis-quic"]

# What a sans-IO crate must not pull in, by crate name (shell patterns):
# - async runtimes and executors, which bring their own threads and
#   reactors: tokio (and tokio-rustls, tokio-util...), async-std, smol and
#   its parts (async-io, async-net, async-executor, polling), futures-executor;
# - sockets and event loops: mio, socket2, quinn-udp, and the network
#   clients and servers built on them: hyper, h2, axum, tower, reqwest,
#   ureq, quinn (quinn-proto, the sans-IO state machine, is allowed);
# - thread pools and inter-thread queues: rayon, crossbeam, threadpool.
# std::thread and std::net cannot be seen here; review catches those.
FORBIDDEN_IN_SANS_IO = [
    "tokio", "tokio-*", "async-std", "smol", "async-io", "async-net", "async-executor", "polling", "futures-executor",
    "mio", "socket2", "quinn-udp", "hyper", "hyper-*", "h2", "axum", "axum-*", "tower", "tower-*", "reqwest", "ureq", "quinn",
    "rayon", "rayon-*", "crossbeam", "crossbeam-*", "threadpool",
]
# The control plane: the server wiring, the store and the control core.
CONTROL_PLANE = ["pharos-server", "pharos-store", "pharos-control"]
# The one package that may use anyhow: the `pharos` binary.
BINARY = "pharos"

metadata = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1"], check=True, capture_output=True, text=True).stdout)
names = {package["id"]: package["name"] for package in metadata["packages"]}
members = {names[member] for member in metadata["workspace_members"]}
by_name = {names[node["id"]]: node["id"] for node in metadata["resolve"]["nodes"] if node["id"] in metadata["workspace_members"]}
normal_deps = {
    node["id"]: [dep["pkg"] for dep in node["deps"] if any(kind["kind"] is None for kind in dep["dep_kinds"])]
    for node in metadata["resolve"]["nodes"]
}


def chains_to_forbidden(root, forbidden):
    """The shortest chain of crates from root to each forbidden crate it reaches."""
    parents = {root: None}
    queue = deque([root])
    found = []
    while queue:
        current = queue.popleft()
        if current != root and forbidden(names[current]):
            chain = []
            at = current
            while at is not None:
                chain.append(names[at])
                at = parents[at]
            found.append(" -> ".join(reversed(chain)))
            continue  # what lies beyond is the forbidden crate's own business
        for dep in normal_deps.get(current, []):
            if dep not in parents:
                parents[dep] = current
                queue.append(dep)
    return found


violations = []


def check(rule, crates, forbidden):
    """Checks `crates`, which must exist."""
    print(f"== {rule}")
    for crate in crates:
        if crate not in members:
            print(f"   {crate}: MISSING")
            violations.append(f"{crate}: not in the workspace (renamed? update scripts/check-deps.sh)")
            continue
        found = chains_to_forbidden(by_name[crate], forbidden)
        print(f"   {crate}: {f'{len(found)} violation(s)' if found else 'ok'}")
        violations.extend(found)


def sans_io_forbidden(name):
    return any(fnmatch(name, pattern) for pattern in FORBIDDEN_IN_SANS_IO)


check("sans-IO crates: no async runtime, socket or thread crate (" + ", ".join(FORBIDDEN_IN_SANS_IO) + ")", SANS_IO, sans_io_forbidden)
check("mechanisms: no control-plane internals (" + ", ".join(CONTROL_PLANE) + ")", MECHANISMS, lambda name: name in CONTROL_PLANE)

print(f"== library crates: typed errors, no anyhow (only {BINARY} wraps them)")
if BINARY not in members:
    violations.append(f"{BINARY}: not in the workspace (renamed? update scripts/check-deps.sh)")
libraries = sorted(members - {BINARY})
using_anyhow = [crate for crate in libraries if any(names[dep] == "anyhow" for dep in normal_deps[by_name[crate]])]
print(f"   {len(libraries)} library crates: {'anyhow in ' + ', '.join(using_anyhow) if using_anyhow else 'ok'}")
violations.extend(f"{crate} -> anyhow: return a typed error (thiserror); only {BINARY} may use anyhow" for crate in using_anyhow)

if violations:
    print(f"\n{len(violations)} violation(s) of the dependency rule:")
    for violation in violations:
        print(f"   {violation}")
    sys.exit(1)
print("\nthe dependency rule holds between crates")
PY
echo "== modules: no import cycle within a crate"
exec python3 scripts/check-cycles.py
