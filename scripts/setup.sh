#!/usr/bin/env bash
# Installs everything dropbench needs to build and test, idempotently (Debian/Ubuntu, as root or with sudo).
# The CUDA toolkit (nvcc 12.4+, cuBLASLt, NVTX3, CUPTI) must already be installed (e.g. /usr/local/cuda).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi
pkgs=(cmake ninja-build g++ git libcli11-dev libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev googletest
      python3 python3-matplotlib python3-numpy python3-jsonschema)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! command -v nvcc >/dev/null; then
  for d in /usr/local/cuda/bin /usr/local/cuda-13*/bin /usr/local/cuda-12*/bin; do
    if [ -x "$d/nvcc" ]; then export PATH="$d:$PATH"; break; fi
  done
fi
if ! command -v nvcc >/dev/null; then
  echo "setup: nvcc not found: install the CUDA toolkit (12.4 or newer) so that nvcc is on PATH or in /usr/local/cuda/bin" >&2
  exit 1
fi
echo "setup: ok ($(nvcc --version | tail -1))" >&2
