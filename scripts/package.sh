#!/usr/bin/env bash
# Builds the Debian package of Pharos (docs/packaging.md) with cargo-deb, from
# the release binary (built here if CI's benchmark stage has not built it
# already), and prints the .deb's path on its last line. The package goes to
# target/debian/, which git ignores.
#
#   scripts/package.sh                          # target/debian/pharos_0.1.0-1_amd64.deb
#   scripts/package.sh --deb-version 0.1.1-1    # other cargo-deb flags are passed on
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned, so that a new cargo-deb cannot change the package unseen.
cargo_deb_version=3.8.0
if [ "$(cargo deb --version 2>/dev/null)" != "cargo-deb $cargo_deb_version" ]; then
  echo "== installing cargo-deb $cargo_deb_version" >&2
  cargo install cargo-deb --locked --version "$cargo_deb_version" --quiet
fi

# A no-op when the release binary is up to date.
cargo build --release --quiet -p pharos
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
# The man pages and completions the package ships ([package.metadata.deb] assets).
rm -rf "$target/release/pharos-assets"
"$target/release/pharos" generate-assets "$target/release/pharos-assets" >/dev/null
# Compressed as Debian policy asks (cargo-deb leaves files under
# target/release as they are).
gzip -9n "$target/release/pharos-assets"/man/*.1
# --strip: the release profile keeps debug info (debug = 1) for the benchmarks'
# profiles; the installed binary does without them (22 MB instead of 140).
cargo deb -p pharos --no-build --strip "$@"
