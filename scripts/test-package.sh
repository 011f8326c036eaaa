#!/usr/bin/env bash
# The Debian package, installed on this machine as an operator would
# (docs/packaging.md): dpkg -i, what it installed (binary, man pages, unit,
# configuration), the server started by hand from the packaged
# configuration and queried, an upgrade over it that must keep the
# configuration's edits, the store's changes and the keys, then a purge that
# must leave nothing behind. Run by scripts/test.sh after the release build.
#
# Root only (dpkg -i, port 53): a loud SKIP otherwise, a failure under
# CI=true. It refuses to run where a pharos package is already installed,
# and purges its own whatever happens.
#
#   scripts/test-package.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
  if [ "${CI:-}" = true ]; then
    echo "!! FAIL: the package test needs root (dpkg -i), and CI runs as root" >&2
    exit 1
  fi
  echo "!! SKIP: the package test needs root (dpkg -i, port 53)" >&2
  exit 0
fi
if dpkg-query --show --showformat '${db:Status-Status}' pharos 2>/dev/null | grep -qv '^not-installed$'; then
  echo "!! a pharos package is installed on this machine: the test would purge it; purge it first" >&2
  exit 1
fi

work=$(mktemp -d)
server=
cleanup() {
  stop_server
  dpkg --purge pharos >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

config=/etc/pharos/pharos.toml

check() { echo "-- $*"; }
fail() {
  echo "!! FAIL: $*" >&2
  exit 1
}

# Answers of the packaged server on loopback port 53, one per line (+short).
ask() { kdig @127.0.0.1 -p 53 +short +timeout=1 +retry=0 "$@"; }

# Starts the server by hand as root from the packaged configuration, as the
# unit would, and waits (30 s at most) until it answers.
start_server() {
  /usr/bin/pharos serve --config "$config" >"$work/serve.log" 2>&1 &
  server=$!
  local deadline=$((SECONDS + 30))
  until [ -n "$(ask example.test SOA 2>/dev/null)" ]; do
    kill -0 "$server" 2>/dev/null || { cat "$work/serve.log" >&2; fail "the server exited at start"; }
    [ "$SECONDS" -lt "$deadline" ] || { cat "$work/serve.log" >&2; fail "no answer on 127.0.0.1:53 within 30 s"; }
  done
}

stop_server() {
  if [ -n "$server" ]; then
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    server=
  fi
}

# The same answer to the same question, asked 20 times (the demo service
# picks a replica at random until one is disabled).
steady_answer() {
  local first answer
  first=$(ask "$@")
  for _ in $(seq 20); do
    answer=$(ask "$@")
    [ "$answer" = "$first" ] || fail "$* answered '$first' then '$answer'"
  done
  echo "$first"
}

echo "== building the package, then a second one of a higher version (the upgrade)"
first_deb=$(scripts/package.sh --output "$work/first.deb" | tail -n 1)
first_version=$(dpkg-deb --field "$first_deb" Version)
second_version="$first_version+upgrade"
second_deb=$(scripts/package.sh --output "$work/second.deb" --deb-version "$second_version" | tail -n 1)
echo "$first_deb ($first_version, $(du -k "$first_deb" | cut -f1) KiB), $second_deb ($second_version)"

echo "== installing $first_version"
dpkg -i "$first_deb"
if [ -d /run/systemd/system ]; then
  # The package started its unit; this test runs the server by hand.
  systemctl stop pharos
fi

check "/usr/bin/pharos --version"
/usr/bin/pharos --version

check "the system user and its state directory (pharos:pharos, 0750)"
getent passwd pharos >/dev/null || fail "no user pharos"
[ "$(stat -c '%U:%G %a' /var/lib/pharos)" = "pharos:pharos 750" ] || fail "/var/lib/pharos is $(stat -c '%U:%G %a' /var/lib/pharos)"

check "man pharos and man pharos-serve render"
for page in pharos pharos-serve; do
  MANPAGER=cat MANWIDTH=80 man "$page" >"$work/$page.txt" 2>"$work/man.err" || { cat "$work/man.err" >&2; fail "man $page"; }
  [ ! -s "$work/man.err" ] || { cat "$work/man.err" >&2; fail "man $page printed warnings"; }
  grep -q "$page" "$work/$page.txt" || fail "man $page does not name $page"
done
MANPAGER=cat man -l /usr/share/man/man1/pharos.1.gz >/dev/null

check "completions for bash, zsh and fish"
for file in /usr/share/bash-completion/completions/pharos /usr/share/zsh/vendor-completions/_pharos /usr/share/fish/vendor_completions.d/pharos.fish; do
  grep -q serve "$file" || fail "$file does not complete serve"
done

check "systemd-analyze verify the installed unit"
systemd-analyze verify /lib/systemd/system/pharos.service
check "its sandbox scores no worse than 2.5 (docs/packaging.md says why each exposure is left)"
systemd-analyze security --offline=yes --threshold=25 /lib/systemd/system/pharos.service | tail -n 1

check "/etc/pharos/pharos.toml is a conffile"
grep -qx "$config" /var/lib/dpkg/info/pharos.conffiles || fail "$config is not listed as a conffile"

check "pharos check --config $config"
/usr/bin/pharos check --config "$config"

check "the server started by hand answers on 127.0.0.1:53, as user pharos"
start_server
[ "$(ask example.test SOA | cut -d' ' -f1)" = ns1.example.test. ] || fail "example.test SOA: $(ask example.test SOA)"
uid=$(awk '/^Uid:/ { print $2 }' "/proc/$server/status")
[ "$uid" = "$(id -u pharos)" ] || fail "the server runs as uid $uid, not pharos's $(id -u pharos)"

echo "== writing state: a replica disabled through the control API, a zone's keys, an edited configuration"
token=$(sed -n 's/.*API token.*: \([^ ]*\)$/\1/p' "$work/serve.log" | head -n 1)
[ -n "$token" ] || { cat "$work/serve.log" >&2; fail "the server printed no API token"; }
/usr/bin/pharos ctl --token "$token" replica app.example.test fra --disable
answer_before=$(steady_answer app.example.test A)
[ "$answer_before" = 192.0.2.42 ] || fail "with fra disabled, app.example.test A is '$answer_before', not iad's 192.0.2.42"
soa_before=$(ask example.test SOA)
stop_server
# With the server stopped (it holds a SQLite store for itself), as the user
# whose store it is (docs/dnssec.md).
runuser -u pharos -- /usr/bin/pharos key generate --config "$config" example.test >/dev/null
keys_before=$(runuser -u pharos -- /usr/bin/pharos key show --config "$config" example.test)
sed -i 's/^\[server\]$/[server]\nnsid = "package-upgrade-test"/' "$config"

echo "== upgrading to $second_version over it"
dpkg -i "$second_deb"
if [ -d /run/systemd/system ]; then
  systemctl stop pharos
fi
[ "$(dpkg-query --show --showformat '${Version}' pharos)" = "$second_version" ] || fail "the installed version is not $second_version"

check "the configuration's edit is kept"
grep -qx 'nsid = "package-upgrade-test"' "$config" || fail "the upgrade replaced the edited $config"
check "the state directory is as the server left it"
[ "$(stat -c '%U:%G %a' /var/lib/pharos)" = "pharos:pharos 750" ] || fail "/var/lib/pharos is $(stat -c '%U:%G %a' /var/lib/pharos)"

check "pharos check passes on the kept configuration and store, as the unit's ExecStartPre runs it"
/usr/bin/pharos check --config "$config"
check "the upgraded server answers the same, with the edited NSID"
start_server
[ "$(steady_answer app.example.test A)" = "$answer_before" ] || fail "app.example.test A changed across the upgrade"
[ "$(ask example.test SOA)" = "$soa_before" ] || fail "example.test SOA changed across the upgrade"
kdig @127.0.0.1 -p 53 +nsid +timeout=1 +retry=0 example.test SOA | grep -q 'package-upgrade-test' || fail "the edited NSID is not served"
stop_server
check "the keys are still in the store"
[ "$(runuser -u pharos -- /usr/bin/pharos key show --config "$config" example.test)" = "$keys_before" ] || fail "the zone's keys changed across the upgrade"

echo "== purging"
dpkg --purge pharos
for path in /usr/bin/pharos /lib/systemd/system/pharos.service /etc/systemd/system/multi-user.target.wants/pharos.service /etc/pharos /var/lib/pharos /usr/share/man/man1/pharos.1.gz; do
  check "$path is gone"
  [ ! -e "$path" ] || fail "$path is left after the purge"
done
check "the user pharos is gone"
! getent passwd pharos >/dev/null || fail "the user pharos is left after the purge"
check "no process runs the packaged binary"
for process in /proc/[0-9]*; do
  case "$(readlink "$process/exe" 2>/dev/null)" in
    /usr/bin/pharos*) fail "process ${process#/proc/} still runs /usr/bin/pharos" ;;
  esac
done

echo "== the package installs, upgrades and purges"
