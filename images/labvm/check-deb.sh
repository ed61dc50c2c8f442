#!/bin/bash
# Runs inside a clean Debian 12 guest (scripts/labvm deb-check): installs the testbedctl .deb
# copied to /opt/testbedctl and runs it from the installed paths only — no build tree and no
# /usr/local copy exist in this guest. Exit 0 when every check passed.
set -uo pipefail
fail=0
ok() { echo "deb-check ok: $*"; }
bad() { echo "deb-check FAILED: $*"; fail=1; }
deb=$(ls /opt/testbedctl/testbedctl_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || { echo "deb-check FAILED: no .deb in /opt/testbedctl"; exit 1; }
[ ! -e /usr/local/bin/testbedctl ] || bad "a /usr/local/bin/testbedctl is present (the guest must hold only the package)"
if dpkg -i "$deb"; then ok "dpkg -i $(basename "$deb")"; else bad "dpkg -i (its Depends missing from the guest?)"; exit 1; fi
dpkg -s testbedctl | grep -q '^Status: install ok installed' && ok "dpkg says installed" || bad "dpkg -s"
[ "$(command -v testbedctl)" = /usr/bin/testbedctl ] && ok "testbedctl is /usr/bin/testbedctl" || bad "testbedctl on PATH is $(command -v testbedctl)"
v=$(testbedctl --version)
pkgv=$(dpkg-query -W -f '${Version}' testbedctl)
commit=$(sed -n 's/.*(commit \([0-9a-f]*\).*/\1/p' <<<"$v")
echo "deb-check: --version: $v; package version $pkgv"
[ -n "$commit" ] && [[ $pkgv == *"+git$commit"* ]] && ok "--version's commit $commit is the package's version" || bad "--version ($v) and package version ($pkgv) disagree"
for m in testbedctl testbedctl-up testbedctl-bench testbedctl-run tb-delayd; do
  f=/usr/share/man/man1/$m.1.gz
  [ -s "$f" ] && zcat "$f" | grep -q '^\.SH' && ok "man page $m(1)" || bad "man page $f missing or empty"
done
c=/usr/share/bash-completion/completions/testbedctl
if [ -s "$c" ]; then
  got=$(bash -c "source $c; COMP_WORDS=(testbedctl be); COMP_CWORD=1; _testbedctl; echo \${COMPREPLY[*]}")
  [ "$got" = bench ] && ok "bash completion: 'testbedctl be' -> bench" || bad "bash completion gave '$got'"
else
  bad "no bash completion at $c"
fi
[ -s /usr/share/doc/testbedctl/copyright ] && ok "copyright" || bad "no copyright file"
testbedctl doctor && ok "doctor" || bad "doctor (exit $?)"
mini=/usr/share/testbedctl/scenarios/mini.toml
if testbedctl up "$mini" --name debck; then
  ok "up $mini"
  testbedctl status debck && ok "status" || bad "status (exit $?)"
  [ "$(testbedctl exec debck dc/s0/g0 -- cat /proc/self/net/dev | grep -c rail)" -ge 1 ] && ok "exec (a GPU's namespace has its rail)" || bad "exec"
  testbedctl down debck && ok "down" || bad "down (exit $?)"
  left=$(ip netns list | grep -c debck || true)
  [ "$left" = 0 ] && ok "no namespace left" || bad "$left namespaces left after down"
else
  bad "up $mini"
fi
[ "$fail" = 0 ] && echo "deb-check: all passed" || echo "deb-check: FAILED"
exit "$fail"
