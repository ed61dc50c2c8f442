#!/bin/bash
# The lab VM's timing checks on the netem backend (issues 13 and 22), on images/labvm/netem.toml:
#  1. `verify --paths`, idle and `--under-load` (bulk flows on the links the probes avoid), then
#     `verify` of every link class: verify's own verdicts and tolerances (per hop 10% + 20 us
#     below 1 ms, 1% + 50 us from 1 ms; a path within the sum of its hops').
#  2. Jitter: the rail is 20 ms +- 2 ms each way (netem on both ends, ordered: docs/scenario.md).
#     2000 pings 20 ms apart (spacing >> sigma: each sees its own draws) from dc/s0/g0 to its ToR,
#     idle and while `bench allreduce` runs on dc/s1's GPUs (their NVLink: no link the pings use);
#     the mean RTT less the base (ping over the namespace's lo) within 2 x (1% + 50 us) of 40 ms
#     plus 3 standard errors, and sigma (sample standard deviation; replies beyond median +- 20 ms
#     dropped as stalls, counted) within 10% of 2 x sqrt(2) = 2.83 ms (a normal draw per direction,
#     cut at 0 and delay + 4 sigma). 2000, not 600: with 600 the sigma error of 8 runs spread
#     -7.1..+4.1% (mean -2.4%, sd 4.0%; the standard error of a sample sigma is 1/sqrt(2(n-1)) =
#     2.9% at 600, 1.6% at 2000), so the +-10% bound failed about one boot in twenty (likely what
#     failed CI's boot of 2026-12-02, whose log kept no timing line); a figure below 1800 replies is FAIL (too few to judge).
# Judged only when the guest's clock counts the time netem counts: under KVM, or TCG with -icount
# (scripts/labvm --icount; /labvm/accel says which). Under plain TCG the guest's timers fire late
# by an amount that follows the host's load (check.sh, above its verify block): the figures and
# their errors are printed ("shown"), not judged.
# Measured once (qemu 7.2, TCG, main's binaries of 2026-12-02, load ~6 on the host): with
# -icount shift=auto,sleep=on the guest's time still follows the host (an 8 ms path read 935 ms,
# CPUs 84% busy): no use; with -icount shift=0,sleep=off (one instruction = 1 ns, idle time jumps
# to the next timer) 4 of 5 path classes were within +0.022..+0.029 ms idle and under load, and
# the jittered rail path read +5.55 ms only because verify spaced its path probes 1 ms apart
# (fixed: 4 sigma, verify/measure.cc); jitter mean +0.005 / +0.015 ms, sigma -1.1% / -6.8% idle /
# under load. Again with the fix: every path passed (rail -0.41 / -0.11 ms of 1.0), jitter mean
# -0.165 / +0.079 ms, sigma -2.1% / +4.1%. Plain TCG the same hour: paths +2.7..+15.3 ms, jitter
# mean +1.14 / +3.13 ms and sigma +20% / +72% idle / under load. The whole script takes 2-2.5 min of wall time (idle time
# is skipped).
# Run: scripts/labvm run --icount shift=0,sleep=off -- /opt/testbedctl/images/labvm/timing.sh;
# `scripts/labvm check` does (a boot of its own). Prints "timing: ok / FAIL / shown" lines; exit 0
# when every judged check held.
set -uo pipefail
cd /opt/testbedctl
accel=$(cat /labvm/accel 2>/dev/null || echo unknown)
judge=0
case $accel in *kvm* | *icount*) judge=1 ;; esac
fails=0
# A judged result: ok or FAIL; unjudged: shown.
result() { # held? text
  if [ "$judge" = 0 ]; then
    echo "timing: shown - $2 (not judged: $accel has no guest clock to trust)"
  elif [ "$1" = 1 ]; then
    echo "timing: ok   - $2"
  else
    echo "timing: FAIL - $2"
    fails=$((fails + 1))
  fi
}
echo "timing: accelerator: $accel; delays judged: $([ $judge = 1 ] && echo yes || echo no)"
testbedctl up images/labvm/netem.toml --rdma none | grep -E '^(lab|shaping)'

for mode in idle load; do
  extra=()
  [ $mode = load ] && extra=(--under-load)
  t=$SECONDS
  testbedctl verify vmnetem --quick --paths "${extra[@]}" >/tmp/paths-$mode.txt 2>/tmp/paths-$mode.err
  rc=$?
  sed -n '/PATH CLASS/,/^$/p;/^host/p' /tmp/paths-$mode.txt
  held=0
  [ $rc = 0 ] && held=1
  rows=$(sed -n '/PATH CLASS/,/^$/p' /tmp/paths-$mode.txt)
  result $held "verify --paths ($mode, $((SECONDS - t)) s): exit $rc ($(grep -c ' pass' <<<"$rows") paths pass, $(grep -c 'FAIL' <<<"$rows") fail)"
  [ $rc -le 1 ] || tail -3 /tmp/paths-$mode.err
done

# verify of every link class (rate, delay, jitter, loss, with verify's own tolerances and its host
# guard), judged row by row: every checked row must pass (11 rows here, at least 10), except
# the lossy class's tcp-loss rows: their paced transfer (at half of the class's 3 Gbit, above the
# guest's reach by design: netem.toml) gave no measurement in every boot so far (also under plain
# TCG, where check.sh never judged them), so they are shown. The loss rows (unanswered probes)
# are judged. Under plain TCG (check.sh's boot) this took ~100 s of retries and could only be
# judged loosely; here it is ~40 s of guest time.
t=$SECONDS
testbedctl verify vmnetem --quick >/tmp/verify.txt 2>/tmp/verify.err
rc=$?
grep -E '^  (rate|delay|jitter|loss|tcp-loss) ' /tmp/verify.txt
read -r npass nfail nshown <<<"$(awk '
  $1 ~ /^(rate|delay|jitter|loss|tcp-loss)$/ {
    if ($0 ~ / pass *$/) p++
    else if ($1 == "tcp-loss" && $0 ~ /no paced loss transfer measurement/) s++
    else if ($0 ~ /FAIL|NOT JUDGED/) f++ }
  END { print p + 0, f + 0, s + 0 }' /tmp/verify.txt)"
held=0
[ "$npass" -ge 10 ] && [ "$nfail" = 0 ] && held=1
result $held "verify (every link class, $((SECONDS - t)) s, exit $rc): $npass rows pass, $nfail fail; $nshown tcp-loss row(s) without a measurement shown (a paced 1.5 Gbit/s transfer in the guest)"
[ $held = 1 ] || tail -5 /tmp/verify.err

# "n mean sd dropped" of ping replies' RTT in ms (file of `ping -n` output).
rtt_stats() {
  awk '/icmp_seq=/ { t = $0; sub(/.*time=/, "", t); print t + 0 }' "$1" | sort -n |
    awk '{ v[NR] = $1 }
      END { n = NR; if (n == 0) { print 0, 0, 0, 0; exit }
            med = v[int(n / 2) + 1]; k = 0; s = 0; d = 0
            for (i = 1; i <= n; i++) if (v[i] > med - 20 && v[i] < med + 20) { k++; s += v[i] } else d++
            m = s / k; q = 0
            for (i = 1; i <= n; i++) if (v[i] > med - 20 && v[i] < med + 20) q += (v[i] - m) ^ 2
            printf "%d %.3f %.3f %d\n", k, m, (k > 1 ? sqrt(q / (k - 1)) : 0), d }'
}
g0=tb-vmnetem-dc-s0-g0
tor=$(ip -n tb-vmnetem-dc-tor0 -4 -o addr show dev s0g0 | awk '{sub(/\/.*/, "", $4); print $4}')
for mode in idle load; do
  bpid=""
  if [ $mode = load ]; then
    testbedctl bench vmnetem allreduce --ranks dc/s1 -b 1M -e 1M -n 100000 -w 1 >/tmp/bench.txt 2>&1 &
    bpid=$!
    sleep 5
  fi
  ip netns exec $g0 ping -n -c 200 -i 0.01 -W 1 127.0.0.1 >/tmp/base-$mode.txt 2>&1
  ip netns exec $g0 ping -n -c 2000 -i 0.02 -W 2 "$tor" >/tmp/jitter-$mode.txt 2>&1
  running=no
  if [ -n "$bpid" ]; then
    kill -0 "$bpid" 2>/dev/null && running=yes
    kill -INT "$bpid" 2>/dev/null
    for _ in $(seq 30); do kill -0 "$bpid" 2>/dev/null || break; sleep 1; done
    kill -TERM "$bpid" 2>/dev/null
    wait "$bpid" 2>/dev/null
  fi
  read -r bn bmean _ _ <<<"$(rtt_stats /tmp/base-$mode.txt)"
  read -r n mean sd dropped <<<"$(rtt_stats /tmp/jitter-$mode.txt)"
  load=""
  [ $mode = load ] && load=", bench allreduce on dc/s1 running throughout: $running"
  echo "timing: jitter $mode: $n replies ($dropped dropped as stalls), mean RTT $mean ms, base $bmean ms, sigma $sd ms$load"
  # mean: 40 ms configured RTT; tolerance 2 x (1% of 20 ms + 50 us) + 3 standard errors.
  verdict=$(awk -v n="$n" -v m="$mean" -v b="$bmean" -v sd="$sd" 'BEGIN {
    if (n < 1800) { print 0, 0, "too few replies"; exit }
    err = m - b - 40; tol = 2 * (0.2 + 0.05) + 3 * 2.828 / sqrt(n)
    serr = (sd / 2.828 - 1) * 100
    printf "%d %d mean error %+.3f ms (bound +-%.3f), sigma %.3f ms against 2.828 (%+.1f%%, bound +-10%%)\n",
      (err < tol && err > -tol), (serr < 10 && serr > -10), err, tol, sd, serr }')
  read -r mok sok text <<<"$verdict"
  result "$mok" "jitter $mode: mean: $text"
  result "$sok" "jitter $mode: sigma: $text"
done
testbedctl down vmnetem >/dev/null
echo "timing: $fails judged check(s) failed"
[ $fails = 0 ]
