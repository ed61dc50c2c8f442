#!/bin/bash
# Runs inside the lab VM (scripts/bench-rdma): AllReduce over the same lab, links and ranks with
# the rail pairs over TCP and over RDMA (rxe), side by side, plus perftest's raw rxe bandwidth
# between two GPU namespaces for scale. Under TCG these are functional ratios, not performance
# figures: every packet costs emulated CPU time.
set -uo pipefail
cd /opt/testbedctl
sizes=(-b 64K -e 4M -f 4)
iters=${BENCH_ITERS:-5}
testbedctl up scenarios/mini.toml --shaping none >/tmp/up.txt 2>&1 || { cat /tmp/up.txt; exit 1; }
grep -E '^(lab|rdma)' /tmp/up.txt
run() { # label args...
  local label=$1
  shift
  testbedctl bench mini allreduce "${sizes[@]}" -n "$iters" -w 1 "$@" --json "results/$label.json" \
    >"/tmp/$label.txt" 2>&1
  local rc=$?
  [ $rc = 0 ] || { tail -8 "/tmp/$label.txt"; echo "bench $label: exit $rc"; exit 1; }
}
run tcp --transport tcp
run rdma1 --transport rdma --qps 1
run rdma2 --transport rdma --qps 2
# Raw rxe: ib_write_bw between dc/s0/g0 and dc/s1/g0 (their rail addresses), 64 KiB messages.
srv=tb-mini-dc-s0-g0 cli=tb-mini-dc-s1-g0
g0=$(testbedctl status mini --json | grep -A3 '"node": "dc/s0/g0"' | sed -n 's/.*"gid_index": \([0-9]*\).*/\1/p' | head -1)
g1=$(testbedctl status mini --json | grep -A3 '"node": "dc/s1/g0"' | sed -n 's/.*"gid_index": \([0-9]*\).*/\1/p' | head -1)
ip netns exec $srv timeout 60 ib_write_bw -d $srv-rail -x "${g0:-1}" -D 4 --report_gbits >/tmp/ibw-srv.txt 2>&1 &
sleep 2
ip netns exec $cli timeout 60 ib_write_bw -d $cli-rail -x "${g1:-1}" -D 4 --report_gbits 198.18.0.8 >/tmp/ibw.txt 2>&1
wait
raw=$(awk '/^ *65536/{print $4}' /tmp/ibw.txt | tail -1)
testbedctl down mini >/dev/null

echo
echo "AllReduce busbw on lab mini (4 ranks, 2 servers x 2 GPUs, one rail; --shaping none so the"
echo "links do not cap it), $iters timed iterations after 1 warm-up per size; kernel $(uname -r),"
echo "TCG guest ($(nproc) vCPUs): FUNCTIONAL RATIOS, NOT PERFORMANCE. Transport: tcp = every pair"
echo "over TCP; rdma = rail pairs over RDMA verbs on rxe (SEND/RECV, 16 x 64 KiB buffers per QP),"
echo "NVLink pairs over TCP. Raw rxe for scale: ib_write_bw 64 KiB, dc/s1/g0 -> dc/s0/g0: ${raw:-?} Gbit/s."
echo
printf "%10s  %14s  %14s  %14s  %12s\n" "size (B)" "tcp (Gbit/s)" "rdma 1 QP" "rdma 2 QPs" "rdma1/tcp"
paste <(awk '/^ +[0-9]+ /{print $1, $NF}' /tmp/tcp.txt) <(awk '/^ +[0-9]+ /{print $NF}' /tmp/rdma1.txt) \
  <(awk '/^ +[0-9]+ /{print $NF}' /tmp/rdma2.txt) |
  awk '{printf "%10s  %14.4f  %14.4f  %14.4f  %12.2f\n", $1, $2, $3, $4, ($2 > 0 ? $3 / $2 : 0)}'
grep -h '^# Avg bus' /tmp/tcp.txt /tmp/rdma1.txt /tmp/rdma2.txt | sed 's/^/  /'
grep -h '^# Measured' /tmp/rdma2.txt | sed 's/^# /  /'
