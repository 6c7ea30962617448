#!/usr/bin/env bash
# Developer tool: put this machine's Debian packages back to a machine image's
# set, to prove that scripts/test.sh installs everything from a fresh machine.
#
#   scripts/reset-to-image-packages.sh IMAGE_PACKAGE_LIST
#
# IMAGE_PACKAGE_LIST has one package a line as `apt<TAB>NAME[:ARCH]<TAB>VERSION`
# (other lines are ignored): the image's package set. Every installed package
# not in it is purged, and qemu-utils is put back at the image's version
# (fetched from the backports suite of the configured Debian mirror), since that
# version, newer than bookworm's, is what broke the install step. Run as root;
# it changes the machine, so nothing else should be running tests meanwhile.
set -euo pipefail
list="${1:?usage: $0 IMAGE_PACKAGE_LIST}"
[ "$(id -u)" = 0 ] || { echo "must run as root" >&2; exit 2; }
export DEBIAN_FRONTEND=noninteractive
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

awk -F'\t' '$1=="apt"{split($2,a,":"); print a[1]}' "$list" | sort -u >"$tmp/image"
dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' | awk '$2=="ii"{print $1}' | sort -u >"$tmp/now"
mapfile -t extra < <(comm -13 "$tmp/image" "$tmp/now")
if [ ${#extra[@]} -gt 0 ]; then
    echo "reset: purging ${#extra[@]} packages the image does not have: ${extra[*]}"
    apt-get purge -y -qq "${extra[@]}"
fi

want=$(awk -F'\t' '$1=="apt" && $2 ~ /^qemu-utils(:|$)/{print $3}' "$list")
have=$(dpkg-query -W -f='${Version}' qemu-utils 2>/dev/null || true)
if [ -n "$want" ] && [ "$want" != "$have" ]; then
    # The image's qemu-utils comes from backports, which the machine's own
    # sources do not list: fetch it with a private apt configuration.
    uri=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    mkdir -p "$tmp/lists/partial" "$tmp/archives/partial"
    echo "deb $uri bookworm-backports main" >"$tmp/sources.list"
    apt_opts=(-o "Dir::Etc::sourcelist=$tmp/sources.list" -o Dir::Etc::sourceparts=-
              -o "Dir::State::lists=$tmp/lists" -o "Dir::Cache::archives=$tmp/archives")
    apt-get "${apt_opts[@]}" update -qq
    (cd "$tmp" && apt-get "${apt_opts[@]}" download "qemu-utils=$want")
    echo "reset: qemu-utils $have -> $want"
    apt-get install -y -qq --no-install-recommends --allow-downgrades "$tmp"/qemu-utils_*.deb
fi
echo "reset: done; installed now: $(dpkg-query -W -f='${Version}' qemu-utils 2>/dev/null || echo 'no qemu-utils')"
