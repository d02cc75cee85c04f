#!/usr/bin/env bash
# Installs Debian's Chromium for the real-browser test (never a downloaded browser build).
# Without root or apt-get it only reports; the browser tests then skip with that reason.
set -uo pipefail
if [ -x /usr/bin/chromium ]; then
  echo "chromium: $(/usr/bin/chromium --version 2>/dev/null | head -1)"
  exit 0
fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium not installed and cannot apt-get it here (need root + apt-get); browser tests will skip"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
start=$(date +%s)
apt-get update -qq >/dev/null 2>&1 || true
if apt-get install -y -qq chromium >/dev/null 2>&1; then
  echo "chromium installed in $(( $(date +%s) - start ))s: $(/usr/bin/chromium --version 2>/dev/null | head -1)"
else
  echo "apt-get install chromium failed; browser tests will skip"
fi
exit 0
