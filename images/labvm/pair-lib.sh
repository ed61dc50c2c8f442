# shellcheck shell=bash
# Helpers for scripts run on every guest of `scripts/labvm pair` (source it; pair-guest.sh set
# LABVM_HOST, LABVM_PEERS and /etc/hosts): pair_begin, say, fail, step, pair_hosts (what every
# pair script starts with), barrier, mark, first_mark, barrier_or, slurm_start, pings, leftovers.

# pair_begin NAME: the prelude of a pair script (pair-check.sh, pair-rdma.sh, pair-mtu.sh). Sets
# R, the results directory (TESTBEDCTL_RESULTS_DIR, default /opt/testbedctl/results: the init
# sends it back), made here; h, this guest's name; lab, the lab's name (hzbj); judged, the exit
# status so far (0; fail makes it 1); say's prefix NAME; and step's settings to pair-check.sh's:
# step_tail=40 (the log's last lines shown on the console), step_kill=10 (seconds from timeout's
# TERM to its KILL), step_exit_line=0 (a row of $R/steps.tsv per step; 1: "exit N" as the log's
# last line instead, which pair-rdma.sh and pair-mtu.sh read back with tail -1).
pair_begin() {
  pair_name=$1
  R=${TESTBEDCTL_RESULTS_DIR:-/opt/testbedctl/results}
  mkdir -p "$R"
  # shellcheck disable=SC2034 # read by the scripts that source this
  h=$LABVM_HOST lab=hzbj
  judged=0 step_tail=40 step_kill=10 step_exit_line=0
}

# say WORDS: a line on the console, "NAME[HOST]: WORDS".
say() { echo "${pair_name}[$LABVM_HOST]: $*"; }

# fail WHAT: a judged failure: the exit status (judged) becomes 1, WHAT goes to the console and
# to $R/failures (scripts/labvm prints each guest's).
fail() {
  # shellcheck disable=SC2034 # the sourcing script's exit status
  judged=1
  say "FAIL: $*"
  echo "$*" >>"$R/failures"
}

# step NAME LIMIT CMD...: runs CMD bounded by LIMIT seconds, its output in $R/NAME.log, the log's
# last step_tail lines on the console (each "[NAME] "); then its exit and wall seconds as a row
# of $R/steps.tsv and a line on the console or, with step_exit_line=1, "exit N" appended to the
# log (before it is shown). Returns CMD's exit.
step() {
  local name=$1 lim=$2 t0 rc secs
  shift 2
  t0=$(date +%s.%N)
  timeout --kill-after="$step_kill" "$lim" "$@" >"$R/$name.log" 2>&1
  rc=$?
  secs=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN{printf "%.1f", a-b}')
  [ "$step_exit_line" != 1 ] || echo "exit $rc" >>"$R/$name.log"
  sed "s/^/[$name] /" "$R/$name.log" | tail -n "$step_tail"
  if [ "$step_exit_line" != 1 ]; then
    printf '%s\t%s\t%s\n' "$name" "$rc" "$secs" >>"$R/steps.tsv"
    say "$name: exit $rc in ${secs}s"
  fi
  return $rc
}

# pair_hosts [SERVER]: the [[host]] tables of hz-bj over the two guests, hz on node1 and bj on
# node2 (with SERVER, e.g. hz/s3, also on node2).
pair_hosts() {
  printf '[[host]]\nname = "node1"\nunderlay = "10.0.0.1"\nregions = ["hz"]\n\n'
  printf '[[host]]\nname = "node2"\nunderlay = "10.0.0.2"\nregions = ["bj"]\n'
  [ -z "${1:-}" ] || printf 'servers = ["%s"]\n' "$1"
}

# barrier N [LIMIT]: this guest has reached point N (1..126) of the script; returns 0 once every
# other guest has reached it too, 1 after LIMIT seconds (default 600) naming who has not. Each
# point is an address, 10.0.(128+N).<guest's number>/32 on ul0, that the others ping: no
# daemon, nothing but the underlay, and a guest that went on keeps answering for the rest.
barrier() {
  local n=$1 limit=${2:-600} t0=$SECONDS p
  mark "$n"
  for p in $LABVM_PEERS; do
    first_mark "$p" $((limit - (SECONDS - t0))) "$n" >/dev/null || {
      echo "pair[$LABVM_HOST]: barrier $n: $p did not reach it within ${limit}s" >&2
      return 1
    }
  done
}

# point_ip N HOST: the address of point N on guest HOST (its number: the last octet of its
# underlay address in /etc/hosts).
point_ip() {
  echo "10.0.$((128 + $1)).$(awk -v h="$2" '$2 == h { split($1, a, "."); print a[4] }' /etc/hosts)"
}

# mark N: raises point N on this guest and returns at once (barrier N without the wait). A
# guest says which way it goes by the point it raises; the others read it with first_mark.
mark() {
  ip route replace 10.0.128.0/17 dev ul0 scope link 2>/dev/null
  ip addr replace "$(point_ip "$1" "$LABVM_HOST")/32" dev ul0
}

# first_mark PEER LIMIT N...: waits until guest PEER answers at one of the points N... (raised
# by its mark or barrier) and prints that N; 1 after LIMIT seconds, printing nothing.
first_mark() {
  local peer=$1 limit=$2 t0=$SECONDS n
  shift 2
  ip route replace 10.0.128.0/17 dev ul0 scope link 2>/dev/null
  while :; do
    for n in "$@"; do
      if ping -c1 -W1 -q "$(point_ip "$n" "$peer")" >/dev/null 2>&1; then
        echo "$n"
        return 0
      fi
    done
    [ $((SECONDS - t0)) -lt "$limit" ] || return 1
    sleep 0.3
  done
}

# barrier_or N Q [LIMIT]: barrier N, which another guest may give up instead by raising point Q
# (mark Q) where it stops: 0 once every other guest has reached N; 2 as soon as one answers at
# Q rather than N (printing its name); 1 after LIMIT seconds (default 600), naming who has not
# reached N. N is looked for first: a guest that reached N and gave up later counts as there.
barrier_or() {
  local n=$1 q=$2 limit=${3:-600} t0=$SECONDS p
  mark "$n"
  for p in $LABVM_PEERS; do
    case $(first_mark "$p" $((limit - (SECONDS - t0))) "$n" "$q") in
    "$n") ;;
    "$q")
      echo "$p"
      return 2
      ;;
    *)
      echo "pair[$LABVM_HOST]: barrier $n: $p did not reach it within ${limit}s" >&2
      return 1
      ;;
    esac
  done
}

# slurm_start [LIMIT]: makes this guest a node of the run's Slurm cluster, as an administrator
# would with the files scripts/labvm handed every guest (/labvm/slurm: pair_slurm_files): the
# munge key into /etc/munge (owner munge, mode 0400), slurm.conf and cgroup.conf into
# /etc/slurm; then munged (as munge), slurmctld on the first guest (SlurmctldHost), slurmd on
# every guest. Returns 0 once munge answers here and sinfo shows every guest's node idle, 1
# after LIMIT seconds (default 300) saying what was missing (the daemons' logs: /var/log/munge,
# /var/log/slurm).
slurm_start() {
  local limit=${1:-300} t0=$SECONDS d=/labvm/slurm st="" n
  [ -f "$d/munge.key" ] && [ -f "$d/slurm.conf" ] || {
    echo "pair[$LABVM_HOST]: no munge key or slurm.conf in $d (run through scripts/labvm pair)" >&2
    return 1
  }
  install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
  install -d -o munge -g munge -m 0755 /run/munge
  install -o munge -g munge -m 0400 "$d/munge.key" /etc/munge/munge.key
  install -d -m 0755 /etc/slurm
  install -m 0644 "$d/slurm.conf" "$d/cgroup.conf" /etc/slurm/
  install -d -o slurm -g slurm -m 0755 /var/lib/slurm /var/lib/slurm/slurmctld /var/log/slurm
  install -d -m 0755 /var/lib/slurm/slurmd
  # Where slurmd makes its step daemons' cgroup scope (cgroup.conf: IgnoreSystemd, so not systemd).
  install -d -m 0755 /sys/fs/cgroup/system.slice
  runuser -u munge -- /usr/sbin/munged || {
    echo "pair[$LABVM_HOST]: munged did not start ($(tail -n 3 /var/log/munge/munged.log 2>/dev/null))" >&2
    return 1
  }
  until munge -n 2>/dev/null | unmunge >/dev/null 2>&1; do
    [ $((SECONDS - t0)) -lt "$limit" ] || {
      echo "pair[$LABVM_HOST]: munge did not answer within ${limit}s" >&2
      return 1
    }
    sleep 0.5
  done
  # SlurmctldHost's guest (the first) runs the controller; every guest a node daemon.
  if grep -q "^SlurmctldHost=$LABVM_HOST(" /etc/slurm/slurm.conf; then
    slurmctld || { echo "pair[$LABVM_HOST]: slurmctld did not start" >&2; return 1; }
  fi
  slurmd || { echo "pair[$LABVM_HOST]: slurmd did not start" >&2; return 1; }
  n=$(grep -c '^NodeName=' /etc/slurm/slurm.conf)
  until st=$(sinfo -h -N -o '%N %t' 2>/dev/null) && [ "$(grep -c ' idle$' <<<"$st")" = "$n" ]; do
    [ $((SECONDS - t0)) -lt "$limit" ] || {
      echo "pair[$LABVM_HOST]: not all $n nodes idle within ${limit}s; sinfo: $(paste -sd' ' <<<"${st:-nothing}")" >&2
      return 1
    }
    sleep 1
  done
  echo "pair[$LABVM_HOST]: Slurm up after $((SECONDS - t0))s: $(paste -sd' ' <<<"$st")"
}

# pings LAB GPU...: every GPU of LAB that this guest holds pings every other GPU by name (each
# target twice at most); prints "FAIL SRC -> DST" for each pair that did not answer, then
# "pings: N pairs from HOST's GPUs". pair-check.sh runs it on every guest at once through srun.
pings() {
  local lab=$1 src dst n=0
  shift
  for src in "$@"; do
    [ -e "/run/netns/tb-$lab-$src" ] || continue
    for dst in "$@"; do
      [ "$dst" != "$src" ] || continue
      n=$((n + 1))
      (ip netns exec "tb-$lab-$src" ping -c1 -W5 -q "$dst" >/dev/null 2>&1 ||
        ip netns exec "tb-$lab-$src" ping -c1 -W5 -q "$dst" >/dev/null 2>&1 ||
        echo "FAIL $src -> $dst") &
    done
    wait
  done
  echo "pings: $n pairs from $(hostname)'s GPUs"
}

# leftovers: what a lab left on this guest after down (namespaces, testbedctl's state, VXLAN
# devices, lab processes), one "HOST: ..." line each; nothing when there is none.
leftovers() {
  local left procs
  left=$(ip netns list; ls /run/testbedctl 2>/dev/null; ip -d link show type vxlan)
  procs=$(ps -eo comm= | grep -E '^(tb-|testbedctl|bgpd|zebra|bfdd|watchfrr)' || true)
  [ -z "$left" ] || echo "$left" | sed "s/^/$(hostname): left: /"
  [ -z "$procs" ] || echo "$procs" | sed "s/^/$(hostname): running: /"
  return 0
}
