#!/bin/bash
# What a 1500-byte underlay does to a tunnel whose link's MTU is larger (issue 35), on two guests
# of `scripts/labvm pair` (run: scripts/labvm pair --add DIR --
# /opt/testbedctl/images/labvm/pair-mtu.sh). hz on node1, bj and hz's server 3 on node2, so
# hz/s3's GPUs' rail links (hpn, MTU 4200: tunnels of MTU 4150, 4200-byte packets on the
# underlay) cross the 1500-byte underlay.
#   1. With a testbedctl that does not check the underlay's MTU (DIR = main-bin/ with one and
#      its tb-probe, tb-rank, tb-delayd; in the guest /opt/testbedctl/main-bin/): up on both;
#      from hz/s3/g0 (node2) to hz/s0/g0 (node1) over the rail: pings of 1372 and 4000 bytes with DF and 4000 without, the outer fragments the
#      kernels counted (/proc/net/snmp), a TCP bench across (its rows), and RoCE (ib_send_bw
#      between the two GPUs' rxe devices, 64 KiB messages at RoCE MTU 4096). Shown, not judged.
#   2. With this checkout's testbedctl: up --host on each guest refuses (exit 2, the message
#      naming the rail link, MTU 4200 and ul0's 1500) and builds nothing. Judged.
set -u
# shellcheck source=images/labvm/pair-lib.sh
. /opt/testbedctl/images/labvm/pair-lib.sh
pair_begin pair-mtu
# Each step's exit as its log's last line, read back with tail -1; fewer of its lines shown.
step_exit_line=1 step_tail=25 step_kill=5
scn=/tmp/hzbj-mtu.toml
old=/opt/testbedctl/main-bin/testbedctl
{
  sed -n '/^\[\[workload\]\]/q;p' /opt/testbedctl/scenarios/hz-bj.toml
  pair_hosts hz/s3
} >"$scn"
snmp() { awk '/^Ip:/ { if (!n++) { for (i = 1; i <= NF; i++) k[i] = $i } else for (i = 1; i <= NF; i++) if (k[i] ~ /Frag|Reasm/) printf "%s=%s ", k[i], $i }' /proc/net/snmp; }

say "1: $($old --version 2>&1 | head -1) (no underlay MTU check) up --host $h, underlay MTU $(cat /sys/class/net/ul0/mtu)"
if [ -x "$old" ]; then
  step old-up 900 "$old" up "$scn" --host "$h" || say "old up: exit $?"
  barrier 1 900 || say "barrier 1 missed"
  if [ "$h" = node2 ]; then
    t0=$SECONDS
    until ip netns exec "tb-$lab-hz-s3-g0" ping -c1 -W2 -q hz-s0-g0 >/dev/null 2>&1; do
      [ $((SECONDS - t0)) -lt 180 ] || break
      sleep 1
    done
    say "hz-s3-g0 -> hz-s0-g0 (the rail, across the seam) after $((SECONDS - t0))s"
    ip netns exec "tb-$lab-hz-s3-g0" ip route get "$(getent -s files hosts hz-s0-g0 | awk '{print $1}')" 2>&1 | tee "$R/route.log"
    echo "before: $(snmp)" | tee "$R/snmp.log"
    step ping-1372-df 30 ip netns exec "tb-$lab-hz-s3-g0" ping -c3 -W3 -M "do" -s 1372 hz-s0-g0
    step ping-4000-df 30 ip netns exec "tb-$lab-hz-s3-g0" ping -c3 -W3 -M "do" -s 4000 hz-s0-g0
    echo "after DF: $(snmp)" | tee -a "$R/snmp.log"
    step ping-4000-nodf 30 ip netns exec "tb-$lab-hz-s3-g0" ping -c3 -W3 -M dont -s 4000 hz-s0-g0
    echo "after no-DF: $(snmp)" | tee -a "$R/snmp.log"
    step route-after 10 ip netns exec "tb-$lab-hz-s3-g0" ip route get "$(getent -s files hosts hz-s0-g0 | awk '{print $1}')"
  fi
  barrier 2 300 || say "barrier 2 missed"
  echo "$h before bench: $(snmp)" | tee -a "$R/snmp.log"
  step old-bench 300 "$old" bench "$lab" allreduce --ranks hz/s0/g0,hz/s3/g0 -b 64K -e 1M -n 5 -w 1 --timeout 30 || true
  echo "$h after bench: $(snmp)" | tee -a "$R/snmp.log"
  barrier 3 300 || say "barrier 3 missed"
  # RoCE between the two GPUs' rxe devices (the rail's): server on node1, client on node2.
  if [ "$h" = node1 ]; then
    dev=$(ip netns exec "tb-$lab-hz-s0-g0" rdma link show 2>/dev/null | awk '{print $2}' | cut -d/ -f1 | head -1)
    say "rxe device in hz-s0-g0: ${dev:-none}"
    (step roce-server 90 ip netns exec "tb-$lab-hz-s0-g0" ib_send_bw -d "$dev" -x 1 -s 65536 -n 50 -F -m 4096) &
    sleep 3
    barrier 4 120 || say "barrier 4 missed"
    wait
  else
    barrier 4 120 || say "barrier 4 missed"
    sleep 2
    dev=$(ip netns exec "tb-$lab-hz-s3-g0" rdma link show 2>/dev/null | awk '{print $2}' | cut -d/ -f1 | head -1)
    addr=$(getent -s files hosts hz-s0-g0 | awk '{print $1}')
    say "rxe device in hz-s3-g0: ${dev:-none}; server $addr"
    step roce-client 80 ip netns exec "tb-$lab-hz-s3-g0" ib_send_bw -d "$dev" -x 1 -s 65536 -n 50 -F -m 4096 "$addr" || true
  fi
  barrier 5 300 || say "barrier 5 missed"
  step old-down 300 "$old" down "$lab" --host "$h" || say "old down: exit $?"
fi
barrier 6 600 || say "barrier 6 missed"

say "2: this checkout's testbedctl: up --host $h on a ${LABVM_MTU}-byte underlay"
step new-up 300 testbedctl up "$scn" --host "$h"
r=$(tail -1 "$R/new-up.log")
if [ "$r" != "exit 2" ]; then
  say "FAIL: up --host $h: $r, not the refusal (exit 2)"
  judged=1
elif ! grep -q 'mtu 4200) crosses to host' "$R/new-up.log" || ! grep -q "leaves through ul0 with MTU $LABVM_MTU" "$R/new-up.log"; then
  say "FAIL: the refusal does not name the rail link's MTU 4200 and ul0's $LABVM_MTU"
  judged=1
fi
left=$(ip netns list; ls /run/testbedctl 2>/dev/null)
[ -z "$left" ] || {
  say "FAIL: left after the refusal: $left"
  judged=1
}
barrier 7 120 || true
exit $judged
