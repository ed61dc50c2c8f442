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
incast() { # SCENARIO LAB -> "drops pauses goodput_bps late_polls wake..."
  local lab=$2 dst sp pids=() d0 d1 p s k late wake
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
  wake=$(sed -n 's/.*"wake": *"\([^"]*\)".*/\1/p' "/run/testbedctl/$lab/stages/congestion.stats.json" 2>/dev/null)
  kill "$sp" 2>/dev/null
  wait "$sp" 2>/dev/null
  echo "$((d1 - d0)) $p $(cat /tmp/incast-"$lab"-*.json | sed -n 's/.*"goodput_bps":\([0-9.e+]*\).*/\1/p' | awk '{s += $1} END {printf "%.0f", s}') $late ${wake:-?}"
  testbedctl down "$lab" >/dev/null 2>&1
}
# Both incasts and their verdicts; PREFIX names the labs (PREFIX"l", PREFIX"d").
incast_check() { # PREFIX
  local ld lp lg ll lw dd dp dg dl dw
  read -r ld lp lg ll lw <<<"$(incast images/labvm/incast.toml "$1l")"
  sed 's/^preset = "hpn"$/preset = "hpn"\ncongestion = "droptail"/' images/labvm/incast.toml >/tmp/incast-droptail.toml
  read -r dd dp dg dl dw <<<"$(incast /tmp/incast-droptail.toml "$1d")"
  echo "check: lossless: ToR drops $ld, pauses sent $lp, receiver goodput $lg bit/s, agent late polls $ll, idle wake: $lw; drop-tail: ToR drops $dd, goodput $dg bit/s"
  [ "$ld" = 0 ] && [ "${lp:-0}" -gt 0 ] 2>/dev/null &&
    pass "lossless rail: 2 x 2 streams into one port, 0 drops at the ToR, $lp pauses" ||
    { cat /tmp/incast-up.txt; bad "lossless rail: ToR drops '$ld', pauses '$lp' (want 0 and some; the agent polled late $ll time(s))"; }
  [ "${dd:-0}" -gt 0 ] 2>/dev/null && pass "drop-tail rail: the same incast drops $dd at the ToR" ||
    bad "drop-tail rail: ToR drops '$dd' (want some: else the incast did not congest the port)"
  [ -z "$(ip netns list | grep -E "tb-$1[ld]-")" ] || bad "incast labs left namespaces"
}
