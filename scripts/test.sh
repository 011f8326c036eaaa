#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs the system packages
# the tests use (reference DNS servers, DNS clients), then runs lints, every
# Rust test, the differential fuzzer against Knot DNS and NSD, the fuzz
# targets for a bounded time, and one short round of
# every benchmark (scripts/bench-smoke.sh).
#
#   scripts/test.sh            # everything (FUZZ_SECONDS=60 by default)
#   FUZZ_SECONDS=0 scripts/test.sh   # skip fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."

# A one-shot run gains nothing from cargo's incremental cache, which would
# add gigabytes to target/. Free disk is said up front: a full disk fails a
# link with a bus error deep in the build log.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
needed_gb=12
free_gb=$(df --output=avail -BG . | tail -n 1 | tr -dc 0-9)
echo "== ${free_gb} GB free on the disk of $(pwd); a clean run builds about ${needed_gb} GB"
if [ "$free_gb" -lt "$needed_gb" ]; then
  echo "!! less than ${needed_gb} GB free: the build may fail with 'No space left on device'" >&2
fi

# Debian packages the tests need, by the command that shows they are there.
declare -A needed=(
  [knotd]=knot            # reference server for the differential conformance tests
  [nsd]=nsd               # second reference server
  [kdig]=knot-dnsutils    # DNS client
  [dig]=bind9-dnsutils    # DNS client
  [faketime]=faketime     # moves kdig's clock for TSIG's BADTIME (tests/suite/transfer.rs)
  [dnssec-dsfromkey]=bind9-utils  # computes the DS of our DNSKEYs (tests/suite/keys.rs)
  [named-checkzone]=bind9-utils   # lists a zone's names for the differential fuzzer (tests/differential_fuzz.rs)
  [delv]=bind9-dnsutils   # validates signed answers from a trust anchor (tests/suite/dnssec.rs)
  [unbound-host]=unbound-host  # Unbound's validator, the second one there
  [ldns-verify-zone]=ldnsutils  # verifies a signed zone as transferred, NSEC chain and all (tests/suite/dnssec.rs)
  [unbound]=unbound      # a real recursive resolver in front of two tiers of redirectors (tests/suite/two_tier.rs), validating through key rollovers (tests/suite/rollover.rs)
  [curl]=curl             # DNS over HTTPS client
  [iptables]=iptables     # NFQUEUE rules of the emulated lossy link (bench/netdelay/tests/tail.rs)
  [clang]=clang           # compiles the XDP programs (crates/xdp/build.rs, tests/suite/common/netns.rs)
  [/usr/include/bpf/bpf_helpers.h]=libbpf-dev  # its BPF helper headers
  [ip]=iproute2           # network namespaces, veth pairs, VXLAN (tests/suite/fastpath.rs, tests/suite/artemis_netns.rs)
  [ethtool]=ethtool       # GRO on a veth end, and xdpgen's count of frames the veth refused (bench/xdpgen/tests/pharos.rs)
  [promtool]=prometheus   # checks a scrape, and a real Prometheus scrapes the server (tests/suite/metrics.rs)
  [/usr/lib/postgresql/15/bin/initdb]=postgresql  # the PostgreSQL store's tests run a real server (tests/suite/common/postgres.rs)
  [fstrm_capture]=fstrm-bin  # reads the dnstap query log (tests/suite/dnstap.rs; dnstap-read is in bind9-dnsutils)
  [knsupdate]=knot-dnsutils  # DNS UPDATE client (tests/suite/dns_update.rs; nsupdate is in bind9-dnsutils)
  [pebble]=pebble         # Let's Encrypt's test ACME server (tests/suite/acme.rs)
  [lego]=lego             # an ACME client writing DNS-01 challenges by RFC 2136 (tests/suite/acme.rs)
  [openssl]=openssl       # pebble's own certificate (tests/suite/acme.rs)
  [chromium]=chromium    # loads the dashboard, headless, over the DevTools protocol (tests/suite/dashboard.rs); fetches over HTTP/3 through the dispatcher (tests/suite/artemis_netns.rs)
  # The benchmarks' peers and load generators (scripts/bench-smoke.sh)
  [named]=bind9           # bench/peers
  [pdns_server]=pdns-server  # bench/peers, bench/dynamic, bench/signing
  [/usr/lib/x86_64-linux-gnu/pdns/libbindbackend.so]=pdns-backend-bind  # bench/peers, bench/dynamic
  [/usr/lib/x86_64-linux-gnu/pdns/libgsqlite3backend.so]=pdns-backend-sqlite3  # bench/signing
  [gdnsd]=gdnsd           # bench/peers, bench/dynamic
  [dnsdist]=dnsdist       # bench/encrypted
  [dnsperf]=dnsperf       # bench/peers' load generator
  [nginx]=nginx-light     # bench/redirect
  [wrk]=wrk               # bench/redirect's load generator
  [ping]=iputils-ping     # bench/tail
  # The Debian package's build and install test (scripts/test-package.sh)
  [dpkg-shlibdeps]=dpkg-dev  # cargo-deb's $auto dependencies
  [adduser]=adduser       # the package's postinst makes its system user
  [man]=man-db            # man pharos renders
  [systemd-analyze]=systemd  # verifies the installed unit (no systemd need run)
)
missing=()
for command in "${!needed[@]}"; do
  # A key is a command, or the absolute path of a file the package installs.
  command -v "$command" >/dev/null 2>&1 || [ -x "/usr/sbin/$command" ] || [[ $command == /* && -e $command ]] || missing+=("${needed[$command]}")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "== installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    # Debian starts the packaged daemons; the tests run their own.
    for service in knot nsd postgresql unbound named pdns gdnsd dnsdist nginx; do systemctl stop "$service" 2>/dev/null || service "$service" stop 2>/dev/null || true; done
  else
    echo "!! NOT ROOT: cannot install ${missing[*]}; tests that need them will SKIP (and fail under CI=true)" >&2
  fi
fi

# Python packages the tests drive as real peers, pinned.
python_needed=(aioquic==1.7.2)  # a second QUIC client: its Initials (crates/artemis/tests/suite/initial.rs), interop (crates/artemis-quic/tests/suite/aioquic.rs)
for package in "${python_needed[@]}"; do
  python3 -c "import ${package%%==*}" 2>/dev/null || pip install --quiet "$package"
done

echo "== format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The fuzz targets are their own workspace: check them too, so a change of
# API breaks here and not only when fuzzing runs.
cargo fmt --manifest-path fuzz/Cargo.toml -- --check
cargo clippy --manifest-path fuzz/Cargo.toml --quiet -- -D warnings
# The sans-IO crates stay free of runtimes, sockets and threads; mechanisms
# stay out of the control plane's internals.
scripts/check-deps.sh

echo "== tests"
cargo test --workspace

# The differential fuzzer against Knot DNS and NSD (tests/differential_fuzz.rs):
# its four configurations, seeded and bounded (1,000 queries each, about
# two and a half minutes), one at a time after the suite, because its
# 300 ms timeouts want a quiet machine. The test binary is the debug one
# `cargo test` just built: the run waits on the network, not on the CPU.
echo "== differential fuzz"
cargo test --test differential_fuzz -- --ignored --test-threads 1

fuzz_seconds=${FUZZ_SECONDS:-60}
if [ "$fuzz_seconds" -gt 0 ] && [ -x scripts/fuzz.sh ]; then
  echo "== fuzzing for ${fuzz_seconds}s"
  scripts/fuzz.sh "$fuzz_seconds"
fi

# The benchmarks: a workspace of their own (bench/Cargo.toml), linted and
# tested here, then each run for one short round, so that none rots unseen.
echo "== benchmarks"
cargo fmt --manifest-path bench/Cargo.toml --all -- --check
cargo clippy --manifest-path bench/Cargo.toml --workspace --all-targets --quiet -- -D warnings
cargo test --manifest-path bench/Cargo.toml --workspace --exclude xdpgen
cargo test --manifest-path bench/Cargo.toml -p xdpgen --lib --bins
# xdpgen against a release pharos, and the smoke rounds, need release builds
# of both workspaces and the peers' packages (about 5 minutes of smoke rounds
# on a 2-core VM, with the large data sets; PHAROS_BENCH_SMOKE=0 leaves them
# out). A kernel that refuses what xdpgen or Knot's XDP mode needs (live-frames
# test runs, bpf_xdp_adjust_meta: Firecracker guest kernels such as
# 6.18.44-fc) makes them skip loudly, with the kernel's reason (under CI too:
# no install step brings what the kernel forbids).
if [ "${PHAROS_BENCH_SMOKE:-1}" = 1 ]; then
  cargo build --release --quiet -p pharos
  cargo build --release --quiet --manifest-path bench/Cargo.toml --workspace
  # --nocapture: a SKIP it prints (with the kernel's reason) shows here.
  cargo test --manifest-path bench/Cargo.toml -p xdpgen --test pharos -- --nocapture
  scripts/bench-smoke.sh
else
  echo "!! SKIP: xdpgen against pharos and the benchmarks' smoke rounds (PHAROS_BENCH_SMOKE=0 left them out)"
fi

# The Debian package: built from the release binary (the benchmarks' stage
# built it; built here otherwise), installed, upgraded and purged on this
# machine, as root (docs/packaging.md).
echo "== Debian package"
scripts/test-package.sh

echo "== all tests passed"
