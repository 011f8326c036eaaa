#!/usr/bin/env bash
# The Debian package, installed on this machine as an operator would
# (docs/packaging.md). First on a clean machine: dpkg -i, what it installed
# (binary, man pages, unit, configuration), the server started by hand from
# the packaged configuration and queried, then a purge that must leave
# nothing behind. Then an upgrade: the package of an earlier commit
# installed, state written through it, this commit's package installed over
# it, which must keep the configuration's edits, the store's changes, its
# tokens and keys and answer the same, having run the store's migrations
# forward; the earlier binary must then refuse the migrated store. Run by
# scripts/test.sh after the release build.
#
# The earlier commit is the main line just before the last change of the
# store's migrations (crates/store/src/schema.rs), so that the upgrade runs
# one, if that commit has the package already; this commit's parent
# otherwise. Its package is built from `git archive` in the dev profile,
# into the same target directory: it reuses the dependencies the tests built.
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
store=/var/lib/pharos/pharos.sqlite
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')

check() { echo "-- $*"; }
fail() {
  echo "!! FAIL: $*" >&2
  exit 1
}

# Answers of the packaged server on loopback port 53, one per line (+short).
ask() { kdig @127.0.0.1 -p 53 +short +timeout=1 +retry=0 "$@"; }

# Starts the installed server by hand as root from the packaged
# configuration, as the unit would, and waits (30 s at most) until it
# answers.
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

# The token the server printed at its first start.
printed_token() {
  local token
  token=$(sed -n 's/.*API token.*: \([^ ]*\)$/\1/p' "$work/serve.log" | head -n 1)
  [ -n "$token" ] || { cat "$work/serve.log" >&2; fail "the server printed no API token"; }
  echo "$token"
}

# The SQLite store's schema version (PRAGMA user_version), read with the
# server stopped.
schema_version() {
  python3 -c 'import sqlite3, sys; print(sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True).execute("PRAGMA user_version").fetchone()[0])' "$store"
}

# dpkg -i, then the unit the package started (where systemd runs) stopped:
# this test runs the server by hand. --force-confold: if the default
# configuration changed between the two packages, dpkg would ask; the
# answer is the operator's, keeping the edited file.
install_package() {
  dpkg -i --force-confold "$1"
  if [ -d /run/systemd/system ]; then
    systemctl stop pharos
  fi
}

# Purges the package and checks that nothing of it is left.
purge_package() {
  dpkg --purge pharos
  for path in /usr/bin/pharos /lib/systemd/system/pharos.service /etc/systemd/system/multi-user.target.wants/pharos.service /etc/pharos /var/lib/pharos /usr/share/man/man1/pharos.1.gz; do
    [ ! -e "$path" ] || fail "$path is left after the purge"
  done
  ! getent passwd pharos >/dev/null || fail "the user pharos is left after the purge"
  for process in /proc/[0-9]*; do
    case "$(readlink "$process/exe" 2>/dev/null)" in
      /usr/bin/pharos*) fail "process ${process#/proc/} still runs /usr/bin/pharos" ;;
    esac
  done
  check "purged: no binary, unit, configuration, state directory, user or process is left"
}

# The commit the upgrade starts from, and why, on one line: the main line
# just before the last commit that changed the store's migration list, if
# the package existed then; this commit's parent otherwise.
upgrade_source() {
  git rev-parse -q --verify HEAD~1 >/dev/null || fail "no parent commit to upgrade from: the test needs the history (git fetch --unshallow)"
  local migration
  migration=$(git log --first-parent -1 --format=%H -s -L '/^pub(crate) const MIGRATIONS/,/^];/:crates/store/src/schema.rs')
  if [ -n "$migration" ] && git rev-parse -q --verify "$migration~1" >/dev/null \
    && git show "$migration~1:Cargo.toml" | grep -qx '\[package.metadata.deb\]'; then
    echo "$(git rev-parse --short=12 "$migration~1") the parent of $(git rev-parse --short=12 "$migration"), the last change of the store's migrations"
  else
    echo "$(git rev-parse --short=12 HEAD~1) HEAD~1: the parent of $(git rev-parse --short=12 "$migration"), the last change of the store's migrations, has no package"
  fi
}

# Builds the package of `commit` and prints its path: its tree from git
# archive, its binary in the dev profile into this build's target directory
# (the dependencies the tests built are reused; the source's path is the
# same at every run, so a second run with the same commit rebuilds
# nothing), its man pages and completions made by that binary, as its
# scripts/package.sh does with a release binary.
build_old_package() {
  local commit=$1 source="$target/package-upgrade-source"
  if [ "$(cat "$source/.commit" 2>/dev/null)" != "$commit" ]; then
    rm -rf "$source"
    mkdir -p "$source"
    git archive "$commit" | tar -x -C "$source"
    echo "$commit" >"$source/.commit"
  fi
  (
    cd "$source"
    export CARGO_TARGET_DIR="$target" PHAROS_COMMIT="$commit"
    cargo build --quiet -p pharos
    rm -rf "$target/debug/pharos-assets"
    "$target/debug/pharos" generate-assets "$target/debug/pharos-assets" >/dev/null
    gzip -9n "$target/debug/pharos-assets"/man/*.1
    # cargo-deb warns that a dev profile is for development only: so is
    # this package, compressed fast as it is never shipped.
    cargo deb -p pharos --no-build --profile dev --strip --fast --deb-version "$(old_version "$commit")" --output "$work/old.deb" 2>"$work/cargo-deb.err" \
      || { cat "$work/cargo-deb.err" >&2; fail "cargo deb of $commit"; }
  ) | tail -n 1
}

# A version below this commit's package's: dpkg must see an upgrade.
old_version() {
  echo "$(dpkg-deb --field "$new_deb" Version | sed 's/-[^-]*$//')~git.$1-1"
}

echo "== building the package of this commit"
new_deb=$(scripts/package.sh --output "$work/new.deb" | tail -n 1)
new_version=$(dpkg-deb --field "$new_deb" Version)
echo "$new_deb ($new_version, $(du -k "$new_deb" | cut -f1) KiB)"

source_line=$(upgrade_source)
old_commit=${source_line%% *}
why=${source_line#* }
echo "== building the package of $old_commit to upgrade from: $why"
started=$SECONDS
old_deb=$(build_old_package "$old_commit")
old_version=$(dpkg-deb --field "$old_deb" Version)
echo "$old_deb ($old_version), built in $((SECONDS - started)) s"

echo "== installing $new_version on a clean machine"
install_package "$new_deb"

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
stop_server
purge_package

echo "== installing $old_version, the package of $old_commit"
install_package "$old_deb"
/usr/bin/pharos --version

echo "== writing state: the configuration edited, a zone signed, a data center, a region, a service, tokens, a replica disabled"
# The operator's edits of the conffile: an NSID, and the demo zone signed.
sed -i -e 's/^\[server\]$/[server]\nnsid = "package-upgrade-test"/' \
  -e 's|^file = "/etc/pharos/zones/example.test.zone"$|&\ndnssec = true|' "$config"
grep -qx 'dnssec = true' "$config" || fail "the packaged configuration no longer has the demo zone's file line this test signs it after"
# The zone's keys, made before the first start that signs with them, as the
# user whose store it is (docs/dnssec.md).
runuser -u pharos -- /usr/bin/pharos key generate --config "$config" example.test >/dev/null
keys_before=$(runuser -u pharos -- /usr/bin/pharos key show --config "$config" example.test)
start_server
admin=$(printed_token)
ctl() { /usr/bin/pharos ctl --token "$admin" "$@"; }
curl --silent --show-error --fail --request PUT --header "Authorization: Bearer $admin" --header 'Content-Type: application/json' \
  --data '{"id": "lab", "latitude": 50.11, "longitude": 8.68}' http://127.0.0.1:5380/v1/datacenters/lab >/dev/null
ctl region-add loopback 127.0.0.0/8 >/dev/null
cat >"$work/service.json" <<'EOF'
{
  "name": "geo.example.test",
  "policy": "region-probabilities",
  "ttl": 60,
  "max_answers": 1,
  "replica": [
    { "id": "near", "address": "192.0.2.51", "datacenter": "lab" },
    { "id": "far", "address": "192.0.2.52" }
  ],
  "probabilities": {
    "loopback": { "near": { "probability": 1.0, "ttl": 30 } },
    "default": { "far": { "probability": 1.0, "ttl": 60 } }
  }
}
EOF
ctl service-put "$work/service.json" >/dev/null
ctl replica app.example.test fra --disable >/dev/null
reader=$(ctl --json token create upgrade-reader --scope read | python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])')
revoked=$(ctl --json token create upgrade-revoked --scope admin | python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])')
ctl token revoke upgrade-revoked >/dev/null

check "the answers and the state as $old_version serves them"
answers() {
  echo "app.example.test A: $(steady_answer app.example.test A)"
  echo "geo.example.test A: $(steady_answer geo.example.test A)"
  echo "example.test SOA: $(ask example.test SOA)"
  echo "example.test DNSKEY: $(ask example.test DNSKEY | sort)"
}
answers | tee "$work/answers.before"
grep -qx 'app.example.test A: 192.0.2.42' "$work/answers.before" || fail "with fra disabled, app.example.test A is not iad's 192.0.2.42"
grep -qx 'geo.example.test A: 192.0.2.51' "$work/answers.before" || fail "to a loopback client, geo.example.test A is not the loopback region's 192.0.2.51"
grep -q 'DNSKEY: .' "$work/answers.before" || fail "the signed zone answers no DNSKEY"
ctl export >"$work/export.before"
stop_server
schema_before=$(schema_version)
echo "the store's schema: version $schema_before"

echo "== upgrading to $new_version over it"
install_package "$new_deb"
[ "$(dpkg-query --show --showformat '${Version}' pharos)" = "$new_version" ] || fail "the installed version is not $new_version"
/usr/bin/pharos --version

check "the configuration's edits are kept"
grep -qx 'nsid = "package-upgrade-test"' "$config" || fail "the upgrade replaced the edited $config"
grep -qx 'dnssec = true' "$config" || fail "the upgrade replaced the edited $config"
check "the state directory is as the server left it"
[ "$(stat -c '%U:%G %a' /var/lib/pharos)" = "pharos:pharos 750" ] || fail "/var/lib/pharos is $(stat -c '%U:%G %a' /var/lib/pharos)"

check "pharos check passes on the kept configuration and store, as the unit's ExecStartPre runs it, and says what start will migrate"
/usr/bin/pharos check --config "$config" | tee "$work/check.log"
grep -q "store $store: schema version $schema_before[:,]" "$work/check.log" || fail "pharos check does not report the store at schema version $schema_before"

check "the upgraded server answers the same, with the edited NSID"
start_server
answers >"$work/answers.after"
diff -u "$work/answers.before" "$work/answers.after" || fail "the answers changed across the upgrade"
kdig @127.0.0.1 -p 53 +nsid +timeout=1 +retry=0 example.test SOA | grep -q 'package-upgrade-test' || fail "the edited NSID is not served"
check "the tokens: the first start's admin token and the read token still serve, the revoked one is still refused"
ctl export >"$work/export.after"
/usr/bin/pharos ctl --token "$reader" regions | grep -q loopback || fail "the read token made before the upgrade does not list the regions"
! /usr/bin/pharos ctl --token "$revoked" regions >/dev/null 2>&1 || fail "the token revoked before the upgrade is accepted"
check "the export holds every line it held before"
missing=$(grep -Fvx -f "$work/export.after" "$work/export.before" || true)
[ -z "$missing" ] || { diff -u "$work/export.before" "$work/export.after" >&2 || true; fail "lines of the export lost across the upgrade: $missing"; }
stop_server
check "the keys are still in the store"
[ "$(runuser -u pharos -- /usr/bin/pharos key show --config "$config" example.test)" = "$keys_before" ] || fail "the zone's keys changed across the upgrade"

schema_after=$(schema_version)
if [ "$schema_after" -gt "$schema_before" ]; then
  check "the store was migrated forward, from schema version $schema_before to $schema_after"
  grep -q "schema version $schema_before: migrated forward to $schema_after" "$work/check.log" || fail "pharos check did not say it would migrate to $schema_after"
  check "the binary of $old_version refuses the migrated store, naming both versions"
  dpkg-deb -x "$old_deb" "$work/old-root"
  status=0
  timeout 30 "$work/old-root/usr/bin/pharos" serve --config "$config" >"$work/old-serve.log" 2>&1 || status=$?
  cat "$work/old-serve.log"
  [ "$status" != 0 ] && [ "$status" != 124 ] || fail "the old binary did not refuse the store (exit status $status)"
  grep 'schema' "$work/old-serve.log" | grep -w "$schema_after" | grep -qw "$schema_before" || fail "the old binary's refusal does not name schema versions $schema_after and $schema_before"
  [ "$(schema_version)" = "$schema_after" ] || fail "the old binary changed the store's schema version"
elif [ "$schema_after" = "$schema_before" ]; then
  echo "!! NOTE: $old_commit and this commit have the same store schema (version $schema_after): this upgrade runs no migration, and an older binary's refusal of a newer store is not shown"
else
  fail "the store's schema went back from version $schema_before to $schema_after"
fi

echo "== purging"
purge_package

echo "== the package installs, upgrades from $old_commit and purges"
