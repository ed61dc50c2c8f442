#!/bin/bash
# The two-guest check (`scripts/labvm pair-check`; issue 35): run on both guests of `scripts/labvm
# pair` at once, node1 holding hz and node2 bj of hz-bj (the [[host]] names of docs/usage.md's
# example), each on its own kernel, joined by the virtual underlay (10.0.0.0/24). First every
# guest becomes a node of a Slurm cluster (pair-lib.sh's slurm_start: the munge key and
# slurm.conf scripts/labvm made for this run; slurmctld on node1, slurmd on both; both idle in
# sinfo). Then node1 drives the lab through Slurm, as docs/usage.md's "Started by Slurm" says
# (scripts/tb-srun for the testbedctl verbs, srun with a task on each guest for the checks),
# while node2 only serves as a Slurm node:
#   srun runs a task on each guest's own kernel (node names and boot ids come back); up of the
#   underlay-MTU case is refused on both; tb-srun up; hz and bj reach each other over Express
#   Connect (BGP across the tunnel, bounded wait); every GPU pings every other by name, from the
#   guest that holds it (a task on each); the seam's RTT (the underlay, guest to guest) and
#   hz<->bj's over the tunnel; bench allreduce with ranks on both guests (values checked); verify
#   across the guests; run of a short timeline (a WAN link-down of Express Connect on both
#   tunnel ends, a flap inside hz); launch of a program with a rank on each guest (each rank
#   pings MASTER_ADDR across the seam); tb-srun down, then no namespace, state, tunnel or lab
#   process on either guest (a task on each looks). Then, by hand on each guest with barriers
#   (pair-lib.sh; powering a machine off is not Slurm's), a host lost mid-run (lost_host below;
#   LABVM_PAIR_LOST=0 skips it, and so does node1 when up or Slurm failed, telling node2 over
#   the underlay; a guest whose up again fails gives it up, telling the other, which gives up
#   at its next barrier): up again, the same run on both, node2 powers off mid-run, node1's
#   run ends within 10 s with exit 1 naming node2, down leaves nothing on node1.
# Judged (the exit status): Slurm on both guests and srun's tasks on both kernels, the
# underlay-MTU refusal (hz/s3 moved to node2: its rail tunnels' 4200-byte packets over the
# 1500-byte underlay) leaving nothing, up, convergence, every ping, bench, launch, down and what
# it leaves on each guest, the lost host's end.
# Shown, not judged, under plain TCG: verify and run, whose bounds are timing bounds (a guest's
# timers fire late by the host's load, docs/lab-vm.md); their exit and report are kept in
# results/. Each step's output is results/<step>.log, its exit and seconds results/steps.tsv
# (node1's has the Slurm-driven steps; srun gathers every task's output into node1's log);
# slurm.conf and cgroup.conf are kept there, the daemons' logs in results/slurm-logs/.
set -u
# shellcheck source=images/labvm/pair-lib.sh
. /opt/testbedctl/images/labvm/pair-lib.sh
pair_begin pair-check # R, h, lab, judged; say, fail and step (a row of steps.tsv each)
scn=/tmp/hzbj-2hosts.toml # written on every guest: tb-srun wants the file at one path on each node
tbsrun=/opt/testbedctl/scripts/tb-srun

# hz-bj with its workload and timeline replaced by a short one whose ranks are on both guests
# (as tests/e2e/multihost_run_test.cc's), hz on node1 and bj on node2.
{
  sed -n '/^\[\[workload\]\]/q;p' /opt/testbedctl/scenarios/hz-bj.toml
  cat <<'EOF'
[[workload]]
name = "ar-seam"
kind = "collective"
op = "allreduce"
algo = "ring"
ranks = ["hz/s0/g0", "hz/s1/g0", "bj/s0/g0", "bj/s1/g0"]
warmup = 1
channels = 1

[[fault]]
at = "2s"
kind = "link-down"
a = "hz/tr"
b = "bj/tr"
link = "ec"
for = "2s"

[[fault]]
at = "6s"
kind = "flap"
a = "hz/s0/g0"
b = "hz/tor0a"
period = "400ms"
count = 2

[expect]
max_stall_ms = 3000
max_detection_ms = 200
max_recovery_ms = 1000

EOF
  pair_hosts
} >"$scn"
cp "$scn" "$R/scenario.toml"
# The underlay-MTU case (drive, below): hz's server 3 moved to node2.
{
  sed '/^\[\[host\]\]/,$d' "$scn"
  pair_hosts hz/s3
} >/tmp/hzbj-mtu.toml

sync_or_fail() { barrier "$1" "${2:-900}" || fail "barrier $1: the other guest did not reach it"; }

say "kernel $(uname -r), boot id $(cat /proc/sys/kernel/random/boot_id), $(nproc) CPU, peers: $LABVM_PEERS"
step doctor 300 testbedctl doctor || true

# Slurm: every guest a node of the run's cluster (slurm_start: the munge key and slurm.conf
# scripts/labvm handed every guest; slurmctld on node1, slurmd on each), then both idle in sinfo.
slurm_ok=1
step slurm 420 bash -c '. /opt/testbedctl/images/labvm/pair-lib.sh && slurm_start 360' || {
  slurm_ok=0
  fail "this guest did not become a node of the Slurm cluster (slurm.log)"
}
cp /etc/slurm/slurm.conf /etc/slurm/cgroup.conf "$R/" 2>/dev/null
sync_or_fail 1

gpus=()
for s in 0 1 2 3; do for g in 0 1 2 3; do gpus+=("hz-s$s-g$g"); done; done
for s in 0 1; do for g in 0 1; do gpus+=("bj-s$s-g$g"); done; done
nodes=${LABVM_GUESTS// /,}
# srun with one task on every guest, for what is not a testbedctl verb (tb-srun runs those).
on_all=(srun -N "$(wc -w <<<"$LABVM_GUESTS")" -w "$nodes" --ntasks-per-node=1)

# node1 drives the lab, every verb through Slurm (scripts/tb-srun, as docs/usage.md's "Started by
# Slurm"); node2 is a Slurm node only, waiting at barrier 7 until node1 is done.
drive() {
  local me=hz-s0-g0 far=bj-s0-g0 up_ok=1
  # Slurm runs a task on each guest's own kernel: each answers with its node name and boot id.
  # shellcheck disable=SC2016 # expanded on each node
  step srun-hosts 300 "${on_all[@]}" bash -c 'echo "$SLURMD_NODENAME $(cat /proc/sys/kernel/random/boot_id)"' ||
    fail "srun with a task on each guest (srun-hosts.log)"
  local mine
  mine=$(cat /proc/sys/kernel/random/boot_id)
  if [ "$(grep -c '^node[0-9]* ' "$R/srun-hosts.log")" != 2 ] ||
    [ "$(awk '/^node[0-9]* /{print $2}' "$R/srun-hosts.log" | sort -u | wc -l)" != 2 ] ||
    ! grep -qx "node1 $mine" "$R/srun-hosts.log"; then
    fail "srun's tasks did not answer from both guests' own kernels (srun-hosts.log; node1's boot id $mine)"
  fi

  # The underlay's MTU (docs/usage.md): hz's server 3 moved to node2 puts its GPUs' rail links
  # (hpn, MTU 4200) in tunnels whose 4200-byte packets the 1500-byte underlay cannot carry: up
  # refuses on each guest, naming the link and ul0's MTU, and builds nothing on either.
  step mtu-refused 300 "$tbsrun" up /tmp/hzbj-mtu.toml
  local mrc=$?
  if [ "$mrc" != 2 ]; then
    fail "up with rail tunnels over a ${LABVM_MTU}-byte underlay: exit $mrc, not 2 (mtu-refused.log)"
    "$tbsrun" down /tmp/hzbj-mtu.toml >/dev/null 2>&1
  elif ! grep -q "mtu 4200) crosses to host" "$R/mtu-refused.log" ||
    ! grep -q "leaves through ul0 with MTU $LABVM_MTU" "$R/mtu-refused.log"; then
    fail "the refusal does not name the rail link's MTU 4200 and ul0's $LABVM_MTU (mtu-refused.log)"
  fi
  # shellcheck disable=SC2016 # expanded on each node
  step mtu-left 120 "${on_all[@]}" bash -c 'ip netns list | sed "s/^/$(hostname): /"'
  [ ! -s "$R/mtu-left.log" ] || fail "the refused up left namespaces: $(head -3 "$R/mtu-left.log")"

  step up 900 "$tbsrun" up "$scn" || {
    up_ok=0
    fail "tb-srun up: exit (see up.log)"
  }
  if [ $up_ok = 1 ]; then
    # BGP across the tunnel: the routes between the regions come after both guests are up.
    local t0=$SECONDS
    until ip netns exec "tb-$lab-$me" ping -c1 -W2 -q "$far" >/dev/null 2>&1; do
      [ $((SECONDS - t0)) -lt 300 ] || break
      sleep 1
    done
    if ip netns exec "tb-$lab-$me" ping -c1 -W2 -q "$far" >/dev/null 2>&1; then
      say "converged: $me reaches $far after $((SECONDS - t0))s"
    else
      fail "$me never reached $far within 300s of tb-srun up"
    fi
    # Every GPU pings every other by name, from the guest that holds it: a task on each guest.
    step pings 600 "${on_all[@]}" bash -c '. /opt/testbedctl/images/labvm/pair-lib.sh && pings "$@"' pings "$lab" "${gpus[@]}" || true
    if grep -q '^FAIL' "$R/pings.log" || [ "$(grep -c '^pings: [1-9]' "$R/pings.log")" != 2 ]; then
      fail "$(grep -c '^FAIL' "$R/pings.log") GPU pair(s) did not answer, or a guest did not report (pings.log)"
    fi
    # The seam: the underlay's round trip between the guests, and hz<->bj over the tunnel
    # (Express Connect: 25 ms each way configured).
    step seam-rtt 120 ping -c 20 -i 0.2 -q "${LABVM_PEERS%% *}" || true
    step wan-rtt 120 ip netns exec "tb-$lab-$me" ping -c 20 -i 0.2 -q "$far" || true

    step bench 300 "$tbsrun" -w "$nodes" -- bench "$lab" allreduce --ranks hz/s0,bj/s0 -b 64K -e 256K -n 3 -w 1 ||
      fail "bench allreduce across the guests through tb-srun (bench.log)"
    # The class whose every link crosses the guests: the WAN's, measured over its tunnel.
    step verify 300 "$tbsrun" -w "$nodes" -- verify "$lab" --link hz/tr:ec bj/tr:ec ||
      say "verify: exit $? (shown, not judged under TCG)"
    step run 600 "$tbsrun" -w "$nodes" -- run "$lab" --size 16K --settle 2 --timeout 20 ||
      say "run: exit $? (shown, not judged under TCG: its [expect] bounds are timing bounds)"
    # shellcheck disable=SC2016
    step launch 300 "$tbsrun" -w "$nodes" -- launch "$lab" --ranks hz/s0/g0,bj/s0/g0 -- \
      sh -c 'ping -c1 -W5 -q "$MASTER_ADDR" >/dev/null && echo "rank $RANK of $WORLD_SIZE on $(hostname) reached $MASTER_ADDR"' ||
      fail "launch with a rank on each guest through tb-srun (launch.log)"
  fi

  step down 300 "$tbsrun" down "$scn" || fail "tb-srun down"
  step left 120 "${on_all[@]}" bash -c '. /opt/testbedctl/images/labvm/pair-lib.sh && leftovers'
  [ ! -s "$R/left.log" ] || fail "left after down: $(head -5 "$R/left.log")"
  [ $up_ok = 1 ]
}
# Only node1 knows whether the lab came up and the checks ran: before barrier 7 it raises point
# 10 (the lost-host step follows) or 11 (it does not: the lab did not come up, Slurm did not, or
# LABVM_PAIR_LOST=0), and node2 reads which once past the barrier, so both skip the step together
# instead of node2 waiting out the step's barriers alone.
lost_go=10 lost_skip=11
up_ok=1
if [ "$h" = node1 ]; then
  if [ $slurm_ok = 1 ]; then
    drive || up_ok=0
  else
    up_ok=0
  fi
  if [ $up_ok = 1 ] && [ "${LABVM_PAIR_LOST:-1}" = 1 ]; then
    mark $lost_go
  else
    say "the lost-host step is skipped (node2 told: point $lost_skip)"
    mark $lost_skip
  fi
fi
if ! barrier 7 1200; then
  fail "barrier 7: the other guest did not reach it"
  up_ok=0
elif [ "$h" != node1 ]; then
  case $(first_mark node1 60 $lost_go $lost_skip) in
  "$lost_go") ;;
  "$lost_skip")
    say "node1 skips the lost-host step: so does $h"
    up_ok=0
    ;;
  *)
    fail "node1 did not say within 60 s whether the lost-host step follows (points $lost_go, $lost_skip)"
    up_ok=0
    ;;
  esac
fi
if [ "$h" = node1 ]; then me=hz-s0-g0 far=bj-s0-g0; else me=bj-s0-g0 far=hz-s0-g0; fi

# A host that dies mid-run: the lab up again on both, the same run on both; 2 s into node2's
# timeline, node2 powers off (sysrq o: no shutdown, no FIN, the NIC gone,
# as a pulled plug). node1's run must end within 10 s of node2's last answer on the underlay
# (a ping every 0.2 s, timestamped) with exit 1 naming node2, and down leave nothing on node1.
# node2 first sends its results and its verdict so far (as the init would), then dies.
#
# The step's barriers (8 and 9) wait up to 900 s each. A guest that gives the step up (its up
# again failed, or the other did not reach a barrier in time) raises point 12; after a failed up
# it stays until the other answers there too. The other's waits at barriers 8 and 9 watch point
# 12 as well (pair-lib.sh's barrier_or), so it gives up as soon as it gets there — a line, not a
# failure: the failure is the first guest's — and raises 12 in turn. Both are off within
# seconds of the later one's barrier, not after two 900 s waits.
lost_quit=12
peer=${LABVM_PEERS%% *}
# lost_sync N: barrier N of the lost-host step; 1 when this guest gives the step up instead: the
# other gave it up first (its point 12), or did not come within 900 s (a judged failure).
lost_sync() {
  local who
  who=$(barrier_or "$1" $lost_quit 900)
  case $? in
  0) return 0 ;;
  2) say "$who gave up the lost-host step (its point $lost_quit) before barrier $1: so does $h" ;;
  *) fail "barrier $1: the other guest did not reach it" ;;
  esac
  mark $lost_quit
  sleep 3 # answer at point 12 a little longer: the other may be looking for it
  return 1
}
# lost_abandon WHAT: this guest gives the lost-host step up, a judged failure (WHAT): it raises
# point 12 and waits until the other answers there too, as it does at its next barrier (8 at
# the latest: after its own up again, 900 s and timeout's 10 s kill; bounded here at 930 s).
lost_abandon() {
  fail "$1"
  mark $lost_quit
  say "$h gives up the lost-host step (point $lost_quit): waiting for $peer to see it"
  if first_mark "$peer" 930 $lost_quit >/dev/null; then
    say "$peer gave it up too"
  else
    say "$peer did not answer at point $lost_quit within 930 s"
  fi
}
lost_host() {
  step up-again 900 testbedctl up "$scn" --host "$h" || {
    lost_abandon "up --host $h (again, for the lost host)"
    return
  }
  lost_sync 8 || return
  t0=$SECONDS
  until ip netns exec "tb-$lab-$me" ping -c1 -W2 -q "$far" >/dev/null 2>&1; do
    [ $((SECONDS - t0)) -lt 300 ] || break
    sleep 1
  done
  lost_sync 9 || return
  if [ "$h" = node1 ]; then
    ping -D -i 0.2 -W1 "${LABVM_PEERS%% *}" >"$R/lost-ping.log" 2>&1 &
    local pp=$! t_end last
    step lost-run 180 testbedctl run "$lab" --size 16K --settle 10 --timeout 20
    local rc=$?
    t_end=$(date +%s.%N)
    kill "$pp" 2>/dev/null
    wait "$pp" 2>/dev/null
    last=$(grep -o '^\[[0-9.]*\] .*bytes from' "$R/lost-ping.log" | tail -1 | sed 's/^\[\([0-9.]*\)\].*/\1/')
    local gap
    gap=$(awk -v a="$t_end" -v b="${last:-0}" 'BEGIN{printf "%.1f", a-b}')
    say "lost host: run exit $rc, ${gap}s after node2's last answer on the underlay"
    printf 'lost-host-gap\t%s\t%s\n' "$rc" "$gap" >>"$R/steps.tsv"
    [ "$rc" = 1 ] || fail "the run with node2 powered off: exit $rc, not 1 (lost-run.log)"
    grep -q node2 "$R/lost-run.log" || fail "the run's error does not name the lost host node2 (lost-run.log)"
    [ -n "$last" ] && awk -v g="$gap" 'BEGIN{exit !(g <= 10)}' ||
      fail "the run ended ${gap}s after node2's last answer (bound 10 s)"
    step down-survivor 300 testbedctl down "$lab" --host "$h" || fail "down --host $h after losing node2"
    left=$(ip netns list; ls /run/testbedctl 2>/dev/null; ip -d link show type vxlan)
    procs=$(ps -eo comm= | grep -E '^(tb-|testbedctl|bgpd|zebra|bfdd|watchfrr)' || true)
    [ -z "$left" ] || fail "left on the survivor: $left"
    [ -z "$procs" ] || fail "left running on the survivor: $procs"
  else
    testbedctl run "$lab" --size 16K --settle 10 --timeout 20 >"$R/lost-run.log" 2>&1 &
    t0=$SECONDS
    # Mid-run: 2 s into the timeline (its "timeline:" line), the link-down in force.
    until grep -q '^timeline:' "$R/lost-run.log" 2>/dev/null; do
      [ $((SECONDS - t0)) -lt 120 ] || break
      sleep 0.2
    done
    sleep 2
    say "powering off mid-run ($(tail -n 1 "$R/lost-run.log"))"
    say "done: $(wc -l <"$R/steps.tsv") steps, $([ -f "$R/failures" ] && wc -l <"$R/failures" || echo 0) judged failure(s)"
    # What the init does after the command, then the plug pulled.
    stty -F /dev/ttyS1 raw -echo 2>/dev/null
    {
      echo "LABVM-RESULTS-BEGIN"
      tar -C "${R%/*}" -czf - "${R##*/}" | base64 -w 76
      echo "LABVM-RESULTS-END"
    } >/dev/ttyS1
    echo "LABVM-EXIT rc=$judged"
    echo o >/proc/sysrq-trigger
    sleep 30
  fi
}
if [ $up_ok = 1 ] && [ "${LABVM_PAIR_LOST:-1}" = 1 ]; then
  lost_host
else
  # The guest that reached barrier 7 last went on at once; the other may still be polling for
  # it (and node2 then reads node1's point 10 or 11): answer a little longer before this guest
  # powers off.
  sleep 3
fi

mkdir -p "$R/slurm-logs"
cp /var/log/slurm/*.log /var/log/munge/munged.log "$R/slurm-logs/" 2>/dev/null
say "done: $(wc -l <"$R/steps.tsv") steps, $([ -f "$R/failures" ] && wc -l <"$R/failures" || echo 0) judged failure(s)"
exit $judged
