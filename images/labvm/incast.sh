# Sourced by the guest checks (check.sh's beside part, check-debian12.sh): a lossless rail on the
# guest's kernel (issue 32; images/labvm/incast.toml: HPN's rail at 20 Gbit/s, 20 Mbit/s in the
# lab, within a TCG guest's reach, on the netem backend, where the congestion agent pauses the
# TBF under netem): 2 GPUs x 2 TCP streams into a third GPU's port drop nothing at the ToR while
# the agent pauses the feeders; the same lab with `congestion = "droptail"` drops there. Drops:
# the ToR namespace's qdiscs (tc -s), after - before; pauses, late polls and the idle wake: the
# agent's stats file. Needs the caller's pass and bad, and its working directory the checkout.

# Drops of every qdisc in LAB's ToR namespace (tc -s), summed.
tor_drops() { ip netns exec "tb-$1-dc-tor0" tc -s qdisc show | awk '/dropped/ {gsub(",", "", $7); s += $7} END {print s + 0}'; }
# The sum of a numeric KEY's values in LAB's agent stats file.
agent_sum() { # LAB KEY
  grep -o "\"$2\": *[0-9]*" "/run/testbedctl/$1/stages/congestion.stats.json" 2>/dev/null |
    awk -F: '{s += $2} END {print s + 0}'
}
# The agent's late_ms_max in LAB's stats file.
agent_late_max() { grep -o '"late_ms_max": *[0-9.e+-]*' "/run/testbedctl/$1/stages/congestion.stats.json" 2>/dev/null | head -1 | awk -F: '{print $2 + 0}'; }
incast() { # SCENARIO LAB -> "drops pauses goodput_bps late_polls late_ms_max wake..."
  local lab=$2 dst sp pids=() d0 d1 p s k late lmax wake
  testbedctl up "$1" --name "$lab" --rdma none >/tmp/incast-up.txt 2>&1 || { echo "up-failed"; return; }
  dst=$(ip -n "tb-$lab-dc-s2-g0" -4 -o addr show dev rail | awk '{sub(/\/.*/, "", $4); print $4}')
  ip netns exec "tb-$lab-dc-s2-g0" tb-probe serve --port 7700 --seconds 90 >/dev/null 2>&1 &
  sp=$!
  sleep 1
  d0=$(tor_drops "$lab")
  for s in 0 1; do
    for k in 1 2; do
      ip netns exec "tb-$lab-dc-s$s-g0" tb-probe goodput --to "$dst" --port 7700 --seconds 8 \
        --warmup-ms 1000 >"/tmp/incast-$lab-$s$k.json" 2>&1 &
      pids+=($!)
    done
  done
  wait "${pids[@]}"
  d1=$(tor_drops "$lab")
  p=$(agent_sum "$lab" pauses)
  late=$(agent_sum "$lab" late_polls)
  lmax=$(agent_late_max "$lab")
  wake=$(sed -n 's/.*"wake": *"\([^"]*\)".*/\1/p' "/run/testbedctl/$lab/stages/congestion.stats.json" 2>/dev/null)
  kill "$sp" 2>/dev/null
  wait "$sp" 2>/dev/null
  echo "$((d1 - d0)) $p $(cat /tmp/incast-"$lab"-*.json | sed -n 's/.*"goodput_bps":\([0-9.e+]*\).*/\1/p' | awk '{s += $1} END {printf "%.0f", s}') $late ${lmax:-0} ${wake:-?}"
  testbedctl down "$lab" >/dev/null 2>&1
}
# The drops a late agent explains (design-congestion.md 3.5, as the netns agent test allows):
# while it sleeps past its period by (late max - 1 ms), the 2 feeders keep sending at the rail's
# rate (incast.toml: 20 Mbit/s, 2.5 MB/s) into a queue sized for a 1 ms poll, plus a frame each;
# 0 when no poll was late. A starved guest (plain TCG beside the other tiers) is the host's
# doing, not the model's; a drop beyond this is the model's.
late_allowance() { # LATE_POLLS LATE_MS_MAX
  awk -v n="$1" -v m="$2" 'BEGIN { if (n + 0 == 0) { print 0; exit }
    o = m - 1; if (o < 0) o = 0; printf "%d", 2 * 2500000 * o / 1000 / 1514 + 2 }'
}
# Both incasts and their verdicts; PREFIX names the labs (PREFIX"l", PREFIX"d").
incast_check() { # PREFIX
  local ld lp lg ll lm lw dd dp dg dl dm dw allow
  read -r ld lp lg ll lm lw <<<"$(incast images/labvm/incast.toml "$1l")"
  sed 's/^preset = "hpn"$/preset = "hpn"\ncongestion = "droptail"/' images/labvm/incast.toml >/tmp/incast-droptail.toml
  read -r dd dp dg dl dm dw <<<"$(incast /tmp/incast-droptail.toml "$1d")"
  allow=$(late_allowance "${ll:-0}" "${lm:-0}")
  echo "check: lossless: ToR drops $ld, pauses sent $lp, receiver goodput $lg bit/s, agent late polls $ll (max $lm ms: $allow drop(s) the host's), idle wake: $lw; drop-tail: ToR drops $dd, goodput $dg bit/s"
  [ "$ld" -le "$allow" ] 2>/dev/null && [ "${lp:-0}" -gt 0 ] 2>/dev/null &&
    pass "lossless rail: 2 x 2 streams into one port, $ld drops at the ToR (a late agent explains up to $allow), $lp pauses" ||
    { cat /tmp/incast-up.txt; bad "lossless rail: ToR drops '$ld' above the $allow a late agent explains ($ll late polls, max $lm ms), pauses '$lp' (want some)"; }
  [ "${dd:-0}" -gt 0 ] 2>/dev/null && pass "drop-tail rail: the same incast drops $dd at the ToR" ||
    bad "drop-tail rail: ToR drops '$dd' (want some: else the incast did not congest the port)"
  [ -z "$(ip netns list | grep -E "tb-$1[ld]-")" ] || bad "incast labs left namespaces"
}

# ECN on the VPC in the kernel (issue 32): where the kernel has sch_red, the VPC's ecn ports get a
# RED child of their TBF that marks CE (no marking stage). Two servers send 2 TCP streams each
# over the VPC to a third for 6 s; RED's own count of marked packets (tc -s, the VPC
# namespace's red qdiscs) and status's CE marks must both be above 0, and status must say RED
# marked them.
red_marked() { ip netns exec "tb-$1-dc-vpc" tc -s qdisc show | awk '/^qdisc red/ {n++} /marked/ {for (i = 1; i < NF; i++) if ($i == "marked") s += $(i + 1)} END {print n + 0, s + 0}'; }
ecn_check() { # PREFIX
  local lab=$1e dst sp pids=() s k nred marks ce by cc dctcp
  if ! testbedctl up images/labvm/incast.toml --name "$lab" --rdma none >/tmp/ecn-up.txt 2>&1; then
    cat /tmp/ecn-up.txt
    bad "ecn: up of images/labvm/incast.toml failed"
    return
  fi
  dst=$(ip -n "tb-$lab-dc-s2" -4 -o addr show dev fe | awk '{sub(/\/.*/, "", $4); print $4}')
  ip netns exec "tb-$lab-dc-s2" tb-probe serve --port 7701 --seconds 60 >/dev/null 2>&1 &
  sp=$!
  sleep 1
  for s in 0 1; do
    for k in 1 2; do
      ip netns exec "tb-$lab-dc-s$s" tb-probe goodput --to "$dst" --port 7701 --seconds 6 \
        --warmup-ms 500 >"/tmp/ecn-$lab-$s$k.json" 2>&1 &
      pids+=($!)
    done
  done
  wait "${pids[@]}"
  # The TCP toward the VPC: dctcp where the guest's kernel has it (doctor's dctcp row).
  cc=$(ip -n "tb-$lab-dc-s0" route show | grep -o 'congctl [a-z]*' | sort -u | tr '\n' ' ')
  dctcp=$(testbedctl doctor 2>/dev/null | awk '$1 == "dctcp" {print $2}')
  read -r nred marks <<<"$(red_marked "$lab")"
  testbedctl status "$lab" --json >/tmp/ecn-status.json 2>/dev/null
  # The JSON is indented: one line first, then the totals' count and who marked at each end.
  tr -d ' \n' </tmp/ecn-status.json >/tmp/ecn-status.line
  ce=$(grep -o '"totals":{[^}]*}' /tmp/ecn-status.line | grep -o '"ce_marks":[0-9]*' | cut -d: -f2 | head -1)
  by=$(grep -o '"marked_by":"[a-z]*"' /tmp/ecn-status.line | sort -u | tr '\n' ' ')
  kill "$sp" 2>/dev/null
  wait "$sp" 2>/dev/null
  testbedctl down "$lab" >/dev/null 2>&1
  echo "check: ecn on the VPC: $nred red qdisc(s), RED marked $marks, status CE marks $ce, $by; doctor dctcp: $dctcp; s0's routes: $cc"
  if [ "$dctcp" = yes ]; then
    [ "$cc" = "congctl dctcp " ] && pass "ecn on the VPC: the servers' routes name dctcp (doctor: the kernel has it)" ||
      bad "ecn on the VPC: the kernel has dctcp but s0's routes name '$cc'"
  fi
  [ "$nred" -gt 0 ] 2>/dev/null && [ "$marks" -gt 0 ] 2>/dev/null && [ "${ce:-0}" -gt 0 ] 2>/dev/null &&
    grep -q '"red"' <<<"$by" && ! grep -q '"stage"' <<<"$by" &&
    pass "ecn on the VPC: the kernel's RED marked $marks packets CE, status counts $ce" ||
    bad "ecn on the VPC: red qdiscs '$nred', RED marked '$marks', status CE marks '$ce', marked by '$by' (want RED's marks above 0)"
}
