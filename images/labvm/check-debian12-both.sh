#!/bin/bash
# Both Debian 12 guest checks in one boot (scripts/labvm debian12-checks): first the package's
# (check-deb.sh: a guest holding only the .deb, nothing in /usr/local), then the package is purged,
# this checkout's build (packed under /opt/testbedctl/build-install, off PATH until now) goes
# into /usr/local, and the 6.1 kernel's TCP fallback is checked (check-debian12.sh). Each check's
# output and exit status land in results/<name>.log and results/<name>.rc, which the host judges
# one by one (scripts/labvm verdict; ctest's labvm_deb_check and labvm_check_debian12). Exit 0
# when both passed.
set -uo pipefail
cd /opt/testbedctl
here=/opt/testbedctl/images/labvm
res=${TESTBEDCTL_RESULTS_DIR:-/opt/testbedctl/results}
mkdir -p "$res"
# one NAME CMD...: runs CMD, its output to the console and results/NAME.log, its status to NAME.rc
one() {
  local name=$1 rc
  shift
  echo "== $name: $* =="
  "$@" 2>&1 | tee "$res/$name.log"
  rc=${PIPESTATUS[0]}
  echo "$rc" >"$res/$name.rc"
  echo "== $name: exit $rc =="
  return "$rc"
}
fails=0
one deb-check "$here/check-deb.sh" || fails=$((fails + 1))
dpkg --purge testbedctl >/dev/null 2>&1
if [ -d /opt/testbedctl/build-install/usr/local ]; then
  cp -a /opt/testbedctl/build-install/usr/local/. /usr/local/
  hash -r
  one check-debian12 "$here/check-debian12.sh" || fails=$((fails + 1))
else
  echo "no build in /opt/testbedctl/build-install" | tee "$res/check-debian12.log"
  echo 1 >"$res/check-debian12.rc"
  fails=$((fails + 1))
fi
[ $fails = 0 ]
