#!/usr/bin/env bash
# Installs everything sluice needs to build and test, from Debian packages only.
# Safe to run again: apt skips what is already installed.
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  liburing-dev libcurl4-openssl-dev libssl-dev
  nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev libcli11-dev
  libreadline-dev tmux
  universal-ctags  # scripts/long_functions.sh (ctest long_functions)
  systemd  # systemd-analyze: tests/deploy checks deploy/sluice.service (no running systemd needed)
  nginx-light
  clang libclang-rt-dev
  python3-torch python3-numpy
)
# Node.js and npm drive the npm test clients; a machine may already have them from elsewhere.
command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
