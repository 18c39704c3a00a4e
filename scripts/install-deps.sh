#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian 12 machine: Debian packages
# (requirements-apt.txt) and Python packages (requirements.txt). Idempotent: it
# does nothing that is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t apt_packages < <(grep -v '^#' requirements-apt.txt | sed '/^$/d')
missing=()
for package in "${apt_packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

echo "installing Python packages (requirements.txt)"
python3 -m pip install --disable-pip-version-check -r requirements.txt
