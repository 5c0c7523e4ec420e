#!/usr/bin/env bash
# Builds cairn's Debian package from a binary already built with PROFILE:
# the binary writes its own manual pages and shell completions, then
# `cargo deb --no-build` packs them with the systemd user unit (assets in
# crates/cairn/Cargo.toml, [package.metadata.deb]).
#
#   scripts/package-deb.sh [PROFILE [OUT_DIR [cargo-deb options…]]]
#
# PROFILE is `release` (default; scripts/release.sh) or `dev` (CI packs the
# debug binary its tests built, with --no-strip --fast, to save minutes).
# Needs cargo-deb on PATH (`cargo install cargo-deb --locked`).
set -euo pipefail
cd "$(dirname "$0")/.."

profile="${1:-release}"
out="${2:-target/debian}"
shift $(( $# < 2 ? $# : 2 ))
target_dir="${CARGO_TARGET_DIR:-target}"
case "$profile" in
  dev) dir=debug ;;
  *) dir="$profile" ;;
esac
bin="$target_dir/$dir/cairn"
[[ -x "$bin" ]] || { echo "no $bin: build it first (cargo build -p cairn --profile $profile)" >&2; exit 1; }

extra="$target_dir/$dir/deb-extra"
rm -rf "$extra"
mkdir -p "$extra/man" "$extra/completions"
"$bin" man --dir "$extra/man"
gzip -9n "$extra"/man/*.1
"$bin" completions bash > "$extra/completions/cairn.bash"
"$bin" completions zsh > "$extra/completions/_cairn"
"$bin" completions fish > "$extra/completions/cairn.fish"

mkdir -p "$out"
cargo deb -p cairn --no-build --profile "$profile" --output "$out" "$@"
