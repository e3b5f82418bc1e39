#!/usr/bin/env bash
# Installs the Debian 12 packages tinyllm needs to build and test. Idempotent: runs
# `apt-get update` and `apt-get install` only when a package is missing.
set -euo pipefail

packages=(
  cmake g++ make pkg-config git ca-certificates
  clang-19 lld-19 llvm-19-dev liblld-19-dev libclang-rt-19-dev
  libcpp-httplib-dev nlohmann-json3-dev libusb-1.0-0-dev libsentencepiece-dev catch2
  libssl-dev zlib1g-dev libzstd-dev libedit-dev libffi-dev libxml2-dev libcurl4-openssl-dev
  linux-libc-dev libdrm-dev libhsa-runtime-dev
  unicode-data python3
)
# Test-only extras: the browser test, the official OpenAI client (npm) and the tokenizer/golden tools.
if [ "${1:-}" = "--test" ]; then
  packages+=(chromium python3-numpy bzip2)  # bzip2: the NFC test reads unicode-data's NormalizationTest.txt.bz2
  # Node.js may come from elsewhere (e.g. nodesource, which conflicts with Debian's npm): keep it.
  command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "[install-deps] installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
