#!/usr/bin/env bash
# One short round of every benchmark in bench/ (its smoke mode), so that no
# benchmark rots unseen between measurements. Each must start every server
# and load generator it names and print its table; a server that does not
# start, a load generator that errors or a run that hangs fails it. Its
# figures are not looked at: they mean nothing, least of all on a busy
# machine, and go to temporary directories, never to bench/out.
#
#   scripts/bench-smoke.sh                # all of them (scripts/test.sh)
#   scripts/bench-smoke.sh peers tail     # some
#
# Needs target/release/pharos and the tools of bench/Cargo.toml built in
# release (scripts/test.sh builds them first). Benchmarks that need root
# (network namespaces, XDP, PostgreSQL run as another user) or the large
# data sets (the directory PHAROS_DATA names, else ../shared/data) SKIP
# loudly without them, and fail under CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each benchmark's one command in its smoke mode, in the order they run.
declare -A command=(
  [peers]="bench/peers --smoke"
  [dynamic]="bench/dynamic --smoke"
  [signing]="bench/signing --smoke"
  [storm]="bench/storm --smoke"
  [update]="bench/update --smoke"
  [health]="bench/health --smoke"
  [proximity]="bench/proximity --smoke"
  [redirect]="bench/redirect --smoke"
  [encrypted]="bench/encrypted --smoke"
  [oscillation]="bench/oscillation --smoke"
  [fleet]="bench/fleet --smoke"
  [fastpath]="bench/fastpath --smoke"
  [tail]="bench/tail --smoke"
  [figure10]="bench/target/release/figure10 --trials 5 --no-plot --out SMOKE_OUT"
  [dispatch]="bench/target/release/dispatch --seconds-per-case 0.2"
  [bgp-load]="bench/bgp-load --smoke"
)
order=(peers dynamic signing storm update health proximity redirect encrypted oscillation fleet fastpath tail figure10 dispatch bgp-load)
# What some of them need beyond the packages scripts/test.sh installs.
declare -A needs=(
  [fleet]=root [fastpath]=root [tail]=root [figure10]="root data" [oscillation]=root
  [proximity]=data [bgp-load]=data
)
data=${PHAROS_DATA:-../shared/data}

# Why `name` cannot run here, if it cannot.
unmet_need() {
  for need in ${needs[$1]:-}; do
    case $need in
      root) [ "$(id -u)" = 0 ] || { echo "it needs root"; return; } ;;
      data) [ -d "$data" ] || { echo "it needs the large data sets in $data (set PHAROS_DATA)"; return; } ;;
    esac
  done
}

chosen=("$@")
[ ${#chosen[@]} -gt 0 ] || chosen=("${order[@]}")
failed=() skipped=() started=$SECONDS
for name in "${chosen[@]}"; do
  [ -n "${command[$name]:-}" ] || { echo "!! no benchmark $name; they are: ${order[*]}" >&2; exit 2; }
  why=$(unmet_need "$name")
  if [ -n "$why" ] && [ -n "${CI:-}" ]; then
    echo "!! FAILED bench/$name: $why, and CI is set" >&2
    failed+=("$name")
    continue
  elif [ -n "$why" ]; then
    echo "!! SKIP bench/$name: $why" >&2
    skipped+=("$name")
    continue
  fi
  out=$(mktemp -d -t bench-smoke-XXXXXX)
  echo "== bench/$name: ${command[$name]//SMOKE_OUT/$out}"
  begun=$SECONDS
  # A hang is a failure too; stderr (the progress log) is shown when it fails.
  if timeout 600 ${command[$name]//SMOKE_OUT/$out} >"$out/stdout" 2>"$out/stderr" && [ -s "$out/stdout" ]; then
    cat "$out/stdout"
    echo "== bench/$name ran in $((SECONDS - begun)) s"
  else
    cat "$out/stdout"
    echo "!! FAILED bench/$name (its status, or no table on stdout); the end of its log:" >&2
    tail -n 40 "$out/stderr" >&2
    failed+=("$name")
  fi
  rm -rf "$out"
done
echo "== benchmarks' smoke runs: $(( ${#chosen[@]} - ${#failed[@]} - ${#skipped[@]} )) ran, ${#skipped[@]} skipped${skipped:+ (${skipped[*]})}, ${#failed[@]} failed, in $((SECONDS - started)) s"
[ ${#failed[@]} -eq 0 ] || { echo "!! benchmarks that no longer run: ${failed[*]}" >&2; exit 1; }
