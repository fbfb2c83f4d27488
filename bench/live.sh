#!/usr/bin/env bash
# bench/live.sh: live capture capacity, kfsniff beside tcpdump (issue 29, 1).
#
#   bench/live.sh        (root; make bench-live)
#
# Replays real captures with tcpreplay onto one end of a veth pair whose
# other end is in a network namespace of its own (klive-PID, MTU 65535,
# removed at the end), at increasing rates. At each rate, in ONE replay,
# `tcpdump -w /dev/null` and one kfsniff mode capture the namespace's end
# side by side (same packets, same machine load, the same 32 MiB ring,
# -B 32768, kfsniff's default), and the script records the rate tcpreplay
# reached, each program's kernel drops (PACKET_STATISTICS: tcpdump's exit
# line, kfsniff's report "drops") and CPU time (/proc, user + system)
# over the replay. kfsniff's modes:
#   plain     kfsniff -i IF --no-tui --json
#   tui       kfsniff -i IF --tui in a pseudo-terminal (script(1), 200x50;
#             quit with q, the report follows the UI)
#   metrics   plain + --metrics-addr 127.0.0.1:0
#   export    plain + --export kafka://127.0.0.1:19092/kfsniff (a kfake
#             sink, bench/cmd/kfakesink, in the namespace)
# and "floor" (not in the default MODES), the architecture's floor:
# bench/cmd/floor -i (the same ring, TCP decoding and gopacket's
# reassembly, no Kafka): where kfsniff drops and the floor does not,
# the cost is kfsniff's own.
# The captures (generated at benchmark time, never committed):
#   bulk   bench/cmd/realgen bulk (REALGEN_FLAGS, default -records 20000:
#          a kgo producer and a group of two, 7,000-byte records, large
#          loopback segments), replayed by Mbit/s (RATES_MBPS)
#   storm  bench/cmd/realgen storm (4 kgo producers retrying
#          NOT_LEADER_OR_FOLLOWER; small packets), by packets/s (RATES_PPS)
#   kafka  every real Apache Kafka recording of fixtures/pcaps/kafka/,
#          rewritten to Ethernet (bench/cmd/toether), by packets/s
# Each step replays the capture in a loop (--unique-ip: new addresses each
# loop, so each loop's connections are new) for about STEP seconds at the
# rate asked; "top" is tcpreplay's --topspeed, the replayer's own limit.
# A (capture, mode) stops stepping once both programs dropped.
# With PROFILE=1 (default) kfsniff is built with -tags kfsniff_pprof and a
# CPU profile of kfsniff is taken over each step: the first step where
# kfsniff drops, in each mode, is the knee; its profile's top is printed.
#
# Environment: CAPTURES (default "bulk storm kafka"), MODES (default
# "plain tui metrics export"), RATES_MBPS (default "500 1000 2000 4000
# 8000 top"), RATES_PPS (default "25000 50000 100000 200000 400000 top"),
# STEP (seconds, default 5), REALGEN_FLAGS, OUT (default
# bench/out/live-DATE), GO.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
CAPTURES=${CAPTURES:-bulk storm kafka}
MODES=${MODES:-plain tui metrics export}
RATES_MBPS=${RATES_MBPS:-500 1000 2000 4000 8000 top}
RATES_PPS=${RATES_PPS:-25000 50000 100000 200000 400000 top}
STEP=${STEP:-5}
REALGEN_FLAGS=${REALGEN_FLAGS:--records 20000}
PROFILE=${PROFILE:-1}
OUT=${OUT:-bench/out/live-$(date -u +%Y%m%dT%H%M)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

if [ "$(id -u)" != 0 ]; then
	echo "live.sh: needs root (a network namespace, a veth pair, live capture)" >&2
	exit 1
fi
if ! command -v tcpreplay > /dev/null || ! command -v tcpdump > /dev/null; then
	echo "== installing tcpreplay and tcpdump"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends tcpreplay tcpdump > /dev/null
fi
for c in ip script curl; do
	command -v $c > /dev/null || { echo "live.sh: $c is missing (apt-get install -y iproute2 util-linux curl)" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/kfsniff-live.XXXXXX")
ns=klive-$$
va=kla$$
vb=klb$$
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
	ip link del "$va" 2> /dev/null || true
	ip netns del "$ns" 2> /dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

echo "== build"
tags=""
if [ "$PROFILE" = 1 ]; then tags="-tags kfsniff_pprof"; fi
# shellcheck disable=SC2086
CGO_ENABLED=0 $GO build -trimpath $tags -o "$work/kfsniff" ./cmd/kfsniff
for c in realgen toether kfakesink floor; do CGO_ENABLED=0 $GO build -trimpath -o "$work/$c" ./bench/cmd/$c; done

echo "== captures"
gen=""
for c in $CAPTURES; do case $c in bulk | storm) gen="$gen $c" ;; esac; done
if [ -n "$gen" ]; then
	# shellcheck disable=SC2086
	"$work/realgen" -o "$work/raw" $REALGEN_FLAGS $gen
fi
for c in $CAPTURES; do
	case $c in
	bulk | storm) "$work/toether" -o "$work/$c.pcap" "$work/raw/$c.pcap" ;;
	kafka) "$work/toether" -o "$work/kafka.pcap" fixtures/pcaps/kafka/*.pcap.gz ;;
	*) echo "live.sh: unknown capture $c" >&2; exit 2 ;;
	esac
done
rm -rf "$work/raw"

{
	echo "cpu:     $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc)"
	echo "memory:  $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
	echo "kernel:  $(uname -r)"
	echo "commit:  $(git rev-parse --short HEAD 2> /dev/null || echo unknown)$(git diff --quiet HEAD 2> /dev/null || echo ' + uncommitted changes')"
	echo "tools:   $(tcpreplay --version 2>&1 | head -1), $(tcpdump --version 2>&1 | head -1)"
	echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) at the start, $(date -u +%FT%TZ)"
	echo "others:  $(ps -eo pcpu=,comm= --sort=-pcpu | head -6 | awk '{printf "%s %s%%; ", $2, $1}')"
} | tee "$OUT/machine.txt"

ip netns add "$ns"
ip link add "$va" type veth peer name "$vb" netns "$ns"
ip link set "$va" mtu 65535 up
ip -n "$ns" link set "$vb" mtu 65535 up
ip -n "$ns" link set lo up
inns() { ip netns exec "$ns" "$@"; }
# The UI's pseudo-terminal reads a FIFO this shell holds open: no EOF.
mkfifo "$work/pty-in"
exec 3<> "$work/pty-in"
# ip netns exec runs the command in its own process: $! is its pid.
ip netns exec "$ns" "$work/kfakesink" -port 19092 > "$work/sink.log" 2>&1 &
pids+=($!)
sleep 1

ticks() { awk '{print $14 + $15}' /proc/"$1"/stat 2> /dev/null || echo 0; }
hz=$(getconf CLK_TCK)

# step CAPTURE MODE RATE: one replay with tcpdump and kfsniff MODE; appends
# one line to $OUT/live.csv.
step() {
	local cap=$1 mode=$2 rate=$3 f="$work/$1.pcap" args loops kcmd tpid kpid
	local bytes packets
	bytes=$(stat -c %s "$f")
	packets=$(cat "$work/$cap.packets")
	case $rate in
	top) args="--topspeed" loops=$(cat "$work/$cap.toploops") ;;
	*)
		if [ "$cap" = bulk ]; then
			args="--mbps=$rate"
			loops=$(awk -v r="$rate" -v s="$STEP" -v b="$bytes" 'BEGIN {l = r * 1e6 / 8 * s / b; print (l < 1 ? 1 : int(l + 0.999))}')
		else
			args="--pps=$rate"
			loops=$(awk -v r="$rate" -v s="$STEP" -v p="$packets" 'BEGIN {l = r * s / p; print (l < 1 ? 1 : int(l + 0.999))}')
		fi
		echo "$loops" > "$work/$cap.toploops"
		;;
	esac
	rm -f "$work/k.out" "$work/k.err" "$work/t.err" "$work/k.pid"
	ip netns exec "$ns" tcpdump -i "$vb" -B 32768 -nn -q -w /dev/null 2> "$work/t.err" &
	tpid=$!
	kcmd="$work/kfsniff -i $vb"
	case $mode in
	plain) ;;
	metrics) kcmd="$kcmd --metrics-addr 127.0.0.1:0" ;;
	export) kcmd="$kcmd --export kafka://127.0.0.1:19092/kfsniff" ;;
	tui) ;;
	floor) kcmd="$work/floor -i $vb" ;;
	esac
	if [ "$mode" = tui ]; then
		ip netns exec "$ns" script -qfec "stty cols 200 rows 50; echo \$\$ > $work/k.pid; exec env KFSNIFF_PPROF=127.0.0.1:9401 $kcmd --tui" /dev/null < "$work/pty-in" > "$work/k.out" 2> "$work/k.err" &
		local spid=$!
	elif [ "$mode" = floor ]; then
		inns sh -c "echo \$\$ > $work/k.pid; exec $kcmd -B 32768" > "$work/k.out" 2> "$work/k.err" &
	else
		inns sh -c "echo \$\$ > $work/k.pid; exec env KFSNIFF_PPROF=127.0.0.1:9401 $kcmd --no-tui --json" > "$work/k.out" 2> "$work/k.err" &
	fi
	for _ in $(seq 50); do
		if [ -s "$work/k.pid" ] && grep -q listening "$work/t.err" 2> /dev/null; then break; fi
		sleep 0.1
	done
	kpid=$(cat "$work/k.pid")
	sleep 1.5 # the UI, the export client and the metrics server start
	local t0k t0t load
	t0k=$(ticks "$kpid") t0t=$(ticks "$tpid")
	load=$(cut -d' ' -f1 /proc/loadavg)
	local prof="" cpid=""
	if [ "$PROFILE" = 1 ] && [ "$mode" != floor ]; then
		prof="$OUT/cpu-$cap-$mode-$rate.pprof"
		inns curl -sf -o "$prof" "http://127.0.0.1:9401/debug/pprof/profile?seconds=$((STEP > 2 ? STEP - 1 : 1))" &
		cpid=$!
	fi
	# shellcheck disable=SC2086
	tcpreplay -i "$va" --preload-pcap --unique-ip --loop="$loops" $args "$f" > "$work/r.out" 2>&1 || { cat "$work/r.out" >&2; }
	if [ -n "$cpid" ]; then wait "$cpid" 2> /dev/null || true; fi
	sleep 1 # let the readers drain their rings
	local t1k t1t
	t1k=$(ticks "$kpid") t1t=$(ticks "$tpid")
	# The UI quits on q (SIGINT ends it with "context canceled" and no
	# report); the others on SIGINT.
	if [ "$mode" = tui ]; then printf q >&3; else kill -INT "$kpid" 2> /dev/null || true; fi
	kill -INT "$tpid" 2> /dev/null || true
	for _ in $(seq 150); do
		if [ ! -d /proc/"$kpid" ] && [ ! -d /proc/"$tpid" ]; then break; fi
		sleep 0.2
	done
	wait "$tpid" 2> /dev/null || true
	if [ "$mode" = tui ]; then kill "$spid" 2> /dev/null || true; wait "$spid" 2> /dev/null || true; fi
	# tcpreplay: "Actual: N packets (B bytes) sent in S seconds" and
	# "Rated: X Bps, Y Mbps, Z pps"
	local sent secs mbps pps tdrop trecv kdrop kpk
	# (no match leaves a value empty: printed as ?)
	sent=$(sed -nE 's/.*Actual: ([0-9]+) packets.*/\1/p' "$work/r.out" | head -1)
	secs=$(sed -nE 's/.*sent in ([0-9.]+) seconds.*/\1/p' "$work/r.out" | head -1)
	mbps=$(sed -nE 's/.*Rated: [0-9.]+ Bps, ([0-9.]+) Mbps.*/\1/p' "$work/r.out" | head -1)
	pps=$(sed -nE 's/.*Mbps, ([0-9.]+) pps.*/\1/p' "$work/r.out" | head -1)
	tdrop=$(sed -nE 's/^([0-9]+) packets? dropped by kernel.*/\1/p' "$work/t.err")
	trecv=$(sed -nE 's/^([0-9]+) packets? received by filter.*/\1/p' "$work/t.err")
	# kfsniff's last line on stderr (in the pty's output for the UI):
	# "kfsniff: N packets captured, N received by filter, N dropped by kernel"
	local kline
	kline=$(cat "$work/k.err" "$work/k.out" | tr -d '\r' | grep -ao '[0-9]* packets captured, [0-9]* received by filter, [0-9]* dropped by kernel' | tail -1 || true)
	kdrop=$(echo "$kline" | sed -nE 's/.* ([0-9]+) dropped by kernel/\1/p')
	kpk=$(echo "$kline" | sed -nE 's/^([0-9]+) packets captured.*/\1/p')
	local line
	line=$(awk -v c="$cap" -v m="$mode" -v r="$rate" -v l="$loops" -v s="${sent:-0}" -v sec="${secs:-0}" -v mb="${mbps:-0}" -v pp="${pps:-0}" \
		-v td="${tdrop:-?}" -v tr="${trecv:-?}" -v kd="${kdrop:-?}" -v kp="${kpk:-?}" -v tc=$((t1t - t0t)) -v kc=$((t1k - t0k)) -v hz="$hz" -v load="$load" \
		'BEGIN {
			w = sec + 1  # the replay and the drain second
			printf "%s,%s,%s,%d,%d,%.2f,%.1f,%.0f,%s,%s,%s,%s,%.3f,%.3f,%s", c, m, r, l, s, sec, mb, pp, tr, td, kp, kd, tc / hz / w, kc / hz / w, load
		}')
	echo "$line" >> "$OUT/live.csv"
	echo "$line" | awk -F, '{printf "%-5s %-7s %-6s %8.0f Mbit/s %8.0f pps | tcpdump drops %s of %s, %.2f cores | kfsniff drops %s (%s analysed), %.2f cores | load %s\n", $1, $2, $3, $7, $8, $10, $9, $13, $12, $11, $14, $15}'
	if [ -z "$kdrop" ]; then
		echo "live.sh: no report from kfsniff $mode:" >&2
		tail -5 "$work/k.err" >&2
	fi
	[ "${tdrop:-1}" != 0 ] && [ "${kdrop:-1}" != 0 ] && return 1
	return 0
}

echo "capture,mode,rate,loops,sent,seconds,mbps,pps,tcpdump_received,tcpdump_drops,kfsniff_packets,kfsniff_drops,tcpdump_cores,kfsniff_cores,load1" > "$OUT/live.csv"
for cap in $CAPTURES; do
	"$work/kfsniff" -r "$work/$cap.pcap" --json 2> /dev/null | grep -m1 '"packets":' | tr -dc 0-9 > "$work/$cap.packets"
	echo "== $cap: $(stat -c %s "$work/$cap.pcap") bytes, $(cat "$work/$cap.packets") packets"
	rates=$RATES_PPS
	if [ "$cap" = bulk ]; then rates=$RATES_MBPS; fi
	for mode in $MODES; do
		for rate in $rates; do
			step "$cap" "$mode" "$rate" || break
		done
	done
done
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) at the end, $(date -u +%FT%TZ)" | tee -a "$OUT/machine.txt"

echo
echo "== summary (highest rate reached with no kernel drop; cores: CPU time / (replay + 1 s drain); per Gbit/s and per 100k packets/s at that rate)"
awk -F, '
	NR == 1 { next }
	{
		k = $1 "," $2
		if (!(k in seen)) { seen[k] = 1; order[++n] = k }
		if ($10 == "0" && $7 + 0 > tbest[k]) { tbest[k] = $7; tpps[k] = $8; tcore[k] = $13 }
		if ($12 == "0" && $7 + 0 > kbest[k]) { kbest[k] = $7; kpps[k] = $8; kcore[k] = $14 }
		if ($10 == "0" && $12 != "0") miss[k] = miss[k] sprintf(" %s (%.0f Mbit/s)", $3, $7)
	}
	END {
		printf "%-5s %-7s | %-32s | %-32s | %s\n", "capt", "mode", "tcpdump: Mbit/s pps cores/Gb cores/100kpps", "kfsniff: Mbit/s pps cores/Gb cores/100kpps", "kfsniff drops where tcpdump had none"
		for (i = 1; i <= n; i++) {
			k = order[i]; split(k, a, ",")
			printf "%-5s %-7s | %6.0f %8.0f %5.2f %5.2f      | %6.0f %8.0f %5.2f %5.2f      | %s\n", a[1], a[2],
				tbest[k], tpps[k], (tbest[k] > 0 ? tcore[k] / (tbest[k] / 1000) : 0), (tpps[k] > 0 ? tcore[k] / (tpps[k] / 1e5) : 0),
				kbest[k], kpps[k], (kbest[k] > 0 ? kcore[k] / (kbest[k] / 1000) : 0), (kpps[k] > 0 ? kcore[k] / (kpps[k] / 1e5) : 0),
				(k in miss) ? "MISSED at" miss[k] : "none (goal MET)"
		}
	}' "$OUT/live.csv" | tee "$OUT/summary.txt"

if [ "$PROFILE" = 1 ]; then
	# The knee: the first step of each mode where kfsniff dropped.
	awk -F, 'NR > 1 && $12 != "0" && !(($1 "," $2) in done) { done[$1 "," $2] = 1; print $1, $2, $3 }' "$OUT/live.csv" | while read -r cap mode rate; do
		p="$OUT/cpu-$cap-$mode-$rate.pprof"
		if [ -s "$p" ]; then
			echo "== where the time goes at the knee: $cap $mode at $rate (go tool pprof -top)"
			$GO tool pprof -top "$p" 2> /dev/null | sed -n '4,22p'
		fi
	done | tee "$OUT/knee.txt"
fi
echo "files: $OUT/live.csv $OUT/summary.txt"
