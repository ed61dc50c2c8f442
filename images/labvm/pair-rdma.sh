#!/bin/bash
# RDMA across the seam (issue 35 item 4; `scripts/labvm pair-rdma`, or by hand:
# scripts/labvm pair --underlay-mtu 9000 -- /opt/testbedctl/images/labvm/pair-rdma.sh).
# Two guests (each its own kernel, with rdma_rxe), hz-bj with hz/s0..s2 on node1 and bj plus hz's
# server 3 on node2, so hz/s3's GPUs' rail links (hpn, MTU 4200) are VXLAN tunnels over the
# underlay, which must take their 4200-byte packets (the tunnel's MTU 4150 plus 50 of VXLAN): a
# 9000-byte one. Then, between hz/s0/g0 (node1) and hz/s3/g0 (node2), each over its rxe device
# on the rail port its route takes, across the seam:
#   rping (rdma_cm, RC, 10 round trips of 64 bytes), ib_send_lat -R and ib_send_bw -R (perftest
#   through rdma_cm: 64 B latency, 64 KiB messages), the rxe devices' hw_counters before and
#   after; then testbedctl bench allreduce --ranks hz/s0/g0,hz/s3/g0 over --transport rdma and
#   over tcp (the same pair, the same seam). Every step bounded by timeout; each one's output in
#   results/<step>.log with its exit in the last line. Under TCG (no KVM here): functional, and
#   figures of the emulation, not of RoCE.
# Exit: 0 when up, the convergence, rping, both perftests and both benches exited 0 (the bench
# with --transport rdma naming rdma in its report); else 1 (each failure named on the console
# and in results/failures). With --mixed, then also a host without rxe (below).
set -u
# shellcheck source=images/labvm/pair-lib.sh
. /opt/testbedctl/images/labvm/pair-lib.sh
pair_begin pair-rdma
# Each step's exit as its log's last line, read back with tail -1; fewer of its lines shown.
step_exit_line=1 step_tail=30 step_kill=5
scn=/tmp/hzbj-rdma.toml
ns1=tb-$lab-hz-s0-g0 ns2=tb-$lab-hz-s3-g0
{
  sed -n '/^\[\[workload\]\]/q;p' /opt/testbedctl/scenarios/hz-bj.toml
  pair_hosts hz/s3
} >"$scn"
cp "$scn" "$R/scenario.toml"
# The rxe hw_counters of the device on NS's rail that moved packets or retried.
counters() {
  local d=/sys/class/infiniband/$1/ports/1/hw_counters f out=""
  for f in sent_pkts rcvd_pkts retry_exceeded_err send_rnr_err rcvd_seq_err duplicate_request \
    out_of_seq_request completer_retry_err ack_deferred; do
    [ -r "$d/$f" ] && out+="$f=$(cat "$d/$f") "
  done
  echo "${out:-no hw_counters at $d}"
}

say "kernel $(uname -r), ul0 MTU $(cat /sys/class/net/ul0/mtu), $(nproc) vCPU, accel $(cat /labvm/accel 2>/dev/null)"
step doctor 300 testbedctl doctor || true
grep -E '^(rdma_netlink|rdma_rxe) ' "$R/doctor.log" || true
step up 900 testbedctl up "$scn" --host "$h" || fail "up --host $h (up.log)"
grep -E '^rdma' "$R/up.log" || true
barrier 1 900 || fail "barrier 1: the other guest's up did not end"

# This guest's end: its GPU, the rail port its route to the far GPU leaves by (hz has two ToRs
# per rail: raila, railb), that port's rxe device (named after the namespace and port:
# plan/rxe.h), its rail address and RoCE v2 GID index (status --json).
if [ "$h" = node1 ]; then me=$ns1 far=hz-s3-g0; else me=$ns2 far=hz-s0-g0; fi
fara=$(ip netns exec "$me" getent hosts "$far" | awk '{print $1}')
ifn=$(ip -n "$me" route get "$fara" | grep -o 'dev [^ ]*' | head -1 | cut -d' ' -f2)
dev=$me-$ifn
step rdma-link 10 ip netns exec "$me" rdma link show || true
gid=$(testbedctl status "$lab" --json 2>/dev/null | tr -d ' \n' | grep -o "\"gid_index\":[0-9]*,\"ifname\":\"$ifn\",\"name\":\"$dev\"" | sed 's/"gid_index":\([0-9]*\),.*/\1/')
addr=$(ip -n "$me" -4 -o addr show dev "$ifn" | awk '{print $4}' | cut -d/ -f1)
say "$me: rail port $ifn, rxe $dev, GID index ${gid:-?}, rail address $addr; far end $far at $fara"
# Each rail port's netdev MTU (a port whose link crosses the seam is a VXLAN device: the link's
# MTU less 50) and its rxe device's RoCE MTU (rxe takes the largest of 1024/2048/4096 that fits
# the netdev's MTU less its headers).
for p in $(ip -n "$me" -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^rail'); do
  say "$me $p: $(ip -n "$me" -d -o link show "$p" | grep -o 'mtu [0-9]*\|vxlan id [0-9]*\|veth' | tr '\n' ' ')rxe $me-$p $(ibv_devinfo -d "$me-$p" 2>/dev/null | awk '/active_mtu/{print "active_mtu", $2}')"
done
gid=${gid:-1}

# The rail across the seam answers (the routes are the ToR's on node1: bounded wait).
t0=$SECONDS
until ip netns exec "$me" ping -c1 -W2 -q "$far" >/dev/null 2>&1; do
  [ $((SECONDS - t0)) -lt 180 ] || break
  sleep 1
done
step ping-rail 40 ip netns exec "$me" ping -c10 -i0.2 -W3 "$far" || fail "$me cannot ping $far over the rail"
step ping-rail-4000df 20 ip netns exec "$me" ping -c3 -W3 -M "do" -s 4000 "$far" || fail "4000-byte DF ping over the rail across the seam"
for p in raila railb rail; do [ -e "/sys/class/infiniband/$me-$p" ] && say "before RoCE: $me-$p $(counters "$me-$p")"; done
barrier 2 300 || fail "barrier 2"

# server/client pairs: node1's hz/s0/g0 serves, node2's hz/s3/g0 dials. Each pair: the server
# starts, barrier, the client starts 2 s later; both bounded.
pair_step() { # NAME LIMIT N SERVER-CMD... -- CLIENT-CMD... (the client gets the server's address last)
  local name=$1 lim=$2 n=$3 srv=() cli=()
  shift 3
  while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
  shift
  cli=("$@")
  if [ "$h" = node1 ]; then
    step "$name-server" "$lim" ip netns exec "$me" "${srv[@]}" &
    local p=$!
    sleep 1
    barrier "$n" 120 || fail "barrier $n ($name)"
    wait $p || fail "$name server: $(tail -1 "$R/$name-server.log")"
  else
    barrier "$n" 120 || fail "barrier $n ($name)"
    sleep 2
    step "$name-client" "$((lim - 5))" ip netns exec "$me" "${cli[@]}" "$fara" ||
      fail "$name client: $(tail -1 "$R/$name-client.log")"
  fi
}
pair_step rping 60 3 rping -s -v -C 10 -S 64 -a 0.0.0.0 -- rping -c -v -C 10 -S 64 -a
pair_step send-lat 90 4 ib_send_lat -R -d "$dev" -x "$gid" -s 64 -n 200 -F -- \
  ib_send_lat -R -d "$dev" -x "$gid" -s 64 -n 200 -F
pair_step send-bw 120 5 ib_send_bw -R -d "$dev" -x "$gid" -s 65536 -n 200 -F -m 4096 --report_gbits -- \
  ib_send_bw -R -d "$dev" -x "$gid" -s 65536 -n 200 -F -m 4096 --report_gbits
for p in raila railb rail; do [ -e "/sys/class/infiniband/$me-$p" ] && say "after RoCE: $me-$p $(counters "$me-$p")"; done
barrier 6 300 || fail "barrier 6"

# testbedctl's own: AllReduce between the two GPUs, rail pair across the seam, rdma then tcp.
for tr in rdma tcp; do
  step "bench-$tr" 400 testbedctl bench "$lab" allreduce --ranks hz/s0/g0,hz/s3/g0 --transport "$tr" \
    -b 64K -e 1M -f 4 -n 5 -w 1 --timeout 60 || fail "bench --transport $tr across the seam: $(tail -1 "$R/bench-$tr.log")"
  grep -E '^# +transport|^#  transport' "$R/bench-$tr.log" | head -3
  barrier $((7 + ${#tr})) 600 || fail "barrier after bench $tr"
done
if [ "$h" = node1 ] && grep -q '^exit 0' "$R/bench-rdma.log" && ! grep -q 'transport rdma: 1 of 1 rail pair' "$R/bench-rdma.log"; then
  fail "bench --transport rdma: the report does not say its one rail pair went over RDMA"
fi
# For scale: the same bench between two GPUs inside node1 (hz/s0/g0, hz/s1/g0: a rail pair
# through node1's own ToR, no seam); node2 holds neither and says so.
step bench-rdma-inside 300 testbedctl bench "$lab" allreduce --ranks hz/s0/g0,hz/s1/g0 --transport rdma \
  -b 64K -e 1M -f 4 -n 5 -w 1 --timeout 60 || fail "bench --transport rdma inside node1: $(tail -1 "$R/bench-rdma-inside.log")"
barrier 12 600 || fail "barrier after the bench inside node1"
step down 300 testbedctl down "$lab" --host "$h" || fail "down --host $h"
left=$(ip netns list; ls /run/testbedctl 2>/dev/null)
[ -z "$left" ] || fail "left after down: $left"

# --mixed: node2 brought up without rxe (`up --rdma none`), node1 with it; bench --transport
# rdma across them: node2 marks no pair and refuses at once (exit 2, "has no RDMA on its rail"),
# node1 waits for it as for a host that does not join (exit 2 naming node2). Judged.
if [ "${1:-}" = --mixed ]; then
  barrier 13 300 || fail "barrier 13"
  rd=()
  [ "$h" = node2 ] && rd=(--rdma none)
  step up-mixed 900 testbedctl up "$scn" --host "$h" "${rd[@]}" || fail "up --host $h ${rd[*]} (up-mixed.log)"
  grep -E '^rdma' "$R/up-mixed.log" || true
  barrier 14 900 || fail "barrier 14"
  step bench-mixed 200 testbedctl bench "$lab" allreduce --ranks hz/s0/g0,hz/s3/g0 --transport rdma \
    -b 64K -e 64K -n 1 -w 1 --timeout 30
  r=$(tail -1 "$R/bench-mixed.log")
  if [ "$h" = node2 ]; then
    { [ "$r" = "exit 2" ] && grep -q 'has no RDMA on its rail (--rdma none)' "$R/bench-mixed.log"; } ||
      fail "bench --transport rdma on node2 without rxe: $r, not exit 2 naming --rdma none"
  else
    { [ "$r" = "exit 2" ] && grep -q 'node2 did not join' "$R/bench-mixed.log"; } ||
      fail "bench --transport rdma on node1 with node2 without rxe: $r, not exit 2 naming node2"
  fi
  barrier 15 300 || fail "barrier 15"
  step down-mixed 300 testbedctl down "$lab" --host "$h" || fail "down --host $h (mixed)"
  left=$(ip netns list; ls /run/testbedctl 2>/dev/null)
  [ -z "$left" ] || fail "left after down (mixed): $left"
fi
# No barrier after the last down: the first guest to pass it powers off, and the other could
# not see it.
exit $judged
