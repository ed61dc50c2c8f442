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
# Receiver-not-ready NAKs the lab's rxe devices sent (responders; rcvd_rnr_err counts the same
# retries on the requesters' side), summed over the devices.
rnr_sum() {
  local s=0 f
  for f in /sys/class/infiniband/tb-mini-*/ports/1/hw_counters/send_rnr_err; do
    [ -r "$f" ] && s=$((s + $(cat "$f")))
  done
  echo $s
}
# Busy CPU ticks of the whole guest (every vCPU, /proc/stat: user+nice+system+irq+softirq), so
# rxe's work in kernel threads and softirqs counts, which no process's rusage holds.
busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
# --before: another build's tb-rank, run by a copy of this testbedctl beside it (testbedctl
# takes the tb-rank next to itself).
before=/opt/testbedctl/before
tbctl=testbedctl
if [ -x $before/tb-rank ]; then
  cp "$(command -v testbedctl)" $before/testbedctl
fi
run() { # label args...
  local label=$1
  shift
  local r0 b0 rc
  r0=$(rnr_sum)
  b0=$(busy_ticks)
  TIMEFORMAT='%U %S'
  { time $tbctl bench mini allreduce "${sizes[@]}" -n "$iters" -w 1 "$@" \
    --json "results/$label.json" >"/tmp/$label.txt" 2>&1; } 2>"/tmp/$label.rusage"
  rc=$?
  echo "$(($(rnr_sum) - r0)) $(($(busy_ticks) - b0))" >"/tmp/$label.cost"
  [ $rc = 0 ] || { tail -8 "/tmp/$label.txt"; echo "bench $label: exit $rc"; [[ $label == *b ]] || exit 1; }
}
# Bus traffic of a run in GB (the AllReduce bytes nccl-tests' busbw counts): ranks x 2(n-1)/n x
# size x calls per size, calls = (warm-up + timed + 2 x check) x 2 placements (in place too).
bus_gb() {
  local j n w it c
  j=$(tr -d ' \n' <"results/$1.json")
  n=$(grep -o '"nranks":[0-9]*' <<<"$j" | head -1 | cut -d: -f2)
  w=$(grep -o '"warmup":[0-9]*' <<<"$j" | head -1 | cut -d: -f2)
  it=$(grep -o '"iters":[0-9]*' <<<"$j" | head -1 | cut -d: -f2)
  c=$(grep -o '"check":[0-9]*' <<<"$j" | head -1 | cut -d: -f2)
  awk -v n="$n" -v calls=$(((w + it + 2 * c) * 2)) '/^ +[0-9]+ /{s += $1}
    END {printf "%.4f", n * 2 * (n - 1) / n * s * calls / 1e9}' "/tmp/$1.txt"
}
cost_line() { # label
  local gb ru cost hz
  gb=$(bus_gb "$1")
  read -r ru_u ru_s <"/tmp/$1.rusage"
  read -r rnr ticks <"/tmp/$1.cost"
  hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
  awk -v l="$1" -v gb="$gb" -v u="$ru_u" -v s="$ru_s" -v t="$ticks" -v hz="$hz" -v rnr="$rnr" \
    'BEGIN {printf "  %-6s  RNR NAKs %6d   bus traffic %7.3f GB   CPU-s/GB: bench+ranks %7.1f, whole guest %7.1f\n", l, rnr, gb, (u + s) / gb, t / hz / gb}'
}
run tcp --transport tcp
run rdma1 --transport rdma --qps 1
run rdma2 --transport rdma --qps 2
if [ -x $before/tb-rank ]; then
  tbctl=$before/testbedctl
  run rdma1b --transport rdma --qps 1
  run rdma2b --transport rdma --qps 2
  tbctl=testbedctl
fi
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
echo
echo "Per run: receiver-not-ready NAKs the rxe devices sent (sysfs hw_counters send_rnr_err, after"
echo "- before; each is >= 0.64 ms of a stalled QP), and CPU per GB of bus traffic: bench and its"
echo "ranks (bash time: rusage of the waited-for processes, user+sys) and the whole guest (busy"
echo "ticks of every vCPU in /proc/stat, which holds rxe's kernel work too). TCG: ratios only."
for l in tcp rdma1 rdma2; do cost_line $l; done
if [ -x $before/tb-rank ]; then
  echo
  echo "Before (--before: the other build's tb-rank, same testbedctl, guest and lab):"
  printf "%10s  %14s  %14s  %14s  %14s\n" "size (B)" "rdma 1 QP" "before 1 QP" "rdma 2 QPs" "before 2 QPs"
  paste <(awk '/^ +[0-9]+ /{print $1, $NF}' /tmp/rdma1.txt) <(awk '/^ +[0-9]+ /{print $NF}' /tmp/rdma1b.txt) \
    <(awk '/^ +[0-9]+ /{print $NF}' /tmp/rdma2.txt) <(awk '/^ +[0-9]+ /{print $NF}' /tmp/rdma2b.txt) |
    awk '{printf "%10s  %14.4f  %14.4f  %14.4f  %14.4f\n", $1, $2, $3, $4, $5}'
  for l in rdma1b rdma2b; do cost_line $l; done
fi
grep -h '^# Measured' /tmp/rdma2.txt | sed 's/^# /  /'
