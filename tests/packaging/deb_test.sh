#!/usr/bin/env bash
# The Debian package end to end on this machine: CPack builds it from the
# build tree BUILD_DIR, dpkg installs it, and the installed files are checked:
# the config passes --check-config, systemd-analyze accepts the unit, the
# user exists, the programs run, the library and its CMake package build a
# consumer, and the installed rlimitd, started as `rlimit` the way the unit
# starts it, reports READY=1 on $NOTIFY_SOCKET and logs JSON. A reinstall
# keeps an edited config. Then the package is purged and the machine checked
# to be as it was. Needs root (dpkg); fails with a message otherwise.
#
#   deb_test.sh BUILD_DIR CONSUMER_SOURCE_DIR
set -euo pipefail
build_dir=$(cd "$1" && pwd)
consumer_src=$2

fail() {
  echo "deb_test: FAIL: $*" >&2
  exit 1
}
step() { echo "deb_test: $*"; }

[ "$(id -u)" -eq 0 ] || fail "must run as root: it installs and purges the rlimit .deb with dpkg"
for tool in dpkg dpkg-deb dpkg-shlibdeps cpack systemd-analyze setpriv python3 cmake; do
  command -v "$tool" >/dev/null || fail "$tool is missing (dpkg-dev for dpkg-shlibdeps, systemd for systemd-analyze)"
done
# Leave the machine as found: never touch an rlimit someone installed.
if dpkg-query -W -f='${Status}' rlimit 2>/dev/null | grep -q "installed"; then
  fail "the package rlimit is already installed here; purge it first (dpkg --purge rlimit)"
fi
getent passwd rlimit >/dev/null && fail "a user rlimit already exists; the purge would remove it"
[ -e /etc/rlimit ] && fail "/etc/rlimit already exists"

tmp=$(mktemp -d /tmp/rlimit-deb-test.XXXXXX)
chmod 755 "$tmp"  # the daemon, run as rlimit, reaches the notify socket in here
installed=0
daemon_pid=""
listener_pid=""
cleanup() {
  local rc=$?
  set +e  # every step below runs, whatever fails
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  [ -n "$listener_pid" ] && kill "$listener_pid" 2>/dev/null && wait "$listener_pid" 2>/dev/null
  if [ "$installed" -eq 1 ]; then
    dpkg --purge rlimit >"$tmp/purge.log" 2>&1 || { cat "$tmp/purge.log" >&2; rc=1; }
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
# A timeout (ctest sends SIGTERM first) still purges what was installed.
trap 'exit 143' TERM INT HUP

step "cpack in $build_dir"
(cd "$build_dir" && cpack -G DEB --config CPackConfig.cmake -B "$tmp/cpack" \
  -D CPACK_OUTPUT_FILE_PREFIX="$tmp/out" >"$tmp/cpack.log" 2>&1) || {
  cat "$tmp/cpack.log" >&2
  fail "cpack failed"
}
deb=$(ls "$tmp"/out/rlimit_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { cat "$tmp/cpack.log" >&2; fail "no rlimit_*.deb produced"; }
step "built $(basename "$deb")"

# The package's own metadata.
dpkg-deb --info "$deb" >"$tmp/info"
grep -q "^ Package: rlimit$" "$tmp/info" || fail "package name"
grep -q "^ Depends: .*adduser" "$tmp/info" || fail "no adduser dependency: $(grep Depends "$tmp/info")"
grep -q "^ Depends: .*libgrpc++" "$tmp/info" || fail "shlibdeps found no gRPC: $(grep Depends "$tmp/info")"
dpkg-deb --ctrl-tarfile "$deb" | tar -t >"$tmp/control-files"
for f in ./conffiles ./postinst ./prerm ./postrm ./shlibs ./triggers; do
  grep -qx "$f" "$tmp/control-files" || fail "control file $f missing: $(tr '\n' ' ' <"$tmp/control-files")"
done
dpkg-deb --contents "$deb" | awk '{print $6}' >"$tmp/contents"
bins=$(grep -E '^\./usr/bin/.+' "$tmp/contents" | sort | tr '\n' ' ')
[ "$bins" = "./usr/bin/rlimitctl ./usr/bin/rlimitd " ] || fail "programs in /usr/bin: $bins"

step "dpkg -i"
dpkg -i "$deb" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log" >&2; installed=1; fail "dpkg -i"; }
installed=1

step "config, unit, user, programs"
/usr/bin/rlimitd --check-config --config /etc/rlimit/rlimitd.toml >"$tmp/check" ||
  fail "installed config: $(cat "$tmp/check")"
grep -q '^config OK' "$tmp/check" || fail "--check-config said: $(cat "$tmp/check")"
grep -q '^socket = "/run/rlimit/rlimitd.sock"' /etc/rlimit/rlimitd.toml ||
  fail "the installed config does not put the socket in /run/rlimit"
grep -q '^rules_state_file = "/var/lib/rlimit/rules.toml"' /etc/rlimit/rlimitd.toml ||
  fail "the installed config does not keep applied rules in the unit's StateDirectory"
dpkg-query -W -f='${Conffiles}\n' rlimit | grep -q "/etc/rlimit/rlimitd.toml" ||
  fail "/etc/rlimit/rlimitd.toml is not a conffile"

unit=/lib/systemd/system/rlimitd.service
[ -f "$unit" ] || fail "$unit not installed"
systemd-analyze verify "$unit" >"$tmp/verify" 2>&1 || { cat "$tmp/verify" >&2; fail "systemd-analyze verify"; }
if grep -i "rlimitd" "$tmp/verify"; then fail "systemd-analyze verify warned about the unit"; fi
for line in "Type=notify" "User=rlimit" "ExecStart=/usr/bin/rlimitd --config /etc/rlimit/rlimitd.toml" \
  "ExecStartPre=/usr/bin/rlimitd --check-config --config /etc/rlimit/rlimitd.toml" \
  "RuntimeDirectory=rlimit" "StateDirectory=rlimit" "ProtectSystem=strict" "CapabilityBoundingSet=" \
  "SystemCallFilter=@system-service"; do
  grep -qx "$line" "$unit" || fail "unit lacks $line"
done
systemctl is-enabled rlimitd.service >/dev/null 2>&1 && fail "the package enabled rlimitd.service"

entry=$(getent passwd rlimit) || fail "no user rlimit after install"
IFS=: read -r _ _ uid _ _ home shell <<<"$entry"
[ "$uid" -lt 1000 ] || fail "rlimit is not a system user (uid $uid)"
[ "$home" = /var/lib/rlimit ] || fail "rlimit's home is $home"
case "$shell" in */nologin | */false) ;; *) fail "rlimit's shell is $shell" ;; esac
getent group rlimit >/dev/null || fail "no group rlimit"

/usr/bin/rlimitd --version | grep -q '^rlimitd [0-9]' || fail "rlimitd --version"
/usr/bin/rlimitctl --version >/dev/null || fail "rlimitctl --version"
# Into a file first: with pipefail, grep -q quitting at the first match
# leaves ldconfig to die of SIGPIPE, and the pipeline fails at random.
in_linker_cache() {
  ldconfig -p >"$tmp/ldcache"
  grep -q 'librlimit\.so\.0 ' "$tmp/ldcache"
}
in_linker_cache || fail "librlimit.so.0 not in the linker cache"

step "a consumer built with find_package(rlimit)"
cmake -S "$consumer_src" -B "$tmp/consumer" -DCMAKE_BUILD_TYPE=Release >"$tmp/consumer.log" 2>&1 &&
  cmake --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1 || {
  cat "$tmp/consumer.log" >&2
  fail "consumer project against the installed package"
}

step "the installed daemon as rlimit: READY=1, JSON logs, a check"
# Stand-ins for what systemd provides: a runtime directory the user owns and
# a notify socket.
install -d -o rlimit -g rlimit -m 0750 "$tmp/run"
python3 - "$tmp/notify" "$tmp/notified" <<'PY' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777)
open(sys.argv[2] + ".bound", "w").close()
s.settimeout(30)
data = s.recv(4096)
with open(sys.argv[2], "wb") as f: f.write(data)
PY
listener_pid=$!
for _ in $(seq 100); do [ -e "$tmp/notified.bound" ] && break; sleep 0.1; done
[ -e "$tmp/notified.bound" ] || fail "notify listener did not start"

NOTIFY_SOCKET="$tmp/notify" setpriv --reuid=rlimit --regid=rlimit --init-groups \
  /usr/bin/rlimitd --config /etc/rlimit/rlimitd.toml --socket "$tmp/run/rlimitd.sock" \
  --log-format json 2>"$tmp/daemon.log" &
daemon_pid=$!
for _ in $(seq 100); do [ -s "$tmp/notified" ] && break; sleep 0.1; done
[ "$(cat "$tmp/notified" 2>/dev/null)" = "READY=1" ] || { cat "$tmp/daemon.log" >&2; fail "no READY=1 on NOTIFY_SOCKET"; }
wait "$listener_pid" || true
listener_pid=""
[ -S "$tmp/run/rlimitd.sock" ] || fail "READY=1 came before the socket"
[ "$(stat -c '%U:%G %a' "$tmp/run/rlimitd.sock")" = "rlimit:rlimit 660" ] ||
  fail "socket is $(stat -c '%U:%G %a' "$tmp/run/rlimitd.sock")"
"$tmp/consumer/consumer" "$tmp/run/rlimitd.sock" | grep -qx "allowed ok" || fail "consumer's check"
/usr/bin/rlimitctl --socket "$tmp/run/rlimitd.sock" status >/dev/null || fail "rlimitctl status"
kill -TERM "$daemon_pid"
rc=0
wait "$daemon_pid" || rc=$?
daemon_pid=""
[ "$rc" -eq 0 ] || { cat "$tmp/daemon.log" >&2; fail "rlimitd exited $rc on SIGTERM"; }
python3 - "$tmp/daemon.log" <<'PY' || fail "the daemon's log is not one JSON object per line"
import json, re, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
assert lines, "no log lines"
for line in lines:
    obj = json.loads(line)
    assert sorted(obj) == ["level", "msg", "ts"], line
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", obj["ts"]), line
assert any("listening on" in json.loads(l)["msg"] for l in lines), lines
assert any(json.loads(l)["msg"] == "rlimitd stopped" for l in lines), lines
PY

step "reinstall keeps an edited config"
echo "# edited by deb_test" >>/etc/rlimit/rlimitd.toml
dpkg -i "$deb" >"$tmp/reinstall.log" 2>&1 || { cat "$tmp/reinstall.log" >&2; fail "reinstall"; }
grep -q "^# edited by deb_test$" /etc/rlimit/rlimitd.toml || fail "the reinstall replaced the edited config"

step "dpkg --purge"
dpkg --purge rlimit >"$tmp/purge.log" 2>&1 || { cat "$tmp/purge.log" >&2; fail "purge"; }
installed=0
for path in /usr/bin/rlimitd /usr/bin/rlimitctl /etc/rlimit /var/lib/rlimit "$unit"; do
  [ -e "$path" ] && fail "$path left after purge"
done
getent passwd rlimit >/dev/null && fail "user rlimit left after purge"
getent group rlimit >/dev/null && fail "group rlimit left after purge"
in_linker_cache && fail "librlimit.so.0 still in the linker cache"
step "ok"
