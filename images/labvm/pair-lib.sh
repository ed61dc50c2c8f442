# shellcheck shell=bash
# Helpers for scripts run on every guest of `scripts/labvm pair` (source it; pair-guest.sh set
# LABVM_HOST, LABVM_PEERS and /etc/hosts).
#
# barrier N [LIMIT]: this guest has reached point N (1..126) of the script; returns 0 once every
# other guest has reached it too, 1 after LIMIT seconds (default 600) naming who has not. Each
# point is an address, 10.0.(128+N).<guest's number>/32 on ul0, that the others ping: no
# daemon, nothing but the underlay, and a guest that went on keeps answering for the rest.
barrier() {
  local n=$1 limit=${2:-600} t0=$SECONDS me p ip
  me=$(awk -v h="$LABVM_HOST" '$2 == h { split($1, a, "."); print a[4] }' /etc/hosts)
  ip route replace 10.0.128.0/17 dev ul0 scope link 2>/dev/null
  ip addr replace "10.0.$((128 + n)).$me/32" dev ul0
  for p in $LABVM_PEERS; do
    ip=$(awk -v h="$p" '$2 == h { split($1, a, "."); print a[4] }' /etc/hosts)
    until ping -c1 -W1 -q "10.0.$((128 + n)).$ip" >/dev/null 2>&1; do
      if [ $((SECONDS - t0)) -ge "$limit" ]; then
        echo "pair[$LABVM_HOST]: barrier $n: $p did not reach it within ${limit}s" >&2
        return 1
      fi
      sleep 0.3
    done
  done
}
