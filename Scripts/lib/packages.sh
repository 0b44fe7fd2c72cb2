# Scripts/lib/packages.sh — the one routine every script uses to install the
# Debian packages it needs. Source it, then:
#
#   packages_missing PKG...   prints, one a line, each PKG that dpkg does not
#                             have installed (unknown names included); exit 0
#   packages_ensure PKG...    installs the missing ones with apt-get (one
#                             'apt-get update' first, only when something is
#                             missing); sudo when not root. Fails loudly,
#                             naming the packages, when apt cannot install them
#                             or when they are still missing afterwards.
#
# Works under `set -euo pipefail` and without it. Asks dpkg one package at a
# time: `dpkg-query -W` exits 1 for a name it has never seen, which is every
# name on a fresh machine, so its status is never trusted for the whole list.
#
# PACKAGES_LOG_PREFIX (default: the calling script's name) starts each message.

packages__log() { printf '%s: %s\n' "${PACKAGES_LOG_PREFIX:-$(basename -- "$0")}" "$*" >&2; }

# True when dpkg has PKG installed ("install ok installed"), false otherwise,
# also for a name dpkg has never heard of.
packages_installed() {
    local status
    status=$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) || return 1
    [ "$status" = "install ok installed" ]
}

packages_missing() {
    local p
    for p in "$@"; do
        packages_installed "$p" || printf '%s\n' "$p"
    done
    return 0
}

packages_ensure() {
    local missing=() p
    for p in "$@"; do
        packages_installed "$p" || missing+=("$p")
    done
    ((${#missing[@]})) || return 0

    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo=(sudo)
        else
            packages__log "error: missing Debian packages: ${missing[*]} (not root and no sudo: install them with apt-get install ${missing[*]})"
            return 1
        fi
    fi
    packages__log "installing: ${missing[*]}"
    local aptlog
    aptlog=$(mktemp "${TMPDIR:-/tmp}/packages-apt.XXXXXX")
    if ! "${sudo[@]}" apt-get update -qq >"$aptlog" 2>&1; then
        tail -n 20 "$aptlog" >&2
        rm -f "$aptlog"
        packages__log "error: apt-get update failed; cannot install: ${missing[*]}"
        return 1
    fi
    if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "${missing[@]}" >"$aptlog" 2>&1; then
        tail -n 20 "$aptlog" >&2
        rm -f "$aptlog"
        packages__log "error: apt-get could not install: ${missing[*]}"
        return 1
    fi
    rm -f "$aptlog"
    local still=()
    for p in "${missing[@]}"; do
        packages_installed "$p" || still+=("$p")
    done
    if ((${#still[@]})); then
        packages__log "error: still not installed after apt-get: ${still[*]}"
        return 1
    fi
    return 0
}
