#!/usr/bin/env bash
# bench-table.sh: every command of README's performance table, plus the bare
# baselines, in ONE run, one line each; then the ratios the performance
# targets are stated in, each against the baseline measured in this run.
#
#   scripts/bench-table.sh            # builds seqd into a temporary directory
#   SEQD=/path/to/seqd scripts/bench-table.sh
#   RTT_COUNT=100000 TPUT_COUNT=3000000 RTT_ROUNDS=3 scripts/bench-table.sh
#
# The group rows (--sequencers 3) give each run's cpu_s_per_million: the
# CPU-seconds of every child process per million messages, the figure a
# loaded machine disturbs least (rates and latencies move with the load).
#
# The machine's load average is printed before and after: figures from a
# loaded machine are figures from a loaded machine.
#
# The round-trip targets are ratios of two latencies, and this machine's
# speed drifts within minutes (other work, where the scheduler puts the
# two ends): a bare ping-pong measured a few minutes before seqd's rtt is
# not a baseline for it. So the rtt figures come in RTT_ROUNDS rounds,
# each a bare ping-pong, then udp rtt, then tcp rtt, back to back; each
# round gives its ratios, and a target's figure is the median of them
# (every round's ratio is printed beside it).
set -euo pipefail
cd "$(dirname "$0")/.."

RTT_COUNT=${RTT_COUNT:-100000}
RTT_ROUNDS=${RTT_ROUNDS:-3}
TPUT_COUNT=${TPUT_COUNT:-3000000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [[ -z "${SEQD:-}" ]]; then
	go build -o "$tmp/seqd" ./cmd/seqd
	SEQD=$tmp/seqd
fi

load() { cut -d' ' -f1-3 /proc/loadavg; }
# field LINE KEY: the value of KEY=value in LINE.
field() { grep -o "\b$2=[^ ]*" <<<"$1" | head -1 | cut -d= -f2; }
# run LABEL COMMAND...: runs it, prints "LABEL | command | its result line".
declare -A OUT
run() {
	local label=$1
	shift
	local line status=0
	"$@" >"$tmp/out" 2>"$tmp/err" || status=$?
	line=$(grep -E '^(bench |Benchmark)' "$tmp/out" | tail -1 || true)
	if [[ $status -ne 0 || -z "$line" ]]; then
		line="FAILED (exit $status): $(grep -v ' level=INFO ' "$tmp/err" | tail -3 | tr '\n' ' ')"
	fi
	OUT[$label]=$line
	printf '%-14s | %s | %s\n' "$label" "$*" "$line"
}
# run_group LABEL COMMAND...: a --sequencers 3 run, which prints the single
# sequencer's line, the group's and their ratios: OUT[LABEL-1], OUT[LABEL-3]
# and OUT[LABEL] (the ratios) keep the three.
run_group() {
	local label=$1
	shift
	run "$label" "$@"
	OUT[$label-1]=$(grep -E '^bench .* sequencers=1 ' "$tmp/out" | tail -1 || true)
	OUT[$label-3]=$(grep -E '^bench .* sequencers=3 delivery=[a-z]*$' "$tmp/out" | tail -1 || true)
	printf '%-14s | %s\n%-14s | %s\n' "$label-1" "${OUT[$label-1]}" "$label-3" "${OUT[$label-3]}"
}
# median V...: the median of the values (the lower middle one of an even count).
median() { printf '%s\n' "$@" | grep -v '^n/a$' | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0 || a == "" || b == "") print "n/a"; else printf "%.2f", a / b }'; }
verdict() { awk -v r="$1" -v op="$2" -v t="$3" 'BEGIN { if (r == "n/a") print "n/a"; else if ((op == ">=" && r >= t) || (op == "<=" && r <= t)) print "met"; else print "NOT met" }'; }

echo "# bench-table $(date -u +%FT%TZ) $(git rev-parse --short HEAD) nproc=$(nproc) load before: $(load)"
run baseline-b "$SEQD" bench --mode baseline --size 256 --batch --count "$TPUT_COUNT"
run baseline-1 "$SEQD" bench --mode baseline --size 256 --count "$TPUT_COUNT"
run mem "$SEQD" bench --transport mem --size 256 --nodes 3 --count "$TPUT_COUNT"
run udp-b "$SEQD" bench --transport udp --mode tput --size 256 --nodes 3 --batch --count "$TPUT_COUNT"
run udp-b-1472 env SEQD_SEQUENCER_MAX_PACKET_BYTES=1472 SEQD_NODE_MAX_PACKET_BYTES=1472 \
	"$SEQD" bench --transport udp --mode tput --size 256 --nodes 3 --batch --count "$TPUT_COUNT"
run udp-b-1472-nogso env SEQD_SEQUENCER_MAX_PACKET_BYTES=1472 SEQD_NODE_MAX_PACKET_BYTES=1472 SEQD_UDP_GSO=false \
	"$SEQD" bench --transport udp --mode tput --size 256 --nodes 3 --batch --count "$TPUT_COUNT"
run udp-1 "$SEQD" bench --transport udp --mode tput --size 256 --nodes 3 --count "$TPUT_COUNT"
run udp-b-1400 "$SEQD" bench --transport udp --mode tput --size 1400 --nodes 3 --batch --count "$TPUT_COUNT"
run tcp-b "$SEQD" bench --transport tcp --mode tput --size 256 --nodes 3 --batch --count "$TPUT_COUNT"
for i in $(seq 1 "$RTT_ROUNDS"); do
	run pingpong-$i "$SEQD" bench --mode baseline --size 256 --count "$RTT_COUNT"
	run udp-rtt-$i "$SEQD" bench --transport udp --mode rtt --size 256 --count "$RTT_COUNT"
	run tcp-rtt-$i "$SEQD" bench --transport tcp --mode rtt --size 256 --count "$RTT_COUNT"
done
# The group of three (issue 15): the same load against one sequencer and
# against a Raft group of three, nodes safe and fast; each line carries
# cpu_s_per_million, every child process's user+sys CPU (nodes included).
run_group group-tput-safe "$SEQD" bench --transport udp --mode tput --size 256 --nodes 3 --batch --count "$TPUT_COUNT" --sequencers 3 --delivery safe
run_group group-tput-fast "$SEQD" bench --transport udp --mode tput --size 256 --nodes 3 --batch --count "$TPUT_COUNT" --sequencers 3 --delivery fast
run_group group-rtt-safe "$SEQD" bench --transport udp --mode rtt --size 256 --count "$RTT_COUNT" --sequencers 3 --delivery safe
run_group group-rtt-fast "$SEQD" bench --transport udp --mode rtt --size 256 --count "$RTT_COUNT" --sequencers 3 --delivery fast
run udp-rtt-spin "$SEQD" bench --transport udp --mode rtt --size 256 --spin 200us --count "$RTT_COUNT"
run udp-16MiB "$SEQD" bench --transport udp --mode tput --size 16777216 --nodes 2 --count 8
run udp-idle "$SEQD" bench --transport udp --mode idle --idle-for 20s
run tcp-idle "$SEQD" bench --transport tcp --mode idle --idle-for 20s
run CoreStep-64x1 go test -run '^$' -bench 'CoreStep/size=64/batch=1$' -benchmem ./sequencer
run CoreStep-64x8 go test -run '^$' -bench 'CoreStep/size=64/batch=8$' -benchmem ./sequencer
run Deliver-256 go test -run '^$' -bench 'Deliver/size=256$' -benchmem ./node
echo "# load after: $(load)"

r=$(ratio "$(field "${OUT[udp-b]}" rate)" "$(field "${OUT[baseline-b]}" udp_blast_rate)")
echo "target batched udp tput / batched bare blast >= 1.5: $r ($(verdict "$r" ">=" 1.5))"
r=$(ratio "$(field "${OUT[udp-1]}" rate)" "$(field "${OUT[baseline-1]}" udp_blast_rate)")
echo "target unbatched udp tput / one-per-datagram blast >= 3: $r ($(verdict "$r" ">=" 3))"
# rtt_target NAME LIMIT NUMERATOR-LABEL KEY DENOMINATOR-LABEL KEY: the
# median over the rounds of NUMERATOR/DENOMINATOR, and each round's ratio.
rtt_target() {
	local name=$1 limit=$2 num=$3 nkey=$4 den=$5 dkey=$6 i rs=()
	for i in $(seq 1 "$RTT_ROUNDS"); do
		rs+=("$(ratio "$(field "${OUT[$num-$i]}" "$nkey")" "$(field "${OUT[$den-$i]}" "$dkey")")")
	done
	local m
	m=$(median "${rs[@]}")
	echo "target $name <= $limit: $m, median of $RTT_ROUNDS rounds (${rs[*]}) ($(verdict "$m" "<=" "$limit"))"
}
rtt_target "udp rtt p50 / bare ping-pong p50" 1.3 udp-rtt p50_us pingpong udp_rtt_p50_us
rtt_target "udp rtt p99.9 / bare ping-pong p99.9 (no spin)" 2 udp-rtt p999_us pingpong udp_rtt_p999_us
rtt_target "tcp rtt p50 / udp rtt p50" 1.5 tcp-rtt p50_us udp-rtt p50_us
r=$(field "${OUT[group-tput-safe]}" cpu_ratio)
echo "target group safe tput cpu_s_per_million / single's <= 1.5: ${r:-n/a} ($(verdict "${r:-n/a}" "<=" 1.5))"
r=$(field "${OUT[group-tput-safe]}" rate_ratio)
echo "target group safe tput / single's >= 0.6: ${r:-n/a} ($(verdict "${r:-n/a}" ">=" 0.6))"
r=$(ratio "$(field "${OUT[group-rtt-safe-3]}" p50_us)" "$(field "${OUT[group-rtt-fast-3]}" p50_us)")
echo "target group safe rtt p50 / group fast rtt p50 <= 1.3: $r ($(verdict "$r" "<=" 1.3))"
r=$(field "${OUT[group-rtt-safe]}" p50_ratio)
echo "target group safe rtt p50 / single's <= 1.5: ${r:-n/a} ($(verdict "${r:-n/a}" "<=" 1.5))"
r=$(field "${OUT[group-tput-safe-3]}" resends)
echo "target group safe tput resends = 0 (on a quiet machine): ${r:-n/a} ($(verdict "${r:-n/a}" "<=" 0))"
for l in udp-idle tcp-idle; do
	for p in sequencer tail node; do
		v=$(field "${OUT[$l]}" ${p}_cpu_pct)
		echo "target $l $p cpu % of a core < 1: $v ($(verdict "$(ratio "$v" 1)" "<=" 0.999))"
	done
done
