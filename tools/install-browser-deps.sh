#!/usr/bin/env bash
# Installs Debian's Chromium for the real-browser test (never a downloaded browser build).
# Without root or apt-get it only reports; the browser tests then skip with that reason.
set -uo pipefail
have_emoji_font() { [ -e /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf ]; }
if [ -x /usr/bin/chromium ] && have_emoji_font; then
  echo "chromium: $(/usr/bin/chromium --version 2>/dev/null | head -1)"
  exit 0
fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  [ -x /usr/bin/chromium ] && { echo "chromium present; no emoji font (fonts-noto-color-emoji): screenshots show boxes for ✅"; exit 0; }
  echo "chromium not installed and cannot apt-get it here (need root + apt-get); browser tests will skip"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
start=$(date +%s)
apt-get update -qq >/dev/null 2>&1 || true
# the emoji font: the course's ✅ / ❌ are drawn as in a learner's browser (screenshots), not as boxes
if apt-get install -y -qq chromium fonts-noto-color-emoji >/dev/null 2>&1; then
  echo "chromium installed in $(( $(date +%s) - start ))s: $(/usr/bin/chromium --version 2>/dev/null | head -1)"
else
  echo "apt-get install chromium failed; browser tests will skip"
fi
exit 0
