#!/bin/bash
# The lab VM check on Debian 12's own 6.1 kernel (scripts/labvm check --kernel debian12): rxe
# makes devices there but RoCE between namespaces does not work, so the doctor must say so, `up`
# must make no devices and say why, bench --transport rdma must be refused with that reason
# (exit 2), and TCP must still pass; a lossless rail's incast drops nothing at the ToR
# (images/labvm/incast.sh, as in the backports guest). Prints CHECK PASS / CHECK FAIL and exits 0 / 1.
set -uo pipefail
cd /opt/testbedctl
fails=0
pass() { echo "check: ok   - $*"; }
bad() {
  echo "check: FAIL - $*"
  fails=$((fails + 1))
}
echo "check: kernel $(uname -r)"
doc=$(testbedctl doctor 2>&1)
echo "$doc" | grep -E '^(netem|rdma_netlink|rdma_rxe) '
grep -qE '^rdma_netlink +yes' <<<"$doc" && pass "doctor: RDMA netlink answers" || bad "doctor: no RDMA netlink"
grep -qE '^rdma_rxe +no +rxe devices were made in two namespaces, but' <<<"$doc" &&
  pass "doctor: rxe made but RoCE between namespaces fails, and says so" || bad "doctor's rxe verdict is not the 6.1 one"
out=$(testbedctl up scenarios/mini.toml 2>&1)
echo "$out" | grep -E '^(lab|rdma)'
grep -q '^rdma: none, TCP (doctor.s rdma_rxe probe: rxe devices were made' <<<"$out" &&
  pass "up: no rxe, and why" || bad "up does not say why the rail has no RDMA"
[ -z "$(ls /sys/class/infiniband 2>/dev/null)" ] && pass "no RDMA devices left by the probe or up" ||
  bad "RDMA devices exist: $(ls /sys/class/infiniband)"
testbedctl bench mini allreduce -b 64K -e 64K -n 2 --transport rdma >/tmp/r.txt 2>&1
rc=$?
cat /tmp/r.txt
[ $rc = 2 ] && grep -q 'has no RDMA on its rail (doctor' /tmp/r.txt && pass "bench --transport rdma refused with the reason" ||
  bad "bench --transport rdma: exit $rc"
testbedctl bench mini allreduce -b 64K -e 256K -f 4 -n 2 -w 1 >/tmp/t.txt 2>&1
rc=$?
tail -3 /tmp/t.txt
[ $rc = 0 ] && grep -q 'lab rdma: none' /tmp/t.txt && pass "bench over tcp passes and names the lab's rdma verdict" ||
  bad "bench over tcp: exit $rc"
testbedctl down mini
# The lossless rail on this kernel too (images/labvm/incast.sh): 0 drops at the ToR with pauses,
# drops with the same lab drop-tail.
echo "check: a lossless rail on the 6.1 kernel: an incast drops nothing at the ToR"
source images/labvm/incast.sh
incast_check d12i
echo "check: ECN on the VPC in the 6.1 kernel: RED marks CE"
ecn_check d12i
if [ $fails = 0 ]; then
  echo "CHECK PASS"
  exit 0
fi
echo "CHECK FAIL: $fails check(s) failed"
exit 1
