#!/usr/bin/env bash
# Release artifacts in dist/ (or $1), each with a SHA-256 checksum file:
#   cairn-VERSION-TARGET.tar.gz   the stripped release binary, the systemd
#                                 user unit, man pages, completions, docs
#   cairn_VERSION-1_ARCH.deb      the Debian package (cargo-deb)
# Builds the release profile once (several minutes); installs cargo-deb
# with `cargo install --locked` when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

dist="${1:-dist}"
target_dir="${CARGO_TARGET_DIR:-target}"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
triple="$(rustc -vV | sed -n 's/^host: //p')"
name="cairn-$version-$triple"

echo "=== cargo build --release (cairn $version, $triple)"
cargo build --release --locked -p cairn
# The start-up layout (crates/cairn/build.rs) only helps while its names match
# this build; after a toolchain, dependency or version change they do not.
if [ "$triple" = "x86_64-unknown-linux-gnu" ] && command -v nm >/dev/null; then
  order="$(CAIRN_BIN="$target_dir/release/cairn" scripts/startup-order.sh --check)"
  echo "start-up layout: $order"
  found="$(sed -n 's/.*"in_binary": \([0-9]*\).*/\1/p' <<<"$order")"
  listed="$(sed -n 's/.*"listed": \([0-9]*\).*/\1/p' <<<"$order")"
  if [ "$(( found * 10 ))" -lt "$(( listed * 9 ))" ]; then
    echo "warning: crates/cairn/startup.order is stale ($found of $listed functions found): run scripts/startup-order.sh and rebuild (the idle daemon's RSS grows by about 9 MB without it)" >&2
  fi
fi

command -v cargo-deb >/dev/null || cargo install cargo-deb --locked
mkdir -p "$dist"
rm -f "$dist"/cairn_*.deb "$dist/$name.tar.gz"

echo "=== Debian package"
scripts/package-deb.sh release "$dist"   # strips the binary it packs
deb="$(ls "$dist"/cairn_*.deb)"

echo "=== tarball"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/$name"
mkdir -p "$root/completions" "$root/man" "$root/docs"
cp "$target_dir/release/cairn" "$root/cairn"
strip "$root/cairn"
extra="$target_dir/release/deb-extra"   # written by package-deb.sh from the binary
cp "$extra"/completions/* "$root/completions/"
cp "$extra"/man/*.1.gz "$root/man/"
cp packaging/cairn.service README.md "$root/"
cp docs/*.md "$root/docs/"
tar -C "$stage" -czf "$dist/$name.tar.gz" --owner=0 --group=0 "$name"

(
  cd "$dist"
  for artifact in "$name.tar.gz" "$(basename "$deb")"; do
    sha256sum "$artifact" > "$artifact.sha256"
    sha256sum -c "$artifact.sha256"
  done
)
ls -l "$dist"
echo "install the tarball: tar -xzf $name.tar.gz && install -m 0755 $name/cairn ~/.local/bin/"
echo "install the package: sudo apt install ./$(basename "$deb")   (or: sudo dpkg -i $(basename "$deb"))"
