#!/usr/bin/env bash
# bench/soak.sh: kfsniff left capturing live for a long time (issue 29, 2).
#
#   bench/soak.sh [-d DURATION]        (root; make soak, DURATION=1h)
#   bench/soak.sh -s DIR               (summarise DIR/soak.csv again)
#
# In a network namespace of its own (ksoak-PID, loopback only, removed at
# the end) it runs bench/cmd/soakload (real kgo clients against a 3-broker
# kfake on 127.0.0.1:9092-9094: a bulk producer read back by a consumer
# group, a retry storm, more consumer groups with a rebalance every 30 s,
# 50 short-lived clients a second) and bench/cmd/kfakesink (the --export
# sink, 127.0.0.1:19092), and captures with
#
#   kfsniff -i lo --metrics-addr 127.0.0.1:9400 \
#       --export kafka://127.0.0.1:19092/kfsniff portrange 9092-9094
#
# with the terminal UI on, in a pseudo-terminal (script(1), 200x50). Every
# SAMPLE seconds it reads kfsniff's RSS (/proc) and its metrics (heap,
# goroutines, CPU, packets, kernel drops, export records and drops,
# kfsniff_table_size) into OUT/soak.csv. At the end it prints a summary
# against the goals (RSS after the first WARMUP seconds within +10 %,
# goroutines flat, every table at or under its bound) and a text chart of
# RSS and heap over time (OUT/soak-chart.txt) for BENCHMARKS.md.
#
# Environment:
#   DURATION     how long to capture (default 1h; -d overrides)
#   SAMPLE       seconds between samples (default 10)
#   WARMUP       seconds before the RSS reference (default 300, or a tenth
#                of a run shorter than 50 minutes)
#   OUT          where to write soak.csv, soak-chart.txt, the logs
#                (default bench/out/soak-DATE)
#   LOAD_FLAGS   more flags for soakload (default: its own, -bulk-rate 100)
#   KFSNIFF_ENV  variables for kfsniff alone (e.g. GOGC=50), not for the
#                load generators
#   KFSNIFF_FLAGS more flags for kfsniff (e.g. --memory-limit 300M)
#   GO           the go command (default go)
# The UI keeps every packet in a temporary pcapng spool (its "save" key):
# TMPDIR is pointed into OUT's work directory and removed at the end;
# its size at the end is printed (several GB an hour at the defaults).
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
DURATION=${DURATION:-1h}
SAMPLE=${SAMPLE:-10}
LOAD_FLAGS=${LOAD_FLAGS:--bulk-rate 100}
ONLY=""
while getopts d:s: o; do
	case $o in
	d) DURATION=$OPTARG ;;
	s) ONLY=1 OUT=$OPTARG ;;
	*) echo "usage: bench/soak.sh [-d DURATION] [-s DIR (only summarise DIR/soak.csv)]" >&2; exit 2 ;;
	esac
done
secs() { # 90s, 5m, 1h, 1h30m -> seconds
	local d=$1 t=0 n
	while [[ $d =~ ^([0-9]+)([hms])(.*)$ ]]; do
		n=${BASH_REMATCH[1]}
		case ${BASH_REMATCH[2]} in h) t=$((t + n * 3600)) ;; m) t=$((t + n * 60)) ;; s) t=$((t + n)) ;; esac
		d=${BASH_REMATCH[3]}
	done
	if [ -n "$d" ]; then t=$((t + d)); fi
	echo "$t"
}
dur=$(secs "$DURATION")
if [ -z "${WARMUP:-}" ]; then
	WARMUP=300
	if [ "$dur" -lt 3000 ]; then WARMUP=$((dur / 10)); fi
fi
OUT=${OUT:-bench/out/soak-$(date -u +%Y%m%dT%H%M)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

tables="connections streams idle handshakes waiting_requests buffered_bytes metrics_connections"
# summarise: the summary against the goals, the chart and the heap
# profiles' tops, from the files in $OUT (also alone: -s DIR).
summarise() {
	echo
	echo "== summary"
	awk -F, -v warm="$WARMUP" -v tables="$tables" -v bfile="$OUT/bounds.txt" '
		BEGIN {
			while ((getline l < bfile) > 0) {
				if (match(l, /table="[a-z_]+"/)) { n = substr(l, RSTART + 7, RLENGTH - 8); split(l, f, " "); bound[n] = f[2] }
			}
			nt = split(tables, ts, " ")
		}
		NR == 1 { next }
		{
			last = $0; t = $1
			if (ref == "" && t >= warm) { ref = $3; reft = t; gref = $6 }
			if (ref != "") {
				if ($3 > rmax) { rmax = $3; rmaxt = t }
				if (gmin == "" || $6 < gmin) gmin = $6
				if ($6 > gmax) gmax = $6
				if ($4 > hmax) hmax = $4
			}
			for (i = 1; i <= nt; i++) if ($(12 + i) > tmax[i]) tmax[i] = $(12 + i)
			if (first == "") { first = $0 }
			lsum += $2; ln++
		}
		END {
			split(last, L, ",")
			split(first, F, ",")
			printf "samples:      %d over %d s; load average (1 min) mean %.2f\n", NR - 1, L[1], lsum / ln
			printf "RSS:          %.1f MiB at %d s (reference), highest after it %.1f MiB at %d s (%+.1f %%), %.1f MiB at the end (%+.1f %%) -> %s (goal: within +10 %%)\n",
				ref / 1024, reft, rmax / 1024, rmaxt, (rmax / ref - 1) * 100, L[3] / 1024, (L[3] / ref - 1) * 100, (rmax <= ref * 1.10 ? "MET" : "MISSED")
			printf "heap in use:  highest after the reference %.1f MiB, %.1f MiB at the end\n", hmax / 1048576, L[4] / 1048576
			printf "goroutines:   %d at the reference, %d-%d after it, %d at the end -> %s (goal: flat)\n", gref, gmin, gmax, L[6], (gmax - gmin <= 10 ? "MET" : "MISSED")
			printf "CPU:          %.0f s over %d s (%.1f %% of one core)\n", L[7] - F[7], L[1] - F[1], (L[7] - F[7]) / (L[1] - F[1]) * 100
			printf "packets:      %d analysed (%.0f/s), kernel received %d, kernel drops %d\n", L[8], L[8] / L[1], L[9], L[10]
			printf "export:       %d records, %d dropped\n", L[11], L[12]
			ok = 1
			for (i = 1; i <= nt; i++) {
				b = (ts[i] in bound) ? bound[ts[i]] : "?"
				within = (b == "?" || b == 0 || tmax[i] <= b)
				if (!within) ok = 0
				printf "table %-19s highest %d, bound %s%s\n", ts[i], tmax[i], b, within ? "" : " OVER"
			}
			printf "tables:       %s (goal: every table at or under its bound)\n", ok ? "MET" : "MISSED"
		}' "$OUT/soak.csv" | tee "$OUT/summary.txt"

	# A text chart: RSS (#) and heap in use (.) in MiB against time.
	awk -F, -v rows=16 -v cols=72 '
		NR == 1 { next }
		{ n++; t[n] = $1; r[n] = $3 / 1024; h[n] = $4 / 1048576; if (r[n] > top) top = r[n] }
		END {
			top = int(top / 10 + 1) * 10
			for (c = 1; c <= cols; c++) { i = int((c - 1) * (n - 1) / (cols - 1)) + 1; R[c] = r[i]; H[c] = h[i] }
			for (y = rows; y >= 1; y--) {
				lo = top * (y - 1) / rows; hi = top * y / rows
				line = sprintf("%6.0f |", hi)
				for (c = 1; c <= cols; c++) {
					ch = " "
					if (H[c] > lo && H[c] <= hi) ch = "."
					if (R[c] > lo && R[c] <= hi) ch = "#"
					line = line ch
				}
				print line
			}
			printf "   MiB +%s\n", sprintf("%*s", cols, "") 
			printf "        0 s%*s%d s\n", cols - 8, "", t[n]
			print "        # RSS, . heap in use (go_memstats_heap_inuse_bytes), one column per " int(t[n] / cols + 0.5) " s"
		}' "$OUT/soak.csv" | sed 's/+ *$/+'"$(printf '%.0s-' $(seq 72))"'/' | tee "$OUT/soak-chart.txt"
	for h in warm half end; do
		if [ -s "$OUT/heap-$h.pprof" ]; then
			echo "== heap in use, $h (go tool pprof -top -sample_index=inuse_space)"
			$GO tool pprof -top -sample_index=inuse_space "$OUT/heap-$h.pprof" 2> /dev/null | sed -n '1,18p'
		fi
	done | tee "$OUT/heap-top.txt"
	echo "files: $OUT/soak.csv $OUT/summary.txt $OUT/soak-chart.txt"
}

if [ -n "$ONLY" ]; then
	summarise
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "soak.sh: needs root (a network namespace and a live capture)" >&2
	exit 1
fi
for c in ip script curl; do
	command -v $c > /dev/null || { echo "soak.sh: $c is missing (apt-get install -y iproute2 util-linux curl)" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/kfsniff-soak.XXXXXX")
ns=ksoak-$$
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
	sleep 1
	for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done
	ip netns del "$ns" 2> /dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

echo "== build"
# -tags kfsniff_pprof: net/http/pprof on $KFSNIFF_PPROF, for heap profiles.
CGO_ENABLED=0 $GO build -trimpath -tags kfsniff_pprof -o "$work/kfsniff" ./cmd/kfsniff
CGO_ENABLED=0 $GO build -trimpath -o "$work/soakload" ./bench/cmd/soakload
CGO_ENABLED=0 $GO build -trimpath -o "$work/kfakesink" ./bench/cmd/kfakesink

echo "== machine"
{
	echo "cpu:      $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc)"
	echo "memory:   $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
	echo "commit:   $(git rev-parse --short HEAD 2> /dev/null || echo unknown)$(git diff --quiet HEAD 2> /dev/null || echo ' + uncommitted changes')"
	echo "duration: ${dur}s, sample every ${SAMPLE}s, warm-up ${WARMUP}s"
	echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) at the start, $(date -u +%FT%TZ)"
	echo "soakload: $LOAD_FLAGS"
	echo "kfsniff:  ${KFSNIFF_ENV:-(no variables)} ${KFSNIFF_FLAGS:-(no more flags)}"
} | tee "$OUT/machine.txt"

ip netns add "$ns"
ip -n "$ns" link set lo up
inns() { ip netns exec "$ns" "$@"; }
# Background commands are started with ip netns exec itself (not inns), so
# that $! is the command's own pid.

ip netns exec "$ns" "$work/kfakesink" -port 19092 > "$OUT/kfakesink.log" 2>&1 &
pids+=($!)
# shellcheck disable=SC2086 # word splitting wanted
ip netns exec "$ns" "$work/soakload" $LOAD_FLAGS > "$OUT/soakload.log" 2>&1 &
pids+=($!)
sleep 3

mkdir -p "$work/tmp"
# The UI in a pseudo-terminal: script(1) runs the command on a pty; its
# standard input is a FIFO this shell holds open (EOF would end it).
mkfifo "$work/pty-in"
exec 3<> "$work/pty-in"
cmd="stty cols 200 rows 50; echo \$\$ > $work/kfsniff.pid; exec env TMPDIR=$work/tmp KFSNIFF_PPROF=127.0.0.1:9401 ${KFSNIFF_ENV:-} $work/kfsniff -i lo --tui --metrics-addr 127.0.0.1:9400 --export kafka://127.0.0.1:19092/kfsniff ${KFSNIFF_FLAGS:-} portrange 9092-9094"
ip netns exec "$ns" script -qfec "$cmd" /dev/null < "$work/pty-in" > /dev/null 2> "$OUT/kfsniff.err" &
pids+=($!)
for _ in $(seq 50); do
	if [ -s "$work/kfsniff.pid" ] && inns curl -sf http://127.0.0.1:9400/metrics > /dev/null; then break; fi
	sleep 0.2
done
kpid=$(cat "$work/kfsniff.pid")
echo "kfsniff pid $kpid; sampling every ${SAMPLE}s for ${dur}s into $OUT/soak.csv"

{
	printf "t_s,load1,rss_kib,heap_inuse_b,heap_alloc_b,goroutines,cpu_s,packets,kernel_received,kernel_drops,export_records,export_dropped"
	for t in $tables; do printf ",%s" "$t"; done
	echo
} > "$OUT/soak.csv"
t0=$(date +%s)
while :; do
	now=$(date +%s)
	t=$((now - t0))
	if [ ! -d /proc/"$kpid" ]; then
		echo "soak.sh: kfsniff exited early at ${t}s" >&2
		cat "$OUT/kfsniff.err" >&2
		exit 1
	fi
	inns curl -sf --max-time 5 http://127.0.0.1:9400/metrics > "$work/m.txt" || : > "$work/m.txt"
	rss=$(awk '/^VmRSS/ {print $2}' /proc/"$kpid"/status)
	awk -v t="$t" -v rss="$rss" -v load="$(cut -d' ' -f1 /proc/loadavg)" -v tables="$tables" '
		function v(k) { return (k in m) ? m[k] : "" }
		/^#/ { next }
		{ m[$1] = $2 }
		END {
			printf "%d,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s", t, load, rss,
				v("go_memstats_heap_inuse_bytes"), v("go_memstats_heap_alloc_bytes"), v("go_goroutines"),
				v("process_cpu_seconds_total"), v("kfsniff_capture_packets_total"),
				v("kfsniff_capture_kernel_received_total"), v("kfsniff_capture_kernel_drops_total"),
				v("kfsniff_export_records_total"), v("kfsniff_export_dropped_total")
			n = split(tables, ts, " ")
			for (i = 1; i <= n; i++) printf ",%s", v("kfsniff_table_size{table=\"" ts[i] "\"}")
			printf "\n"
		}' "$work/m.txt" >> "$OUT/soak.csv"
	grep '^kfsniff_table_bound' "$work/m.txt" > "$OUT/bounds.txt" || true
	# Heap profiles at the reference, half way and at the end.
	if [ "$t" -ge "$WARMUP" ] && [ ! -f "$OUT/heap-warm.pprof" ]; then
		inns curl -sf --max-time 20 -o "$OUT/heap-warm.pprof" http://127.0.0.1:9401/debug/pprof/heap || true
	fi
	if [ "$t" -ge $((dur / 2)) ] && [ ! -f "$OUT/heap-half.pprof" ]; then
		inns curl -sf --max-time 20 -o "$OUT/heap-half.pprof" http://127.0.0.1:9401/debug/pprof/heap || true
	fi
	if [ "$t" -ge "$dur" ]; then
		inns curl -sf --max-time 20 -o "$OUT/heap-end.pprof" http://127.0.0.1:9401/debug/pprof/heap || true
	fi
	if [ "$t" -ge "$dur" ]; then break; fi
	sleep $((SAMPLE - ($(date +%s) - now)))
done
spool=$(du -sm "$work/tmp" | cut -f1)
kill -INT "$kpid" 2> /dev/null || true
for _ in $(seq 100); do [ -d /proc/"$kpid" ] || break; sleep 0.2; done
echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) at the end, $(date -u +%FT%TZ)" | tee -a "$OUT/machine.txt"
tail -1 "$OUT/soakload.log" | tee -a "$OUT/machine.txt"
echo "UI spool at the end: ${spool} MB (TMPDIR, every packet kept for the save key)" | tee -a "$OUT/machine.txt"
summarise
