#!/usr/bin/env bash
# bench-scrape.sh: throughput and CPU of a sequencer and a sending node,
# with and without a Prometheus scrape of both every second (issue 19:
# metrics are read at scrape time, nothing on the hot path), in one run,
# the two kinds of round alternating so that load drifts hit both.
#
#   SEQD=./seqd COUNT=1000000 ROUNDS=3 scripts/bench-scrape.sh
#
# Prints one line per round: kind, node rate (msg/s), CPU seconds (user +
# system, from rusage) of the node and of the sequencer, scrapes done.
set -euo pipefail
BIN=${SEQD:-seqd}
COUNT=${COUNT:-1000000}
ROUNDS=${ROUNDS:-3}
SIZE=${SIZE:-64}
BASE=${PORT_BASE:-28100}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

round() { # kind n
  local kind=$1 n=$2
  local port=$((BASE + n * 10))
  local groups=(--udp.stream-group "239.78.$n.1:$port" --udp.command-group "239.78.$n.2:$((port + 1))")
  local sa="127.0.0.1:$((port + 2))" na="127.0.0.1:$((port + 3))"
  /usr/bin/time -f "%U %S" -o "$tmp/seq.time" "$BIN" sequencer "${groups[@]}" --admin-addr "$sa" >"$tmp/seq.out" 2>"$tmp/seq.err" &
  local tpid=$!
  until grep -q "sequencer: ready" "$tmp/seq.out" 2>/dev/null; do sleep 0.05; done
  local scrapes=0 spid=
  if [ "$kind" = scrape ]; then
    (while :; do
      curl -s -o /dev/null "http://$sa/metrics" || true
      curl -s -o /dev/null "http://$na/metrics" || true
      echo x >>"$tmp/scrapes"
      sleep 1
    done) &
    spid=$!
  fi
  : >"$tmp/scrapes"
  /usr/bin/time -f "%U %S" -o "$tmp/node.time" "$BIN" node --account BENCH --count "$COUNT" --size "$SIZE" --admin-addr "$na" "${groups[@]}" >"$tmp/node.out" 2>"$tmp/node.err"
  if [ -n "$spid" ]; then kill "$spid"; wait "$spid" 2>/dev/null || true; fi
  scrapes=$(wc -l <"$tmp/scrapes")
  kill -TERM "$(pgrep -P "$tpid")"
  wait "$tpid" || true
  local rate; rate=$(grep -o 'rate=[0-9]*' "$tmp/node.out" | cut -d= -f2)
  printf '%-7s round=%d rate=%s node_cpu_s=%.2f seq_cpu_s=%.2f scrapes=%s\n' "$kind" "$n" "$rate" \
    "$(awk '{print $1+$2}' "$tmp/node.time")" "$(awk '{print $1+$2}' "$tmp/seq.time")" "$scrapes"
}

for ((i = 1; i <= ROUNDS; i++)); do
  round none $((2 * i))
  round scrape $((2 * i + 1))
done
