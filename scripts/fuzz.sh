#!/usr/bin/env bash
# Fuzzes Pharos for a bounded time: libFuzzer through cargo-fuzz, on the
# stable toolchain (no sanitizer: the fuzzed crates have no unsafe code, so
# panics, overflow checks and the targets' own invariants are the oracles).
#
#   scripts/fuzz.sh [SECONDS]     default 60: 1/2 to `respond`, 1/4 to `zone`, 1/12 each to `initial` and `proxy`, 1/24 each to `update` and `transfer_in`
#
# Run from anywhere; CI runs it from the repository root. Installs
# cargo-fuzz if missing, regenerates the seeds (fuzz/seeds, from
# fuzz/gen_seeds.py and, where the large data sets are ($PHAROS_DATA, by
# default ../shared/data), the captures in their dns/), keeps the
# growing corpus in fuzz/corpus and crash inputs in fuzz/artifacts (both
# ignored by git). Exits non-zero if any target finds a crash, an
# invariant failure, a timeout or an out-of-memory input, and prints the
# input's path and hex. See fuzz/README.md.
set -euo pipefail

total=${1:-60}
if ! [[ $total =~ ^[0-9]+$ ]] || ((total < 24)); then
    echo "usage: $0 [SECONDS >= 24]" >&2
    exit 2
fi
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz (once per machine)"
    cargo install cargo-fuzz --locked
fi

captures=()
data=${PHAROS_DATA:-../shared/data}
for capture in "$data/dns/dnsjit-test-pellets.pcap" "$data/dns/dnscap-test-dns.pcap.gz"; do
    [[ -f $capture ]] && captures+=("$capture")
done
[[ ${#captures[@]} -gt 0 ]] || echo "fuzz.sh: no captures in $data/dns (set PHAROS_DATA): seeds from gen_seeds.py alone"
rm -rf fuzz/seeds
python3 fuzz/gen_seeds.py fuzz/seeds "${captures[@]}"

# Release build with debug assertions and overflow checks (cargo-fuzz's default).
cargo fuzz build --sanitizer none

# Runs one target for $2 seconds; returns non-zero if it found anything.
fuzz_target() {
    local target=$1 seconds=$2
    local artifacts=fuzz/artifacts/$target log=fuzz/artifacts/$target.log
    mkdir -p "fuzz/corpus/$target" "$artifacts"
    local before
    before=$(ls "$artifacts")
    echo "fuzz.sh: $target for ${seconds}s (log: $log)"
    local status=0
    cargo fuzz run --sanitizer none "$target" "fuzz/corpus/$target" "fuzz/seeds/$target" -- \
        -dict="fuzz/$target.dict" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 >"$log" 2>&1 || status=$?
    # The last progress line: executions, coverage (cov: edges, ft: features), corpus size, speed.
    grep -E '^#[0-9]+' "$log" | tail -n 1 || true
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" || true
    if ((status != 0)); then
        echo "fuzz.sh: $target FAILED (exit $status); from its log:"
        grep -E -A1 'panicked at|^==[0-9]+== ERROR|^SUMMARY|ALARM|out-of-memory|deadly signal|Timeout' "$log" | cut -c1-400 | head -n 20
        local found=0 file size
        for file in $(ls "$artifacts"); do
            if ! grep -qxF "$file" <<<"$before"; then
                found=1
                size=$(wc -c <"$artifacts/$file")
                echo "fuzz.sh: crashing input: $artifacts/$file ($size bytes)"
                if ((size <= 1024)); then
                    echo "fuzz.sh:   hex: $(od -An -v -tx1 "$artifacts/$file" | tr -d ' \n')"
                fi
                echo "fuzz.sh:   reproduce: cargo fuzz run --sanitizer none $target $artifacts/$file"
                echo "fuzz.sh:   minimize:  cargo fuzz tmin --sanitizer none $target $artifacts/$file"
            fi
        done
        ((found)) || echo "fuzz.sh: no crashing input was written"
        return 1
    fi
}

respond_seconds=$((total / 2))
zone_seconds=$((total / 4))
initial_seconds=$((total / 12))
proxy_seconds=$((total / 12))
transfer_in_seconds=$((total / 24))
update_seconds=$((total - respond_seconds - zone_seconds - initial_seconds - proxy_seconds - transfer_in_seconds))
failed=()
fuzz_target respond "$respond_seconds" || failed+=(respond)
fuzz_target zone "$zone_seconds" || failed+=(zone)
fuzz_target initial "$initial_seconds" || failed+=(initial)
fuzz_target proxy "$proxy_seconds" || failed+=(proxy)
fuzz_target update "$update_seconds" || failed+=(update)
fuzz_target transfer_in "$transfer_in_seconds" || failed+=(transfer_in)
if ((${#failed[@]})); then
    echo "fuzz.sh: failures in: ${failed[*]}"
    exit 1
fi
echo "fuzz.sh: no crashes in ${total}s"
