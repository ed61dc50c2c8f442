#!/bin/bash
# The lab VM integration test (scripts/labvm check; CI runs it through ctest's `vm` label). Runs
# inside the guest, whose kernel has rdma_rxe and sch_netem, and checks what this host's kernel
# cannot: the doctor sees netem and a working rxe; `up` of mini makes the rxe devices itself (one
# per GPU rail NIC, RoCE v2 GID, RoCE MTU 4096); bench over --transport rdma passes with
# #wrong = 0 (and over tcp, side by side: functional ratios under TCG, not performance figures);
# a rank killed mid-run fails the others over RDMA within their timeout; verify passes on the
# real netem backend; down removes the devices. Prints CHECK PASS / CHECK FAIL and exits 0 / 1.
set -uo pipefail
# Checks read captured output with here-strings, never `cmd | grep -q`: grep -q exits at its first
# match, the writer can then die of SIGPIPE, and pipefail turns that into a failed check.
cd /opt/testbedctl
fails=0
pass() { echo "check: ok   - $*"; }
bad() {
  echo "check: FAIL - $*"
  fails=$((fails + 1))
}
t0=$SECONDS
step() { echo; echo "check: [$((SECONDS - t0)) s] $*"; }

step "doctor"
doc=$(testbedctl doctor 2>&1)
echo "$doc" | grep -E '^(netem|rdma_netlink|rdma_rxe) '
grep -qE '^netem +yes' <<<"$doc" && pass "doctor: netem" || bad "doctor does not report netem"
grep -qE '^rdma_rxe +yes +a 64-byte RC send crossed' <<<"$doc" && pass "doctor: rxe transfer between namespaces" ||
  bad "doctor does not report a working rxe"

step "up mini"
out=$(testbedctl up scenarios/mini.toml 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || { bad "up mini exit $rc"; echo "CHECK FAIL"; exit 1; }
grep -q '^shaping: netem' <<<"$out" && pass "up: netem backend" || bad "up did not pick netem"
grep -q '^rdma: Soft-RoCE on the rail' <<<"$out" && pass "up: rxe on the rail" || bad "up made no rxe devices"
n=0
for d in /sys/class/infiniband/tb-mini-*; do
  [ -e "$d" ] || continue
  dev=${d##*/}
  n=$((n + 1))
  mtu=$(ibv_devinfo -d "$dev" | awk '/active_mtu/{print $2}')
  [ "$mtu" = 4096 ] || bad "$dev active_mtu $mtu, not 4096 (rail MTU 4200)"
done
[ $n = 4 ] && pass "4 rxe devices, active_mtu 4096" || bad "$n rxe devices, not 4"
st=$(testbedctl status mini --json)
grep -q '"gid_index"' <<<"$st" && pass "status lists the devices with their GID" || bad "status --json has no rxe devices"
testbedctl status mini | sed -n '3,5p'

step "bench over rdma and tcp (TCG: functional ratios, not performance)"
for tr in rdma tcp; do
  extra=()
  [ $tr = rdma ] && extra=(--qps 2)
  testbedctl bench mini allreduce -b 4K -e 1M -f 4 -n 5 -w 1 --transport $tr "${extra[@]}" \
    --json results/allreduce-$tr.json | tee /tmp/bench-$tr.txt
  rc=${PIPESTATUS[0]}
  [ $rc = 0 ] && grep -q '# Out of bounds values : 0 OK' /tmp/bench-$tr.txt &&
    pass "allreduce over $tr: #wrong 0" || bad "allreduce over $tr: exit $rc"
done
grep -q '^#  transport rdma: 4 of 4 rail pair' /tmp/bench-rdma.txt && pass "the rdma report names its transport" ||
  bad "the rdma report does not say rdma"
# More QPs per peer on one pair.
testbedctl bench mini allreduce -b 256K -e 1M -f 4 -n 3 -w 1 --transport rdma --qps 4 \
  --ranks dc/s0/g0,dc/s1/g0 | tee /tmp/bench-qps.txt
rc=${PIPESTATUS[0]}
[ $rc = 0 ] && grep -q '4 QP(s)/peer' /tmp/bench-qps.txt && pass "allreduce over 4 QPs per peer" ||
  bad "allreduce over 4 QPs per peer: exit $rc"
for coll in allgather reducescatter alltoall broadcast; do
  testbedctl bench mini $coll -b 64K -e 64K -n 3 -w 1 --transport rdma >/tmp/c.txt 2>&1
  rc=$?
  [ $rc = 0 ] && pass "$coll over rdma" || { cat /tmp/c.txt; bad "$coll over rdma: exit $rc"; }
done
echo "check: allreduce busbw, rdma vs tcp on the same lab and links (TCG guest):"
paste <(awk '/^ +[0-9]+ /{print $1, $(NF-2)}' /tmp/bench-rdma.txt) \
  <(awk '/^ +[0-9]+ /{print $(NF-2)}' /tmp/bench-tcp.txt) |
  awk '{printf "check:   %10s B  rdma %8s GB/s  tcp %8s GB/s\n", $1, $2, $3}'

step "run over rdma (steady workload, no faults in mini)"
testbedctl run mini --transport rdma --size 256K >/tmp/run.txt 2>&1
rc=$?
grep -E 'transport|RECOVERY|ok' /tmp/run.txt | head -5
sum=$(ls -d results/mini/run-*/summary.json 2>/dev/null | tail -1)
[ $rc = 0 ] && [ -n "$sum" ] && grep -q '"transport": "rdma: 4 of 4 rail pair' "$sum" &&
  pass "run --transport rdma: exit 0, summary says rdma" ||
  { tail -20 /tmp/run.txt; bad "run --transport rdma: exit $rc"; }

step "a killed rank over rdma"
testbedctl bench mini allreduce -b 64M -e 64M -n 50 -w 0 --transport rdma --timeout 20 \
  >/tmp/kill.txt 2>&1 &
bp=$!
victim=""
for _ in $(seq 1 100); do
  victim=$(pgrep -x tb-rank | head -1)
  [ -n "$victim" ] && break
  sleep 0.2
done
sleep 3
[ -n "$victim" ] && kill -9 "$victim"
ks=$SECONDS
wait $bp
rc=$?
tail -5 /tmp/kill.txt
[ $rc = 1 ] && [ $((SECONDS - ks)) -lt 40 ] && pass "killed rank: bench exit 1 in $((SECONDS - ks)) s" ||
  bad "killed rank: bench exit $rc after $((SECONDS - ks)) s"

# The RdmaComm unit tests that need a device (they skip on a host without one): one rxe device
# on a veth in this namespace; the ranks are threads that reach each other through its address.
# scripts/labvm check always copies unit_tests in; its absence is a failed check, never a skip.
if [ ! -x ./unit_tests ]; then
  bad "RdmaVerbs unit tests: no ./unit_tests in the guest (scripts/labvm check copies it from the build)"
else
  step "unit tests over a real rxe device (RdmaVerbs.*)"
  ip link add tbuva type veth peer name tbuvb
  ip addr add 198.18.250.1/24 dev tbuva
  ip link set tbuva up
  ip link set tbuvb up
  rdma link add tbunit type rxe netdev tbuva
  TB_RDMA_TEST_ADDR=198.18.250.1 timeout 300 ./unit_tests --gtest_filter='RdmaVerbs.*' \
    --gtest_brief=1 >/tmp/unit.txt 2>&1
  rc=$?
  tail -4 /tmp/unit.txt
  [ $rc = 0 ] && ! grep -q SKIPPED /tmp/unit.txt && grep -q 'PASSED.*3 tests' /tmp/unit.txt &&
    pass "RdmaVerbs unit tests on rxe" || { cat /tmp/unit.txt; bad "RdmaVerbs unit tests: exit $rc"; }
  rdma link delete tbunit
  ip link del tbuva
fi

step "down mini"
testbedctl down mini
left=$(ls /sys/class/infiniband 2>/dev/null | grep -c '^tb-mini-')
[ "$left" = 0 ] && pass "down removed the rxe devices" || bad "$left rxe devices left after down"
[ -z "$(ip netns list | grep tb-mini)" ] && pass "no namespaces left" || bad "namespaces left after down"

# mini's scaled rates are beyond a TCG guest's CPU; images/labvm/netem.toml has figures it can
# carry and delays verify checks.
step "verify on the real netem backend (images/labvm/netem.toml)"
testbedctl up images/labvm/netem.toml --rdma none | grep -E '^(lab|shaping)'
qd=$(ip netns exec tb-vmnetem-dc-s0-g0 tc qdisc show dev rail 2>&1)
grep -q netem <<<"$qd" && pass "the rail carries a netem qdisc" ||
  bad "no netem qdisc on the rail (tc qdisc show dev rail: ${qd:-nothing})"
# verify's tolerances (delay 3% + 0.2 ms) are for a real kernel. In a TCG guest every probe costs
# emulated CPU and timers fire late, by an amount that follows the host's load: the same lab read
# its 10 ms netem delay as 8.5 ms in one run and 13.7 ms (2 ms as 4.0, 20 ms as 25.8) in the next,
# and verify's base over lo, which (mean RTT - base)/2 subtracts, swung between 2 and 9 ms from
# one class to the next. None of that is netem. So the VM judges what a guest can show: verify's
# own verdicts on rate and loss; that netem delivers nothing early (mean RTT >= 2 x (97% of the
# delay - 0.2 ms), a property, no base subtracted); and, for delays of 10 ms and more, that the
# delay is not applied twice (mean RTT < 4 x 97% of it; the guest's overhead seen so far is at most
# 11 ms of RTT). Jitter is shown, not judged.
testbedctl verify vmnetem --quick | tee /tmp/verify.txt
judged=$(awk '
  $1 == "rate" || $1 == "loss" { n++; if ($0 ~ /FAIL:/) { bad++; print "  " $0 } }
  $1 == "delay" && $2 ~ /ms$/ { c = $2 + 0; row = $0 }
  $1 == "delay:" && $4 == "(mean" && c >= 1 {
    rtt = $6 + 0; n++
    if (rtt < 2 * (c * 0.97 - 0.2) || (c >= 10 && rtt >= 4 * c * 0.97)) {
      bad++; print "  " row " | " $0 }
    c = 0 }
  END { printf "%d %d\n", n, bad }' /tmp/verify.txt | tail -1)
read -r n nbad <<<"$judged"
[ "${n:-0}" -ge 8 ] && [ "${nbad:-1}" = 0 ] &&
  pass "verify on netem: $n rate/loss/delay checks hold (no delay early, none applied twice)" ||
  bad "verify on netem: ${nbad:-?} of ${n:-0} rate/loss/delay checks out of bounds"
testbedctl down vmnetem

echo
if [ $fails = 0 ]; then
  echo "CHECK PASS ($((SECONDS - t0)) s)"
  exit 0
fi
echo "CHECK FAIL: $fails check(s) failed"
exit 1
