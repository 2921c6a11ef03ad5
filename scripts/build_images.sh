#!/usr/bin/env bash
# Root filesystems for the fake kubelet's runc runtime (tests/fakes/kube/runc.py), built with
# debootstrap and cached between runs:
#   build_images.sh [--cache DIR] [NAME ...]     (default: every image; prints NAME=DIR lines)
# Images:
#   bookworm-minimal   Debian 12 minbase + python3-minimal only (no shutil's full stdlib deps)
#   bookworm-python3   Debian 12 minbase + python3
#   bullseye-python3   Debian 11 minbase + python3 (3.9)
#   bookworm-nopython  Debian 12 minbase, no Python at all
#   busybox            busybox-static in an empty rootfs: no libc, no Python
# Each is built into NAME.tmp and renamed to NAME when complete, so a cached NAME is whole.
# Needs root, debootstrap (and busybox-static for busybox). The mirror is the one apt uses here.
set -euo pipefail
CACHE="${LAUNCHER_TEST_IMAGES:-$HOME/.cache/launcher-test-images}"
if [ "${1:-}" = "--cache" ]; then CACHE="$2"; shift 2; fi
NAMES=("$@")
[ ${#NAMES[@]} -gt 0 ] || NAMES=(bookworm-minimal bookworm-python3 bullseye-python3 bookworm-nopython busybox)
MIRROR="${DEBIAN_MIRROR:-$(grep -rhoE '^(URIs:|deb) *https?://[^ ]+/debian\b' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null | grep -oE 'https?://[^ ]+' | head -1 || true)}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
mkdir -p "$CACHE"

build() {  # NAME SUITE INCLUDE
    local name=$1 suite=$2 include=$3 dir="$CACHE/$1"
    [ -d "$dir" ] && { echo "$name=$dir"; return; }
    rm -rf "$dir.tmp"
    local start=$SECONDS
    debootstrap --variant=minbase ${include:+--include="$include"} "$suite" "$dir.tmp" "$MIRROR" >"$CACHE/$name.log" 2>&1 \
        || { echo "debootstrap $name failed: see $CACHE/$name.log" >&2; return 1; }
    # Smaller and deterministic: no apt lists or package cache in the image.
    rm -rf "$dir.tmp"/var/cache/apt/archives/*.deb "$dir.tmp"/var/lib/apt/lists/*
    mv "$dir.tmp" "$dir"
    echo "built $name in $((SECONDS - start))s" >&2
    echo "$name=$dir"
}

build_busybox() {
    local dir="$CACHE/busybox"
    [ -d "$dir" ] && { echo "busybox=$dir"; return; }
    local bb; bb=$(command -v busybox || true)
    [ -n "$bb" ] && ! ldd "$bb" >/dev/null 2>&1 || { echo "busybox: needs Debian's busybox-static" >&2; return 1; }
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"/{bin,etc,tmp,root,proc,sys,dev}
    chmod 1777 "$dir.tmp/tmp"
    cp "$bb" "$dir.tmp/bin/busybox"
    for applet in $("$bb" --list); do [ "$applet" = busybox ] || ln -sf busybox "$dir.tmp/bin/$applet"; done
    printf 'root:x:0:0:root:/root:/bin/sh\n' >"$dir.tmp/etc/passwd"
    printf 'root:x:0:\n' >"$dir.tmp/etc/group"
    mv "$dir.tmp" "$dir"
    echo "busybox=$dir"
}

for name in "${NAMES[@]}"; do
    case "$name" in
        bookworm-minimal) build "$name" bookworm python3-minimal ;;
        bookworm-python3) build "$name" bookworm python3 ;;
        bullseye-python3) build "$name" bullseye python3 ;;
        bookworm-nopython) build "$name" bookworm "" ;;
        busybox) build_busybox ;;
        *) echo "unknown image $name (known: bookworm-minimal bookworm-python3 bullseye-python3 bookworm-nopython busybox)" >&2; exit 2 ;;
    esac
done
