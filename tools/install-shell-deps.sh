#!/usr/bin/env bash
# Installs Debian's zsh and fish for the completion tests (tests/cli/test_cli_terminal.py runs both shells).
# Without root or apt-get it only reports; those tests then skip, saying which shell is missing.
set -uo pipefail
if command -v zsh >/dev/null 2>&1 && command -v fish >/dev/null 2>&1; then
  echo "shells: $(zsh --version | head -1); $(fish --version 2>&1 | head -1)"
  exit 0
fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "zsh/fish not installed and cannot apt-get them here (need root + apt-get); their completion tests will skip"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
start=$(date +%s)
apt-get update -qq >/dev/null 2>&1 || true
if apt-get install -y -qq zsh fish >/dev/null 2>&1; then
  echo "zsh and fish installed in $(( $(date +%s) - start ))s"
else
  echo "apt-get install zsh fish failed; their completion tests will skip"
fi
exit 0
