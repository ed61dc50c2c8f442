#!/bin/bash
# The lab VM integration test (scripts/labvm check; CI runs it through ctest's `vm` label). Runs
# inside the guest, whose kernel has rdma_rxe and sch_netem, and checks what this host's kernel
# cannot: the doctor sees netem and a working rxe; `up` of mini makes the rxe devices itself (one
# per GPU rail NIC, RoCE v2 GID, RoCE MTU 4096); bench over --transport rdma passes with
# #wrong = 0 (and over tcp, side by side: functional ratios under TCG, not performance figures);
# a rank killed mid-run fails the others over RDMA within their timeout; down removes the
# devices; a lab on the real netem backend carries netem qdiscs (verify judges their figures in
# the timing boot: timing.sh). On the netem backend (netem.toml), `link set`
# and `link reset` and the `fault latency` / `fault loss` verbs change the netem qdisc the kernel
# reads back, each fault is an event and Ctrl-C reverts it, and 100% loss stops a ping. On a
# lossless rail (incast.toml, issue 32) 2 GPUs x 2 streams into one port drop nothing at the ToR
# while the congestion agent pauses the feeders, and the same lab drop-tail drops. On a
# dual-ToR rail (dualtor.toml) every GPU port gets its own rxe device and bench over rdma with
# --qps and the --ib-* flags passes, also with a GPU's other ToR port down (not the port in use:
# see there why). With FRR
# (bfd.toml) zebra, bfdd and bgpd run in both transit routers, BFD is up on both WAN links,
# `link down` of the primary and a blackhole on it (which only BFD sees) move the route to the
# backup while a ping across keeps its replies, the route comes back, and down leaves no FRR
# process. Prints CHECK PASS / CHECK FAIL and exits 0 / 1.
#
# One argument picks a part (scripts/labvm check --part): `beside` (doctor, the netem backend's
# live changes, the lossless incast: TCP only, judged by what the kernel reads back and counts)
# and `alone` (RDMA over rxe on mini and dual-ToR, and what a starved guest's clock would break
# under plain TCG: netem's jitter order and medians, BFD's 300 ms x 3 failover, the QoS classes'
# RTTs); `all` (the default) both, in this order. The suite runs `all` under -icount with one
# vCPU beside the other tiers (labvm_check, CMakeLists.txt); under plain TCG, beside load, rxe's
# QPs failed with a local QP error (IB_WC_LOC_QP_OP_ERR), hence `alone` for a plain-TCG guest.
set -uo pipefail
part=${1:-all}
case $part in all | beside | alone) ;; *) echo "check.sh: part '$part' is not all, beside or alone" >&2; exit 2 ;; esac
want() { [ "$part" = all ] || [ "$part" = "$1" ]; }
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
# Helpers both parts use (the netem lab's events and qdiscs; BFD's and the faults' events).
ens=/run/testbedctl/vmnetem/events.jsonl
# The delay (in ms) and the loss of the netem qdisc on the rail of dc/s0/g0 (NS IF for the
# other end).
netem_of() {
  ip netns exec "${1:-tb-vmnetem-dc-s0-g0}" tc qdisc show dev "${2:-rail}" | awk '
    /netem/ { d = "none"; l = "0%"
      for (i = 1; i < NF; i++) {
        if ($i == "delay") { v = $(i + 1); m = v + 0
          if (v ~ /us$/) m /= 1000; else if (v ~ /[0-9]s$/) m *= 1000; d = sprintf("%gms", m) }
        if ($i == "loss") l = $(i + 1) }
      print d, l; exit }'
}
# Waits up to 60 s for the Nth EVENT in the events file FILE; 0 when it came.
wait_event_in() { # FILE EVENT N
  local i
  for i in $(seq 1 120); do
    [ "$(grep -c "\"event\":\"$2\"" "$1" 2>/dev/null)" -ge "$3" ] && return 0
    sleep 0.5
  done
  return 1
}
wait_event() { wait_event_in "$ens" "$@"; }

if want beside; then
step "doctor"
doc=$(testbedctl doctor 2>&1)
echo "$doc" | grep -E '^(netem|rdma_netlink|rdma_rxe) '
grep -qE '^netem +yes' <<<"$doc" && pass "doctor: netem" || bad "doctor does not report netem"
grep -qE '^rdma_rxe +yes +a 64-byte RC send crossed' <<<"$doc" && pass "doctor: rxe transfer between namespaces" ||
  bad "doctor does not report a working rxe"
fi # beside: doctor

if want alone; then
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
# Credit flow control (collective/rdma/stream.h): no SEND meets an empty receive queue, so the
# devices send no receiver-not-ready NAK (bench reads rxe's hw_counters before and after).
rnr=$(tr -d ' \n' <results/allreduce-rdma.json | grep -o '"rnr_naks":[0-9a-z]*' | cut -d: -f2)
[ "$rnr" = 0 ] && pass "allreduce over rdma: 0 receiver-not-ready NAKs (hw_counters)" ||
  bad "allreduce over rdma: rnr_naks '$rnr' (want 0)"
# AllReduce (ring, hd, tree) and AllToAll at several sizes, 1 KiB to 4 MiB: #wrong 0 and 0 RNR
# NAKs each. (Before rdma.cc ignored a late RDMA_CM_EVENT_UNREACHABLE on an established QP, hd
# and tree failed here on a loaded host, main's tb-rank too.)
for spec in "allreduce ring" "allreduce hd" "allreduce tree" "alltoall -"; do
  read -r coll al <<<"$spec"
  algo=()
  [ "$al" != - ] && algo=(--algo "$al")
  testbedctl bench mini "$coll" -b 1K -e 4M -f 8 -n 2 -w 1 --transport rdma "${algo[@]}" \
    --json "results/$coll-$al-rdma.json" >/tmp/c.txt 2>&1
  rc=$?
  rnr=$(tr -d ' \n' <"results/$coll-$al-rdma.json" 2>/dev/null | grep -o '"rnr_naks":[0-9a-z]*' | cut -d: -f2)
  [ $rc = 0 ] && grep -q '# Out of bounds values : 0 OK' /tmp/c.txt && [ "$rnr" = 0 ] &&
    pass "$coll ${al/-/} over rdma, 1K..4M: #wrong 0, 0 RNR NAKs" ||
    { tail -12 /tmp/c.txt; bad "$coll ${al/-/} over rdma, 1K..4M: exit $rc, rnr_naks '$rnr'"; }
done
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

# ---- begin: training step over RDMA (issue 15, helper "ecmp") -----------------------------
# A few training steps of a small model on mini's 2 servers (4 ranks, tp 2: the activations'
# AllReduce over NVLink, the gradients' over the rail) with the rail pairs on rxe: every reduced
# gradient and activation correct (#wrong 0), and the report says the rail went over rdma.
step "train over rdma (2 servers, tp 2, correct reduced gradients)"
testbedctl train mini --servers 2 --tp 2 --transport rdma --params 200000 --grad-bytes 4 \
  --layers 2 --bucket 128K --activation-bytes 16K --compute 20ms --compute-scale 1 --steps 3 \
  --warmup 1 --json /tmp/train-rdma.json >/tmp/train-rdma.txt 2>&1
rc=$?
tail -8 /tmp/train-rdma.txt
# The guest has no python3: the JSON is read with tr/grep (testbedctl writes it with dump(1)).
j=$(tr -d ' \n' </tmp/train-rdma.json 2>/dev/null)
dir=$(grep -o '"results_dir":"[^"]*"' <<<"$j" | head -n 1 | cut -d'"' -f4)
rdma=$(tr -d ' \n' <"$dir/job.json" 2>/dev/null | grep -o '"rdma":\[\(\[[01,]*\],\{0,1\}\)*\]')
pairs=$(grep -o 1 <<<"$rdma" | wc -l)
echo "train json: $(grep -o '"steps":[0-9]*' <<<"$j" | head -n 1) $(grep -o '"wrong":[0-9]*' <<<"$j" | head -n 1) transport $(grep -o '"transport":"[a-z]*"' <<<"$j" | head -n 1); $pairs rank pairs over rdma"
[ $rc = 0 ] && grep -q '"steps":3' <<<"$j" && grep -q '"wrong":0' <<<"$j" &&
  grep -q '"transport":"rdma"' <<<"$j" && grep -q '"rail":' <<<"$j" && [ "$pairs" -gt 0 ] &&
  pass "train --transport rdma: 3 steps, #wrong 0, $pairs rank pairs on rxe (job.json)" ||
  bad "train --transport rdma: exit $rc (see the lines above)"
# ---- end: training step over RDMA ------------------------------------------------------------

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
  [ $rc = 0 ] && ! grep -q SKIPPED /tmp/unit.txt && grep -q 'PASSED.*5 tests' /tmp/unit.txt &&
    pass "RdmaVerbs unit tests on rxe" || { cat /tmp/unit.txt; bad "RdmaVerbs unit tests: exit $rc"; }
  rdma link delete tbunit
  ip link del tbuva
fi

step "down mini"
testbedctl down mini
left=$(ls /sys/class/infiniband 2>/dev/null | grep -c '^tb-mini-')
[ "$left" = 0 ] && pass "down removed the rxe devices" || bad "$left rxe devices left after down"
[ -z "$(ip netns list | grep tb-mini)" ] && pass "no namespaces left" || bad "namespaces left after down"
fi # alone: RDMA on mini

# mini's scaled rates are beyond a TCG guest's CPU; images/labvm/netem.toml has figures it can
# carry and delays verify checks.
step "up on the real netem backend (images/labvm/netem.toml)"
testbedctl up images/labvm/netem.toml --rdma none | grep -E '^(lab|shaping)'
qd=$(ip netns exec tb-vmnetem-dc-s0-g0 tc qdisc show dev rail 2>&1)
grep -q netem <<<"$qd" && pass "the rail carries a netem qdisc" ||
  bad "no netem qdisc on the rail (tc qdisc show dev rail: ${qd:-nothing})"
# verify itself (each link class's rate, loss and delay, judged by verify's own tolerances) runs
# in the timing boot (images/labvm/timing.sh), under -icount, where the guest's clock counts what
# netem counts: in this boot (plain TCG) the guest's timers fire late by an amount that follows
# the host's load, and verify's readings all look stalled (a 10 ms delay read 8.5 ms in one run
# and 13.7 ms in the next), so it took ~100 s of retries to judge loosely what the timing boot
# judges strictly in less.

# Jitter never reorders (docs/scenario.md, shaping/backend_netem.cc): the rail is 20 ms +- 2 ms
# each way, netem on both ends with a rate of its own. 100 pings sent at once to the ToR come
# back in the order they were sent (with netem's own order, by drawn delay, most of them would
# overtake one another), and their delay is the running maximum of the draws: a higher median and
# a narrower spread than 100 pings 50 ms apart, which see the 40 ms RTT and its sigma of
# 2 x sqrt(2) = 2.8 ms. The order and the higher median are judged; the spreads are shown (TCG
# timing is noise, above, and a preempted ping spreads its own burst).
if want alone; then
step "jitter keeps packets in order on netem"
tor=$(ip -n tb-vmnetem-dc-tor0 -4 -o addr show dev s0g0 | awk '{sub(/\/.*/, "", $4); print $4}')
# "replies out_of_order median sigma" of a ping run's output (sigma from the interquartile range).
ping_stats() {
  local ooo
  ooo=$(awk '/icmp_seq=/ { s = $0; sub(/.*icmp_seq=/, "", s); s += 0
                           if (s < top) n++; if (s > top) top = s }
             END { print n + 0 }' "$1")
  awk '/icmp_seq=/ { t = $0; sub(/.*time=/, "", t); print t + 0 }' "$1" | sort -n |
    awk -v ooo="$ooo" '{ v[NR] = $1 }
      END { if (NR == 0) { print 0, ooo, 0, 0; exit }
            q1 = v[int(NR / 4) + 1]; q2 = v[int(NR / 2) + 1]; q3 = v[int(3 * NR / 4) + 1]
            printf "%d %d %.2f %.2f\n", NR, ooo, q2, (q3 - q1) / 1.349 }'
}
ip netns exec tb-vmnetem-dc-s0-g0 ping -n -c 100 -i 0.05 -W 2 "$tor" >/tmp/sparse.txt 2>&1
ip netns exec tb-vmnetem-dc-s0-g0 ping -n -c 100 -l 100 -W 2 "$tor" >/tmp/burst.txt 2>&1
read -r sn so smed ssig <<<"$(ping_stats /tmp/sparse.txt)"
read -r bn bo bmed bsig <<<"$(ping_stats /tmp/burst.txt)"
echo "check: 50 ms apart: $sn replies, median RTT $smed ms, sigma $ssig ms, $so out of order"
echo "check: all at once: $bn replies, median RTT $bmed ms, sigma $bsig ms, $bo out of order"
[ "$sn" -ge 95 ] && [ "$bn" -ge 95 ] && [ "$so" = 0 ] && [ "$bo" = 0 ] &&
  pass "netem jitter: $bn pings sent at once came back in order" ||
  bad "netem jitter reordered or lost pings ($so and $bo of $sn and $bn out of order)"
awk -v sm="$smed" -v bm="$bmed" 'BEGIN { exit !(bm > sm) }' &&
  pass "netem jitter: a burst waits for its slowest draws (median $bmed ms against $smed ms)" ||
  bad "netem jitter: a burst's median $bmed ms is not above $smed ms of pings 50 ms apart"
fi # alone: jitter

# Whole paths (`verify --paths`, idle and under load) are judged in the timing boot too.

# The netem backend's live changes, judged by the qdisc the kernel reads back (TCG timing is noise,
# above): `link set` and `link reset`, then `fault latency` and `fault loss` by hand, each run in
# the background, seen in force through its fault_inject event and reverted by Ctrl-C.
if want beside; then
step "link set/reset and fault latency/loss on the netem backend"
q0=$(netem_of)
echo "check: rail qdisc before: $q0 ($(ip netns exec tb-vmnetem-dc-s0-g0 tc qdisc show dev rail | grep netem))"
[ "$q0" = "20ms 0%" ] && pass "the rail's netem qdisc has the scenario's 20ms" || bad "rail qdisc reads '$q0', not 20ms"
testbedctl link vmnetem set dc/s0/g0 dc/tor0 --delay 40ms
rc=$?
q=$(netem_of) qt=$(netem_of tb-vmnetem-dc-tor0 s0g0)
[ $rc = 0 ] && [ "$q" = "40ms 0%" ] && [ "$qt" = "40ms 0%" ] &&
  pass "link set --delay 40ms: both ends' netem qdiscs read 40ms" ||
  bad "link set --delay 40ms: exit $rc, qdiscs read '$q' / '$qt'"
testbedctl link vmnetem reset dc/s0/g0 dc/tor0
rc=$?
q=$(netem_of) qt=$(netem_of tb-vmnetem-dc-tor0 s0g0)
[ $rc = 0 ] && [ "$q" = "20ms 0%" ] && [ "$qt" = "20ms 0%" ] &&
  pass "link reset: back to the scenario's 20ms" || bad "link reset: exit $rc, qdiscs read '$q' / '$qt'"

testbedctl fault vmnetem latency dc/s0/g0 dc/tor0 --delay 30ms --for 120s >/tmp/lat.txt 2>&1 &
fp=$!
if wait_event fault_inject 1; then
  q=$(netem_of)
  [ "$q" = "50ms 0%" ] && pass "fault latency +30ms: the qdisc reads 50ms while it holds" ||
    bad "fault latency +30ms: the qdisc reads '$q', not 50ms"
else
  bad "fault latency: no fault_inject event within 60 s"
fi
kill -INT $fp
wait $fp
rc=$?
cat /tmp/lat.txt
q=$(netem_of)
[ $rc = 0 ] && [ "$(grep -c '"event":"fault_revert"' "$ens")" = 1 ] && [ "$q" = "20ms 0%" ] &&
  pass "fault latency interrupted: fault_revert event, qdisc back to 20ms" ||
  bad "fault latency interrupted: exit $rc, $(grep -c '"event":"fault_revert"' "$ens") revert event(s), qdisc '$q'"

# A ping from dc/s0/g0 to dc/s1/g0 crosses the faulted link.
peer=$(ip -n tb-vmnetem-dc-s1-g0 -4 -o addr show dev rail | awk '{sub(/\/.*/, "", $4); print $4}')
testbedctl fault vmnetem loss dc/s0/g0 dc/tor0 --loss 100% --for 120s >/tmp/loss.txt 2>&1 &
fp=$!
if wait_event fault_inject 2; then
  q=$(netem_of)
  ip netns exec tb-vmnetem-dc-s0-g0 ping -c 5 -i 0.2 -W 1 "$peer" >/tmp/ping.txt 2>&1
  rc=$?
  [ "$q" = "20ms 100%" ] && [ $rc != 0 ] && grep -q ' 0 received' /tmp/ping.txt &&
    pass "fault loss 100%: the qdisc reads loss 100% and a ping to $peer gets no reply" ||
    { tail -2 /tmp/ping.txt; bad "fault loss 100%: qdisc '$q', ping exit $rc"; }
else
  bad "fault loss: no fault_inject event within 60 s"
fi
kill -INT $fp
wait $fp
rc=$?
cat /tmp/loss.txt
q=$(netem_of)
ip netns exec tb-vmnetem-dc-s0-g0 ping -c 3 -i 0.2 -W 2 "$peer" >/tmp/ping.txt 2>&1
prc=$?
[ $rc = 0 ] && [ "$(grep -c '"event":"fault_revert"' "$ens")" = 2 ] && [ "$q" = "20ms 0%" ] && [ $prc = 0 ] &&
  pass "fault loss interrupted: fault_revert event, qdisc back to no loss, the ping gets replies" ||
  { tail -2 /tmp/ping.txt; bad "fault loss interrupted: exit $rc, qdisc '$q', ping exit $prc"; }
fi # beside: the netem backend's live changes
testbedctl down vmnetem

if want beside; then
step "a lossless rail on the netem backend: an incast drops nothing at the ToR (images/labvm/incast.toml)"
source images/labvm/incast.sh
incast_check vmi
step "ECN on the VPC in the kernel: RED marks CE (images/labvm/incast.sh)"
ecn_check vmi

fi # beside: the lossless incast

# RDMA on a dual-ToR rail (images/labvm/dualtor.toml): every GPU NIC port gets its own rxe device,
# bench over rdma passes with the --ib-* flags, and again with one of a GPU's two ToR ports down.
if want alone; then
step "up dual-ToR with rdma (images/labvm/dualtor.toml)"
out=$(testbedctl up images/labvm/dualtor.toml 2>&1)
rc=$?
echo "$out" | grep -E '^(lab|shaping|rdma)'
if [ $rc = 0 ]; then
  n=0 per=""
  for g in s0-g0 s0-g1 s1-g0 s1-g1; do
    k=0
    for port in raila railb; do
      [ -e /sys/class/infiniband/tb-vmdual-dc-$g-$port ] && k=$((k + 1))
    done
    n=$((n + k))
    [ $k = 2 ] || per+=" dc/$g:$k"
  done
  [ $n = 8 ] && [ -z "$per" ] && pass "8 rxe devices: one per rail port (raila, railb) of each of 4 GPUs" ||
    { ls /sys/class/infiniband; bad "$n rxe devices, not 2 per GPU (short:$per)"; }
  # The --ib-* flags: NCCL's defaults first (--ib-timeout 14, --ib-retry-cnt 7), then, with a
  # port down, other values, which the report and JSON only show if the flags reached the job.
  dual_bench() { # TAG TIMEOUT RETRY
    testbedctl bench vmdual allreduce -b 4K -e 256K -f 4 -n 3 -w 1 --transport rdma --qps 2 \
      --ib-timeout "$2" --ib-retry-cnt "$3" --json "results/dual-$1.json" >"/tmp/dual-$1.txt" 2>&1
    rc=$?
    grep -E '^#  transport|Out of bounds|RDMA devices' "/tmp/dual-$1.txt" | cut -c1-240
    [ $rc = 0 ] && grep -q '# Out of bounds values : 0 OK' "/tmp/dual-$1.txt" &&
      grep -q "^#  transport rdma: 4 of 4 rail pair(s) over RDMA verbs SEND/RECV (2 QP(s)/peer, ib_timeout $2, retry $3)" "/tmp/dual-$1.txt" &&
      grep -Eq "\"ib_timeout\": ?$2[,}]" "results/dual-$1.json" &&
      grep -Eq "\"ib_retry_cnt\": ?$3[,}]" "results/dual-$1.json" && grep -Eq '"qps": ?2[,}]' "results/dual-$1.json"
  }
  dual_bench both 14 7 && pass "dual-ToR allreduce over rdma (--qps 2 --ib-timeout 14 --ib-retry-cnt 7): #wrong 0, report and JSON show them" ||
    { tail -20 /tmp/dual-both.txt; bad "dual-ToR allreduce over rdma: exit $rc"; }
  # Rank 0 (dc/s0/g0) keeps the port it ran over; its other port goes down (the fabric agent and
  # the GPU's multipath route react), and a bench with other --ib-* values must still pass on the
  # port in use. Not checked, because it fails: losing the port in use. Each port is its own rxe
  # device (real dual-ToR NICs bond both ports under one), and the rdma_cm binds a rank's
  # address to one device; with that port down a connection request comes in through the other
  # ToR on the other device and is rejected ("invalid service ID"), and a set-up that follows
  # the route instead (tried) connects but then loses its ACKs: they return through the ToR that
  # still reaches the peer's *other* port, whose device has no such QP.
  dev0=$(grep -o 'RDMA devices by rank: 0=[^ ]*' /tmp/dual-both.txt | head -1 | sed 's/.*0=//')
  used=${dev0%%,*} used=${used##*-}
  case $used in raila) other=railb tor=dc/tor0b ;; *) used=railb other=raila tor=dc/tor0a ;; esac
  testbedctl link vmdual down dc/s0/g0 $tor
  rc=$?
  ip -n tb-vmdual-dc-s0-g0 route show | sed 's/^/check:   s0-g0 route: /'
  car=$(ip netns exec tb-vmdual-dc-s0-g0 cat /sys/class/net/$other/carrier 2>/dev/null)
  [ $rc = 0 ] && [ "$car" != 1 ] && pass "link down dc/s0/g0 $tor: $other has no carrier (rank 0 ran on ${dev0:-?})" ||
    bad "link down dc/s0/g0 $tor: exit $rc, $other carrier '$car'"
  dual_bench oneport 16 5 && grep -q "RDMA devices by rank: 0=tb-vmdual-dc-s0-g0-$used " /tmp/dual-oneport.txt &&
    pass "with $other down: allreduce over rdma (--ib-timeout 16 --ib-retry-cnt 5) passes on $used, #wrong 0" ||
    { tail -20 /tmp/dual-oneport.txt; bad "with $other down: allreduce over rdma on $used: exit $rc"; }
else
  echo "$out"
  bad "up dualtor exit $rc"
fi
testbedctl down vmdual
left=$(ls /sys/class/infiniband 2>/dev/null | grep -c '^tb-vmdual-')
[ "$left" = 0 ] && pass "down removed every dual-ToR rxe device" || bad "$left rxe devices left after down vmdual"
fi # alone: dual-ToR

if want alone; then

# BFD failover with FRR (images/labvm/bfd.toml): bgpd and bfdd in both transit routers; the
# route from a/tr to b's frontend block is judged in the router's own table (ip route), a ping
# from a/s0 to b/s0 crosses the WAN.
step "BFD failover with FRR (images/labvm/bfd.toml)"
bev=/run/testbedctl/vmbfd/events.jsonl
out=$(testbedctl up images/labvm/bfd.toml --rdma none 2>&1)
rc=$?
echo "$out" | grep -E '^(lab|shaping)'
# The device a/tr's route to b's frontend block leaves by (pri or bak), or "none".
via() { ip -n tb-vmbfd-a-tr route show "$bnet" | awk '{for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit }}
  END { if (NR == 0) print "none" }'; }
# Waits up to $2 s (in 0.2 s steps) for the route to leave by $1; prints the seconds it took.
wait_via() {
  local i
  for i in $(seq 1 $(($2 * 5))); do
    [ "$(via)" = "$1" ] && { echo "$((i / 5)).$((i % 5 * 2))"; return 0; }
    sleep 0.2
  done
  return 1
}
xping() { ip netns exec tb-vmbfd-a-s0 ping -c "$1" -i 0.2 -W 2 "$bhost" >/tmp/bping.txt 2>&1; }
# What the routers and FRR say, when a check fails.
frr_why() {
  cat /tmp/bping.txt
  local r
  for r in a b; do
    echo "check:   $r/tr routes:"; ip -n tb-vmbfd-$r-tr route | sed 's/^/check:     /'
    tail -n 8 /run/testbedctl/vmbfd/logs/bgpd_${r}_tr.log /run/testbedctl/vmbfd/logs/bfdd_${r}_tr.log
  done
  vtysh --vty_socket /run/testbedctl/vmbfd/frr/tb-vmbfd-a-tr -d bfdd -c 'show bfd peers' 2>&1 | head -40
}
# bfdd's own word on a/tr's session with PEER: up, down, init, or nothing.
bfd_state() {
  vtysh --vty_socket /run/testbedctl/vmbfd/frr/tb-vmbfd-a-tr -d bfdd -c 'show bfd peers brief' 2>/dev/null |
    awk -v p="$1" '$3 == p { print $4 }'
}
if [ $rc = 0 ]; then
  bnet=$(testbedctl plan images/labvm/bfd.toml | awk '$1 == "router" && $2 == "b/tr" {for (i = 1; i < NF; i++) if ($i == "network") { print $(i + 1); exit }}')
  bpri=$(testbedctl plan images/labvm/bfd.toml | awk '$1 == "router" && $2 == "a/tr" {for (i = 1; i < NF - 1; i++) if ($i == "pri" && $(i + 1) == "neighbor") print $(i + 2)}')
  bbak=$(testbedctl plan images/labvm/bfd.toml | awk '$1 == "router" && $2 == "a/tr" {for (i = 1; i < NF - 1; i++) if ($i == "bak" && $(i + 1) == "neighbor") print $(i + 2)}')
  bhost=$(ip -n tb-vmbfd-b-s0 -4 -o addr show dev fe | awk '{sub(/\/.*/, "", $4); print $4}')
  st=$(testbedctl status vmbfd)
  grep -E '^ +daemons' <<<"$st"
  ok=1
  for r in a b; do
    comms=$(for p in $(ip netns pids tb-vmbfd-$r-tr); do cat /proc/$p/comm; done | sort | xargs)
    echo "check:   processes in tb-vmbfd-$r-tr: $comms"
    for d in zebra bfdd bgpd; do
      grep -q "$d $r/tr (running" <<<"$st" && grep -qw "$d" <<<"$comms" || ok=0
    done
  done
  [ $ok = 1 ] && pass "status: zebra, bfdd and bgpd running in both routers' namespaces" ||
    bad "FRR's daemons are not all running in the routers (status and ip netns pids above)"
  # Up to 30 s: BGP comes first, then bfdd's sessions; a TCG guest on a loaded host (the VM tier
  # beside the rest of the suite) once needed more than the 10 s this waited before.
  for _ in $(seq 1 150); do
    [ "$(bfd_state "$bpri") $(bfd_state "$bbak")" = "up up" ] && break
    sleep 0.2
  done
  b="$(bfd_state "$bpri") $(bfd_state "$bbak")"
  [ "$b" = "up up" ] && pass "bfdd: BFD sessions up to b/tr over both WAN links ($bpri, $bbak)" ||
    bad "bfdd: BFD sessions to $bpri / $bbak are '$b', not up up"
  v=$(via)
  xping 3
  prc=$?
  [ "$v" = pri ] && [ $prc = 0 ] && pass "BGP: a/tr reaches b ($bnet) over the primary; a/s0 pings b/s0 ($bhost)" ||
    { frr_why; bad "before failover: route via '$v', ping exit $prc"; }

  testbedctl link vmbfd down a/tr b/tr:pri
  rc=$?
  took=$(wait_via bak 30)
  wrc=$?
  xping 3
  prc=$?
  [ $rc = 0 ] && [ $wrc = 0 ] && [ $prc = 0 ] && grep -q '"event":"link_down","link":"a/tr:pri <-> b/tr:pri"' "$bev" &&
    pass "link down of the primary: the route moved to the backup in ${took}s, the ping still gets replies, link_down event" ||
    { frr_why; bad "link down of the primary: exit $rc, route via '$(via)', ping exit $prc"; }
  testbedctl link vmbfd up a/tr b/tr:pri
  rc=$?
  took=$(wait_via pri 60)
  wrc=$?
  b=$(bfd_state "$bpri")
  xping 3
  prc=$?
  [ $rc = 0 ] && [ $wrc = 0 ] && [ $prc = 0 ] && grep -q '"event":"link_up"' "$bev" &&
    pass "link up: the route is back on the primary in ${took}s (BGP re-established, BFD $b), link_up event" ||
    { frr_why; bad "link up: exit $rc, route via '$(via)', BFD '$b', ping exit $prc"; }

  # A gray failure: the primary keeps its carrier but drops everything, so only BFD (3 x 300 ms)
  # or BGP's hold time (9 s, keepalives every 3 s: 6-9 s) can notice. Within 5 s of the fault's
  # event it can only have been BFD.
  testbedctl fault vmbfd blackhole a/tr b/tr --link pri --for 120s >/tmp/bh.txt 2>&1 &
  fp=$!
  if wait_event_in "$bev" fault_inject 1; then
    took=$(wait_via bak 5)
    wrc=$?
    b=$(bfd_state "$bpri")
    xping 3
    prc=$?
    [ $wrc = 0 ] && [ "$b" = down ] && [ $prc = 0 ] &&
      pass "blackhole on the primary: its BFD session is down, the route moved to the backup ${took}s after the fault's event, the ping gets replies" ||
      { frr_why; bad "blackhole on the primary: BFD session '$b', route via '$(via)' after 5 s, ping exit $prc"; }
  else
    bad "fault blackhole: no fault_inject event within 60 s"
  fi
  kill -INT $fp
  wait $fp
  rc=$?
  cat /tmp/bh.txt
  took=$(wait_via pri 60)
  wrc=$?
  b=$(bfd_state "$bpri")
  [ $rc = 0 ] && [ $wrc = 0 ] && [ "$b" = up ] && pass "blackhole reverted: BFD up again, the route is back on the primary in ${took}s" ||
    bad "blackhole reverted: exit $rc, BFD session '$b', route via '$(via)'"
  pids=$(cat /run/testbedctl/vmbfd/frr/*/*.pid 2>/dev/null)
else
  echo "$out"
  bad "up bfd exit $rc"
  pids=""
fi
testbedctl down vmbfd
left=""
for p in $(pgrep -x zebra) $(pgrep -x bfdd) $(pgrep -x bgpd) $pids; do [ -e /proc/$p ] && left+=" $p"; done
[ -n "$pids" ] && [ -z "$left" ] && [ -z "$(ip netns list | grep tb-vmbfd)" ] &&
  pass "down vmbfd: no FRR process ($(wc -w <<<"$pids") were running) and no namespace left" ||
  bad "down vmbfd: FRR processes left:${left:- (none; none were recorded either)}"

# ==== BEGIN QoS classes under netem (issue 16; helper ckstep) ==================================
# images/labvm/qos.toml: one WAN link `w` (4 Mbit, 20 ms) with the default gold/silver/bronze
# classes on the real netem backend. What the kernel reads back on a/tr's end: netem at the root
# holding the 20 ms delay line (not the rate), HTB 80: under netem's class 8:1 holding the link's
# 4 Mbit (80:1) and the classes' shares of it with their priorities, a u32 filter per DSCP value.
# Then behaviour, judged loosely (TCG timing is noise, see verify above): two bronze flows from
# a/s0 to b/s0 fill bronze's buffer (a bronze probe waits in it: +30 ms or more over idle) while a
# gold probe does not wait there (its median below halfway between idle and bronze's); the flows
# together never get more than the link's rate (the classes sit under its limit, not beside it);
# the class counters put the bytes where the DSCP says; down leaves no namespace.
step "QoS classes under netem's delay line (images/labvm/qos.toml)"
out=$(testbedctl up images/labvm/qos.toml --rdma none 2>&1)
rc=$?
echo "$out" | grep -E '^(lab|shaping)'
if [ $rc = 0 ]; then
  qtr=tb-vmqos-a-tr
  qd=$(tc -n $qtr qdisc show dev w)
  qc=$(tc -n $qtr class show dev w)
  qf=$(tc -n $qtr filter show dev w parent 80:)  # not at the root: under netem, on htb 80:
  echo "$qd"
  echo "$qc"
  netem_line=$(grep '^qdisc netem 8: root' <<<"$qd")
  # netem's own rate is only its ordering rate (8Tbit, shaping/backend_netem.cc), never the link's.
  grep -qE 'delay 20(\.0)?ms' <<<"$netem_line" && ! grep -q ' rate 4Mbit' <<<"$netem_line" &&
    grep -q '^qdisc htb 80: parent 8:1 ' <<<"$qd" &&
    pass "QoS on netem: netem 8: at the root holds the 20 ms delay line, not the rate; htb 80: sits under its class 8:1" ||
    bad "QoS on netem: the root is not netem 8: with the delay line and htb 80: under 8:1"
  grep -q 'class htb 80:1 root rate 4Mbit ceil 4Mbit' <<<"$qc" &&
    grep -q 'class htb 80:10 parent 80:1 leaf 81: prio 0 rate 1200Kbit ceil 4Mbit' <<<"$qc" &&
    grep -q 'class htb 80:20 parent 80:1 leaf 82: prio 1 rate 2Mbit ceil 4Mbit' <<<"$qc" &&
    grep -q 'class htb 80:30 parent 80:1 leaf 83: prio 2 rate 800Kbit ceil 4Mbit' <<<"$qc" &&
    pass "QoS on netem: 80:1 holds the link's 4 Mbit; gold 1.2, silver 2, bronze 0.8 Mbit guaranteed, each up to 4, prio 0/1/2" ||
    bad "QoS on netem: the HTB classes under netem do not read back as planned"
  nflt=$(grep -c 'flowid 80:' <<<"$qf")
  [ "$nflt" = 8 ] && grep -q 'match 00b80000/00fc0000' <<<"$qf" && grep -q 'match 00200000/00fc0000' <<<"$qf" &&
    pass "QoS on netem: 8 u32 DSCP filters on htb 80: (EF and CS1 among them)" ||
    bad "QoS on netem: $nflt filters to 80: classes, not 8 with EF and CS1"

  qb=$(ip -n tb-vmqos-b-s0 -4 -o addr show dev fe | awk '{sub(/\/.*/, "", $4); print $4}')
  qpids=()
  for spec in "7601 46" "7602 8"; do
    read -r port dscp <<<"$spec"
    ip netns exec tb-vmqos-b-s0 tb-probe serve --port "$port" --seconds 120 --dscp "$dscp" >/dev/null 2>&1 &
    qpids+=($!)
  done
  sleep 0.5
  # "p50" of a tb-probe rtt result line, in us.
  p50_of() { sed -n 's/.*"p50":\([0-9.]*\).*/\1/p' "$1" | tail -1; }
  qrtt() { # PORT DSCP COUNT OUT
    ip netns exec tb-vmqos-a-s0 tb-probe rtt --to "$qb" --port "$1" --count "$3" --interval-us 20000 --dscp "$2" >"$4" 2>&1
  }
  qrtt 7601 46 50 /tmp/qos-idle.json
  bpids=()
  for i in 1 2; do
    ip netns exec tb-vmqos-a-s0 timeout 60 tb-probe goodput --to "$qb" --port 7602 --seconds 12 --warmup-ms 1000 --dscp 8 >/tmp/qos-bronze$i.json 2>&1 &
    qpids+=($!) bpids+=($!)
  done
  sleep 3
  qrtt 7601 46 200 /tmp/qos-gold.json &
  gp=$!
  qrtt 7602 8 200 /tmp/qos-bprobe.json
  wait $gp
  # The flows' figures once they have ended (12 s after their warm-up; bounded by their timeout):
  # a fixed sleep read them before a slow guest's clients had written them.
  wait "${bpids[@]}"
  idle=$(p50_of /tmp/qos-idle.json) gold=$(p50_of /tmp/qos-gold.json) bron=$(p50_of /tmp/qos-bprobe.json)
  bps=$(cat /tmp/qos-bronze1.json /tmp/qos-bronze2.json | sed -n 's/.*"goodput_bps":\([0-9.e+]*\).*/\1/p' |
    awk '{ s += $1 } END { printf "%.0f", s }')
  echo "check: RTT p50 idle ${idle:-?} us, gold ${gold:-?} us, bronze ${bron:-?} us under two bronze flows of ${bps:-?} bit/s together"
  tc -n $qtr -s class show dev w | grep -A1 -E '^class htb 80:(10|20|30) '
  awk -v i="$idle" -v g="$gold" -v b="$bron" 'BEGIN { exit !(i > 0 && g > 0 && b > i + 30000 && g < i + (b - i) / 2) }' &&
    pass "QoS on netem: bronze's queue holds its probe (+$(awk -v i="$idle" -v b="$bron" 'BEGIN{printf "%.0f", (b - i) / 1000}') ms) and gold does not wait in it (+$(awk -v i="$idle" -v g="$gold" 'BEGIN{printf "%.0f", (g - i) / 1000}') ms)" ||
    bad "QoS on netem: RTT p50 idle '$idle', gold '$gold', bronze '$bron' us: gold waited in bronze's queue, or no queue formed"
  awk -v r="$bps" 'BEGIN { exit !(r >= 1e6 && r <= 4.2e6) }' &&
    pass "QoS on netem: the bronze flows carry $bps bit/s, within the link's 4 Mbit" ||
    bad "QoS on netem: the bronze flows carry '${bps}' bit/s, not 1..4.2 Mbit (over the link's rate: the classes are not under its limit)"
  sent_of() { tc -n $qtr -s class show dev w | awk -v c="$1" '$1 == "class" && $3 == c { f = 1; next } f && $1 == "Sent" { print $2; exit }'; }
  gsent=$(sent_of 80:10) bsent=$(sent_of 80:30)
  [ "${bsent:-0}" -ge 1000000 ] && [ "${gsent:-0}" -gt 0 ] && [ "${gsent:-0}" -lt "${bsent:-0}" ] &&
    pass "QoS on netem: the counters put $bsent bytes in bronze (80:30) and $gsent in gold (80:10)" ||
    bad "QoS on netem: class counters gold '${gsent}' bronze '${bsent}' bytes"
  for p in "${qpids[@]}"; do kill "$p" 2>/dev/null; done
  wait "${qpids[@]}" 2>/dev/null
else
  echo "$out"
  bad "up qos exit $rc"
fi
testbedctl down vmqos
[ -z "$(ip netns list | grep tb-vmqos)" ] && pass "down vmqos: no namespace left (the classes went with the routers' namespaces)" ||
  bad "down vmqos left namespaces: $(ip netns list | grep tb-vmqos | tr '\n' ' ')"
# ==== END QoS classes under netem ==============================================================
fi # alone: BFD and QoS

echo
if [ $fails = 0 ]; then
  echo "CHECK PASS ($((SECONDS - t0)) s, part $part)"
  exit 0
fi
echo "CHECK FAIL: $fails check(s) failed"
exit 1
