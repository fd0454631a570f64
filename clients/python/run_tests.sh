#!/bin/sh
# Installs the package into a fresh venv (offline, Debian's python3) and runs
# its pytest suite against a real rlimitd. ctest runs this (tests/python).
#
#   RLIMITD=build/bin/rlimitd clients/python/run_tests.sh [pytest args...]
#
# RLIMITD            the rlimitd binary (required)
# RLIMIT_PY_WORKDIR  where the venv and the package copy go (default: a temp dir, removed)
# PYTHON             the interpreter (default /usr/bin/python3: Debian's, whose
#                    python3-protobuf/pytest the venv sees)
# Fails (never skips) when a piece is missing.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-/usr/bin/python3}

fail() { echo "run_tests.sh: $*" >&2; exit 1; }

[ -n "${RLIMITD:-}" ] || fail "RLIMITD is not set (the rlimitd binary)"
[ -x "$RLIMITD" ] || fail "RLIMITD=$RLIMITD is not executable"
[ -x "$python" ] || fail "$python not found"
"$python" -c "import venv, ensurepip" 2>/dev/null || fail "$python lacks venv/ensurepip (Debian: python3-venv)"
"$python" -c "import pytest" 2>/dev/null || fail "$python lacks pytest (Debian: python3-pytest)"
"$python" -c "import google.protobuf" 2>/dev/null || fail "$python lacks protobuf (Debian: python3-protobuf)"
"$python" -c "import setuptools" 2>/dev/null || fail "$python lacks setuptools (Debian: python3-setuptools)"

if [ -n "${RLIMIT_PY_WORKDIR:-}" ]; then
  work=$RLIMIT_PY_WORKDIR
  mkdir -p "$work"
  cleanup() { :; }
else
  work=$(mktemp -d /tmp/rlimit-pyvenv.XXXXXX)
  cleanup() { rm -rf "$work"; }
fi
trap cleanup EXIT INT TERM

# Build from a copy: pip builds in the source tree, which must stay clean.
rm -rf "$work/venv" "$work/src"
mkdir -p "$work/src"
cp -R "$here/pyproject.toml" "$here/README.md" "$here/src" "$work/src/"
"$python" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --no-index --no-build-isolation \
  --disable-pip-version-check "$work/src"

# The installed package, not the source tree, is what the tests import.
"$work/venv/bin/python" -c "import rlimit, os, sys; p = rlimit.__file__; sys.exit(0 if p.startswith('$work/venv') else 'rlimit imported from ' + p)"
[ -f "$("$work/venv/bin/python" -c 'import rlimit, os; print(os.path.dirname(rlimit.__file__))')/py.typed" ] \
  || fail "py.typed was not installed"

cd "$work"
RLIMITD=$RLIMITD PYTHONDONTWRITEBYTECODE=1 \
  "$work/venv/bin/python" -m pytest -p no:cacheprovider -q "$here/tests" "$@"
