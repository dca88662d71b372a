#!/usr/bin/env bash
# make test's first step: the browser tests drive Debian's Chromium (tests/conftest.py: CHROMIUM_PATH, default
# /usr/bin/chromium). Where it is missing, install Debian's `chromium` with apt-get as .ci/run does, where this
# machine lets us (root, or sudo without a password); otherwise stop at once, naming the command that installs it,
# before make test builds anything (a missing browser once failed 35 tests after 11 minutes of vLLM tests).
set -euo pipefail

chromium=${CHROMIUM_PATH:-/usr/bin/chromium}
have() { [[ -x $chromium ]] || command -v "$chromium" >/dev/null 2>&1; }
have && exit 0

if [[ $chromium == /usr/bin/chromium ]] && command -v apt-get >/dev/null 2>&1; then
  if [[ $(id -u) == 0 ]]; then as_root=(); elif sudo -n true 2>/dev/null; then as_root=(sudo -n); else as_root=(none); fi
  if [[ ${as_root[0]:-} != none ]]; then
    echo "make test: no Chromium at $chromium: installing Debian's chromium with apt-get (as .ci/run does)"
    export DEBIAN_FRONTEND=noninteractive
    "${as_root[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq \
      && "${as_root[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium >/dev/null || true
    have && exit 0
  fi
fi
echo "make test: no Chromium at $chromium, which the browser tests drive; install it with: sudo apt-get install -y" \
     "chromium (Debian's package), or set CHROMIUM_PATH to a Chromium binary" >&2
exit 1
