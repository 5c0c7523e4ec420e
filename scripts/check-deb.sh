#!/usr/bin/env bash
# Checks a cairn .deb: lists its contents (dpkg-deb -c), installs it with
# dpkg into a throwaway root, and checks that what a person needs is there
# and the installed binary runs.
#
#   scripts/check-deb.sh PACKAGE.deb
set -euo pipefail
deb="$1"
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT

echo "--- dpkg-deb -c $deb"
dpkg-deb -c "$deb"
echo "--- $(du -h "$deb" | cut -f1) $(basename "$deb")"

# A root of its own: an empty dpkg database; libc6 is the host's, so the
# dependency check is waived (this root only has to hold the files).
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status"
dpkg --root="$root" --force-depends --force-script-chrootless -i "$deb" >/dev/null 2>&1 \
  || { echo "dpkg -i --root failed" >&2; exit 1; }
dpkg --root="$root" -s cairn | grep -q '^Status: install ok installed'

for path in usr/bin/cairn usr/lib/systemd/user/cairn.service \
            usr/share/man/man1/cairn.1.gz usr/share/man/man1/cairn-daemon.1.gz \
            usr/share/bash-completion/completions/cairn \
            usr/share/zsh/vendor-completions/_cairn \
            usr/share/fish/vendor_completions.d/cairn.fish \
            usr/share/doc/cairn/configuration.md; do
  [[ -s "$root/$path" ]] || { echo "missing from the package: /$path" >&2; exit 1; }
done
grep -q '^ExecStart=/usr/bin/cairn daemon$' "$root/usr/lib/systemd/user/cairn.service"
"$root/usr/bin/cairn" --version
bash -n "$root/usr/share/bash-completion/completions/cairn"
zcat "$root/usr/share/man/man1/cairn.1.gz" | grep -q '^\.TH cairn 1'
echo "package ok: installed into a throwaway root, every file in place"
