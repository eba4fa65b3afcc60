#!/usr/bin/env bash
# Installs Foresight's build dependencies from Debian 12's registry (idempotent, non-interactive)
# and builds Foresight in ./build (optimized): everything, or only the ninja targets given
# (./scripts/setup.sh cli/foresight builds just the CLI). Run as root, or as a user who may sudo.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ pkg-config python3 meson ninja-build libboost-graph-dev libeigen3-dev libfmt-dev
          nlohmann-json3-dev catch2 libcli11-dev zlib1g-dev
          protobuf-compiler libprotobuf-dev            # Chakra execution traces
          python3-dev pybind11-dev python3-pytest python3-pandas  # the Python module and its tests
          libopenmpi-dev openmpi-bin                   # distributed sweeps (foresight sweep --mpi)
          clang)                                       # the sanitizer build of the tests, the fuzzers
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  echo "setup: installing ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release
fi
ninja -C build "$@"
