#!/bin/bash
# Runs in each guest of `scripts/labvm pair` before its command: names the guest (labvm.host=
# on the kernel command line), puts its underlay address (labvm.addr=, a /24) on its virtio NIC
# renamed ul0 with the underlay's MTU (labvm.mtu=), writes every guest into /etc/hosts
# (labvm.peers=node1=10.0.0.1,...), waits until every other guest answers a ping (they boot at
# their own pace; at most LABVM_PEER_WAIT seconds, default 300), records this guest's kernel
# boot id in results/boot_id, then runs the command with LABVM_HOST, LABVM_ADDR, LABVM_MTU,
# LABVM_PEERS (the other guests' names) and LABVM_GUESTS (all names) in its environment.
# images/labvm/pair-lib.sh has the helpers a pair script uses (barrier).
set -u
host="" addr="" mtu=1500 peers=""
for w in $(</proc/cmdline); do
  case $w in
  labvm.host=*) host=${w#labvm.host=} ;;
  labvm.addr=*) addr=${w#labvm.addr=} ;;
  labvm.mtu=*) mtu=${w#labvm.mtu=} ;;
  labvm.peers=*) peers=${w#labvm.peers=} ;;
  esac
done
up() { local u; read -r u _ </proc/uptime; echo "$u"; }
say() { echo "pair[$host $(up)s]: $*"; }
[ -n "$host" ] && [ -n "$addr" ] || {
  echo "pair-guest: no labvm.host= / labvm.addr= on the kernel command line (run through scripts/labvm pair)" >&2
  exit 2
}
hostname "$host"
echo "$host" >/etc/hostname
dev=""
for d in /sys/class/net/*; do
  d=${d##*/}
  [ "$d" != lo ] && [ "$(cat "/sys/class/net/$d/type")" = 1 ] && [ -e "/sys/class/net/$d/device" ] && { dev=$d; break; }
done
[ -n "$dev" ] || { say "no underlay NIC (is virtio_net loaded? images/labvm/modules)"; exit 2; }
ip link set "$dev" down
ip link set "$dev" name ul0
ip link set ul0 mtu "$mtu" up || { say "cannot set the underlay MTU $mtu on ul0"; exit 2; }
ip addr add "$addr" dev ul0
all=() others=()
{
  echo "127.0.0.1 localhost"
  for p in ${peers//,/ }; do
    echo "${p#*=} ${p%%=*}"
  done
} >/etc/hosts
for p in ${peers//,/ }; do
  all+=("${p%%=*}")
  [ "${p%%=*}" = "$host" ] || others+=("${p%%=*}")
done
results=${TESTBEDCTL_RESULTS_DIR:-/opt/testbedctl/results}
mkdir -p "$results"
cat /proc/sys/kernel/random/boot_id >"$results/boot_id"
echo "$host" >"$results/host"
say "ul0 $addr mtu $(cat /sys/class/net/ul0/mtu), boot id $(cat "$results/boot_id"); waiting for ${others[*]}"
limit=${LABVM_PEER_WAIT:-300}
t0=$SECONDS
for p in "${others[@]}"; do
  until ping -c1 -W1 -q "$p" >/dev/null 2>&1; do
    if [ $((SECONDS - t0)) -ge "$limit" ]; then
      say "$p did not answer on the underlay within ${limit}s"
      exit 3
    fi
    sleep 0.5
  done
done
say "every guest answers (${all[*]}) after $((SECONDS - t0))s"
export LABVM_HOST=$host LABVM_ADDR=$addr LABVM_MTU=$mtu LABVM_PEERS="${others[*]}" LABVM_GUESTS="${all[*]}"
"$@"
