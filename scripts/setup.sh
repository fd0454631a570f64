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
  python3-setuptools python3-wheel prometheus
  dpkg-dev systemd
  clang libclang-rt-14-dev  # scripts/fuzz.sh: clang and its libFuzzer
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
  # nginx, redis-server and prometheus are test tools here, started by the
  # tests on their own ports: keep their packages from starting system
  # services (a policy-rc.d that says no, unless the machine has one).
  made_policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
    $sudo chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  status=0
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
    status=$?
  [ -n "$made_policy" ] && $sudo rm -f /usr/sbin/policy-rc.d
  [ "$status" -eq 0 ] || exit "$status"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"${JOBS:-2}"
