#!/bin/sh
# setup.sh - make sure the Debian packages 1bit builds and tests with are
# installed. As root it installs what is missing with apt-get; otherwise it
# prints the exact command to run and fails.
#
# Why each package is needed: docs/dependencies.md.
set -eu

PKGS="build-essential cmake ninja-build pkg-config git clang libclang-rt-14-dev \
libmicrohttpd-dev libjansson-dev libpcre2-dev libutf8proc-dev libcurl4-openssl-dev libssl-dev"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    exit 0
fi

echo "1bit setup: missing Debian packages:$missing" >&2
if [ "$(id -u)" = "0" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing
else
    echo "1bit setup: run this, then try again:" >&2
    echo "  sudo apt-get install -y --no-install-recommends$missing" >&2
    exit 1
fi
