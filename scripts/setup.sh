#!/usr/bin/env bash
# Set-up shared by scripts/demo.sh and scripts/test.sh: installs the Debian 12
# packages that are missing (as root, or through sudo), then configures and
# builds everything in Release under build/. Safe to run again: it installs
# nothing twice and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  cmake make g++ pkg-config
  libboost1.81-dev libprotobuf-dev protobuf-compiler
  libspdlog-dev libcli11-dev libtomlplusplus-dev
  libgtest-dev libbenchmark-dev libssl-dev
  redis-server libhiredis-dev
  libgrpc++-dev protobuf-compiler-grpc libyaml-cpp-dev
  nginx python3-protobuf python3-grpcio python3-pytest python3-venv
  python3-setuptools python3-wheel
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"${JOBS:-2}"
