#!/usr/bin/env bash
# Chromium for tests/test_serve_browser.py (Playwright drives it; Playwright's own browser download needs more
# than the package registries): Debian's package through apt-get, with sudo when not root. Does nothing when a
# `chromium` is on the PATH already. README command 2 runs it first; so does .ci/run, which runs that command.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_browser.sh: no chromium on the PATH and no apt-get to install it: install Chromium with this" \
         "system's package manager (the browser tests need a 'chromium' command)" >&2
    exit 1
fi
SUDO=$([ "$(id -u)" -eq 0 ] || echo sudo)
echo "install_browser.sh: installing Debian's chromium for the browser tests (apt-get${SUDO:+, with sudo})" >&2
$SUDO apt-get update -q
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
if ! command -v chromium >/dev/null 2>&1; then
    echo "install_browser.sh: apt-get installed chromium, but no 'chromium' command is on the PATH" >&2
    exit 1
fi
