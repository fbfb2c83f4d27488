#!/usr/bin/env bash
# bench/e2e.sh: the real kfsniff binary on the benchmark captures, against
# the floor and tshark, with issue 14's targets.
#
# Builds kfsniff (as `make build` does), bench/cmd/benchgen, bench/cmd/realgen
# and bench/cmd/floor, generates the captures: the shapes of bench/workload
# (SHAPES) and captures of real kgo clients against kfake (REAL, recorded by
# realgen at benchmark time, never committed), then for each capture runs,
# RUNS times alternately,
#     /usr/bin/time -v floor X
#     /usr/bin/time -v kfsniff -r X --json                   (one worker per CPU)
#     /usr/bin/time -v kfsniff -r X --json --workers 1       (kfsniff1)
#     /usr/bin/time -v tshark -r X -d tcp.port==9092-9094,kafka -Y kafka \
#         -T fields -e kafka.request_key -e kafka.correlation_id -e kafka.error
# (stdout to a file) and prints the median wall time, MB/s (10^6 bytes per
# second of file), packets/s and the largest peak RSS of the runs. Then the
# start-up: STARTUP_RUNS alternate runs of the floor and of kfsniff on a small
# capture, median wall times. Last, a Markdown table for BENCHMARKS.md with
# issue 14's targets, PASS or MISS:
#     kfsniff (default workers) throughput / the floor's      >= 0.5
#     kfsniff (default workers) throughput / tshark's         >= 30
#       (with the floor's throughput / tshark's beside it: where the floor
#       itself is under 30x, no reader of the file with gopacket reaches it)
#     default workers / one worker (2 CPUs: 2 workers)        >= 1.6
#       (with its ceiling beside it: CPUs x one worker's wall / the
#       default's CPU; one worker already overlaps reading, analysis and
#       merging, so where it uses more than 1.25 cores of 2, 1.6x needs the
#       default to spend less CPU than one worker)
#     peak RSS, default workers                               <  200 MiB
#     peak RSS, default workers / tshark's                    <  0.25
#     start-up: kfsniff's wall time / the floor's on STARTUP_FILE  <= 1.5
#
# The real captures (bench/cmd/realgen):
#   bulk   a kgo producer and a consumer group of two on loopback: 100,000
#          Produce requests of one 7,000-byte record each, read back; ~890 MB
#   storm  4 kgo producers retrying Produce refused with
#          NOT_LEADER_OR_FOLLOWER, 1 ms backoff, Metadata every 10 ms; stops
#          after 60,000 refusals (~65,000 exchanges, 56 MB)
# Recording both takes about 1.5 minutes and 1.7 GB of memory (kfake keeps
# the records).
#
# Environment:
#   SHAPES        generated shapes to run (default "small large"; "" for none)
#   REAL          real-client captures to run (default "bulk storm"; "" for none)
#   PACKETS       small shape: about this many packets (default 1000000)
#   SIZE_MB       large shape: about this many MB (default 1000)
#   REALGEN_FLAGS more flags for realgen, e.g. "-records 20000" for a quick run
#   RUNS          runs of each program per capture (default 3)
#   TSHARK        1 (default): run tshark too, installing it when missing (as
#                 compare-tshark.sh does); 0: skip it and its targets
#   STARTUP_FILE  the small capture of the start-up target
#                 (default fixtures/pcaps/basic.pcap)
#   STARTUP_RUNS  runs of each program on it (default 31; 0 skips it)
#   DIR           where to write the captures (default: a temporary directory,
#                 removed at the end); with REUSE=1, captures already there are
#                 used
#   GO            the go command (default go)
#   BASE          a git revision: also build kfsniff at BASE and run it the same
#                 way, alternated with the others on the same captures (base,
#                 base1), to show a change made kfsniff no slower
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
SHAPES=${SHAPES-small large}
REAL=${REAL-bulk storm}
PACKETS=${PACKETS:-1000000}
SIZE_MB=${SIZE_MB:-1000}
REALGEN_FLAGS=${REALGEN_FLAGS:-}
RUNS=${RUNS:-3}
TSHARK=${TSHARK:-1}
STARTUP_FILE=${STARTUP_FILE:-fixtures/pcaps/basic.pcap}
STARTUP_RUNS=${STARTUP_RUNS:-31}
REUSE=${REUSE:-0}
BASE=${BASE:-}

work=$(mktemp -d "${TMPDIR:-/tmp}/kfsniff-e2e.XXXXXX")
trap 'if [ -n "$BASE" ]; then git worktree remove --force "$work/base" >/dev/null 2>&1 || true; fi; rm -rf "$work"' EXIT
DIR=${DIR:-$work/captures}
mkdir -p "$DIR"

if [ ! -x /usr/bin/time ]; then
	echo "e2e.sh: /usr/bin/time is missing (apt-get install -y time)" >&2
	exit 1
fi
if [ "$TSHARK" = 1 ] && ! command -v tshark > /dev/null; then
	echo "== installing tshark"
	if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null; then
		echo "e2e.sh: tshark is missing; install it (Debian/Ubuntu: sudo apt-get install -y tshark) or set TSHARK=0" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	# Do not ask whether non-root users may capture.
	echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends tshark > /dev/null
fi

echo "== build"
CGO_ENABLED=0 $GO build -trimpath -o "$work/kfsniff" ./cmd/kfsniff
CGO_ENABLED=0 $GO build -trimpath -o "$work/benchgen" ./bench/cmd/benchgen
CGO_ENABLED=0 $GO build -trimpath -o "$work/realgen" ./bench/cmd/realgen
CGO_ENABLED=0 $GO build -trimpath -o "$work/floor" ./bench/cmd/floor
tools="floor kfsniff kfsniff1"
if [ "$TSHARK" = 1 ]; then tools="$tools tshark"; fi
if [ -n "$BASE" ]; then
	git worktree add -q --detach "$work/base" "$BASE"
	(cd "$work/base" && CGO_ENABLED=0 $GO build -trimpath -o "$work/kfsniff-base" ./cmd/kfsniff)
	tools="$tools base base1"
fi

echo "== machine"
echo "cpu:    $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc)"
echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
echo "go:     $($GO version)"
if [ "$TSHARK" = 1 ]; then echo "tshark: $(tshark --version 2> /dev/null | head -1)"; fi
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' + uncommitted changes')"
if [ -n "$BASE" ]; then echo "base:   $(git rev-parse --short "$BASE")"; fi
echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) before the runs"

median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

# measure NAME CMD...: runs CMD under /usr/bin/time -v, stdout to
# $work/NAME.out; appends "wall_seconds max_rss_kib cpu_seconds" (user +
# system) to $work/NAME.runs.
measure() {
	local name=$1
	shift
	local t0 t1 rss cpu
	t0=$(date +%s%N)
	/usr/bin/time -v -o "$work/time.txt" "$@" > "$work/$name.out" 2> "$work/$name.err" || {
		echo "e2e.sh: $name failed: $*" >&2
		cat "$work/$name.err" "$work/time.txt" >&2
		exit 1
	}
	t1=$(date +%s%N)
	rss=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$work/time.txt")
	cpu=$(awk -F: '/User time|System time/ {s += $2} END {printf "%.3f", s}' "$work/time.txt")
	echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", (b-a)/1e9}') $rss $cpu" >> "$work/$name.runs"
}

# run_tool TOOL FILE: one measured run of TOOL on FILE.
run_tool() {
	case $1 in
	floor) measure floor "$work/floor" "$2" ;;
	kfsniff) measure kfsniff "$work/kfsniff" -r "$2" --json ;;
	kfsniff1) measure kfsniff1 "$work/kfsniff" -r "$2" --json --workers 1 ;;
	tshark) measure tshark tshark -r "$2" -d tcp.port==9092-9094,kafka -Y kafka -T fields -e kafka.request_key -e kafka.correlation_id -e kafka.error ;;
	base) measure base "$work/kfsniff-base" -r "$2" --json ;;
	base1) measure base1 "$work/kfsniff-base" -r "$2" --json --workers 1 ;;
	esac
}

# json_total KEY: the first "KEY": N of the last default kfsniff run's report
# (the totals come first).
json_total() { grep -m1 "\"$1\":" "$work/kfsniff.out" | tr -dc 0-9; }

echo "== captures"
captures=""
for shape in $SHAPES; do
	if [ "$REUSE" = 1 ] && [ -f "$DIR/$shape.pcap" ]; then
		echo "reusing $DIR/$shape.pcap"
	else
		"$work/benchgen" -o "$DIR" -shape "$shape" -packets "$PACKETS" -size-mb "$SIZE_MB"
	fi
	captures="$captures $shape"
done
want=""
for r in $REAL; do
	if [ "$REUSE" = 1 ] && [ -f "$DIR/$r.pcap" ]; then
		echo "reusing $DIR/$r.pcap"
	else
		want="$want $r"
	fi
	captures="$captures $r"
done
if [ -n "$want" ]; then
	# shellcheck disable=SC2086 # word splitting wanted
	"$work/realgen" -o "$DIR" $REALGEN_FLAGS $want
fi

rows=()
md=()
for name in $captures; do
	f="$DIR/$name.pcap"
	echo "== $name"
	size=$(stat -c %s "$f")
	# One untimed floor run warms the page cache and counts the packets.
	packets=$("$work/floor" "$f" | sed -E 's/.*: ([0-9]+) packets.*/\1/')
	for tool in $tools; do rm -f "$work/$tool.runs"; done
	for i in $(seq "$RUNS"); do
		line="run $i:"
		for tool in $tools; do
			run_tool "$tool" "$f"
			line="$line $tool $(tail -1 "$work/$tool.runs" | cut -d' ' -f1)s"
		done
		echo "$line"
	done
	responses=$(json_total responses)
	unmatched=$(json_total unmatched_responses)
	exchanges=$((responses - unmatched))
	echo "kfsniff: $(json_total requests) requests, $exchanges exchanges in $(json_total packets) packets$(if [ "$TSHARK" = 1 ]; then echo "; tshark printed $(wc -l < "$work/tshark.out") lines (one per packet holding Kafka PDUs)"; fi)"
	for tool in $tools; do
		wall=$(cut -d' ' -f1 "$work/$tool.runs" | median)
		rss=$(cut -d' ' -f2 "$work/$tool.runs" | sort -g | tail -1)
		cpu=$(cut -d' ' -f3 "$work/$tool.runs" | median)
		all=$(cut -d' ' -f1 "$work/$tool.runs" | tr '\n' ' ')
		eval "${tool}_wall=$wall ${tool}_rss=$rss ${tool}_cpu=$cpu"
		rows+=("$(awk -v s="$name" -v t="$tool" -v w="$wall" -v c="$cpu" -v z="$size" -v p="$packets" -v r="$rss" -v a="$all" \
			'BEGIN {printf "%-6s %-8s %9.1f %9d %8.3f %8.3f %9.1f %11.0f %9.1f   %s", s, t, z/1e6, p, w, c, z/w/1e6, p/w, r/1024, a}')")
	done
	rows+=("$(awk -v s="$name" -v f="$floor_wall" -v k="$kfsniff_wall" -v o="$kfsniff1_wall" -v n="$(nproc)" \
		'BEGIN {printf "%-6s kfsniff/floor throughput: %.3f (the floor is %.1fx faster); one worker: %.3f; default (%d CPUs) / one worker: %.2fx", s, f/k, k/f, f/o, n, o/k}')")
	rows+=("$(awk -v s="$name" -v f="$floor_cpu" -v k="$kfsniff_cpu" -v o="$kfsniff1_cpu" \
		'BEGIN {printf "%-6s by CPU time (user + system, less sensitive to load): floor / kfsniff %.3f, floor / kfsniff one worker %.3f", s, f/k, f/o}')")
	# The workers' ceiling: the default run cannot take less wall time
	# than its CPU time spread over every CPU, so on N CPUs it is at most
	# N x (one worker's wall) / (the default's CPU) faster than one worker.
	# One worker already overlaps its reader, worker, merger and the
	# collector's GC (its CPU / wall, "cores used", is above 1), which
	# lowers this ceiling below N.
	rows+=("$(awk -v s="$name" -v o="$kfsniff1_wall" -v oc="$kfsniff1_cpu" -v kc="$kfsniff_cpu" -v n="$(nproc)" \
		'BEGIN {printf "%-6s workers: one worker uses %.2f cores (CPU / wall); the default uses %.2fx its CPU; ceiling of default / one worker on %d CPUs: %.2fx", s, oc/o, kc/oc, n, n*o/kc}')")
	if [ "$TSHARK" = 1 ]; then
		rows+=("$(awk -v s="$name" -v t="$tshark_wall" -v k="$kfsniff_wall" -v o="$kfsniff1_wall" -v tr="$tshark_rss" -v kr="$kfsniff_rss" -v tc="$tshark_cpu" -v kc="$kfsniff_cpu" -v oc="$kfsniff1_cpu" \
			'BEGIN {printf "%-6s kfsniff is %.1fx faster than tshark (one worker: %.1fx; by CPU time %.1fx and %.1fx); peak RSS kfsniff/tshark %.3f", s, t/k, t/o, tc/kc, tc/oc, kr/tr}')")
	else
		tshark_wall=0 tshark_rss=0 tshark_cpu=0
	fi
	if [ -n "$BASE" ]; then
		rows+=("$(awk -v s="$name" -v k="$kfsniff_wall" -v o="$kfsniff1_wall" -v b="$base_wall" -v c="$base1_wall" \
			'BEGIN {printf "%-6s kfsniff speed / base speed: %.3f (default), %.3f (one worker)", s, b/k, c/o}')")
	fi
	md+=("$(awk -v s="$name" -v z="$size" -v p="$packets" -v x="$exchanges" -v f="$floor_wall" -v k="$kfsniff_wall" -v o="$kfsniff1_wall" \
		-v t="$tshark_wall" -v kr="$kfsniff_rss" -v tr="$tshark_rss" -v kc="$kfsniff_cpu" -v n="$(nproc)" '
		function pf(ok) { return ok ? "PASS" : "**MISS**" }
		BEGIN {
			ts = t > 0 ? sprintf("%.3f", t) : "-"
			xt = t > 0 ? sprintf("%.1fx %s (floor %.1fx)", t/k, pf(t/k >= 30), t/f) : "-"
			rt = tr > 0 ? sprintf("%.3f %s", kr/tr, pf(kr/tr < 0.25)) : "-"
			printf "| %s | %.1f | %d | %d | %.3f | %.3f | %.3f | %s | %.3f %s | %s | %.2fx %s (ceiling %.2fx) | %.0f %s | %s |",
				s, z/1e6, p, x, f, o, k, ts, f/k, pf(f/k >= 0.5), xt, o/k, pf(o/k >= 1.6), n*o/kc, kr/1024, pf(kr/1024 < 200), rt
		}')")
done

startup=""
if [ "$STARTUP_RUNS" -gt 0 ]; then
	echo "== start-up: $STARTUP_FILE, $STARTUP_RUNS runs each"
	st_tools="floor kfsniff"
	if [ -n "$BASE" ]; then st_tools="$st_tools base"; fi
	for tool in $st_tools; do rm -f "$work/$tool.runs"; done
	"$work/floor" "$STARTUP_FILE" > /dev/null
	for i in $(seq "$STARTUP_RUNS"); do
		for tool in $st_tools; do run_tool "$tool" "$STARTUP_FILE"; done
	done
	for tool in $st_tools; do
		wall=$(cut -d' ' -f1 "$work/$tool.runs" | median)
		rss=$(cut -d' ' -f2 "$work/$tool.runs" | sort -g | tail -1)
		cpu=$(cut -d' ' -f3 "$work/$tool.runs" | median)
		eval "st_${tool}_wall=$wall st_${tool}_rss=$rss st_${tool}_cpu=$cpu"
		rows+=("$(awk -v s="start" -v t="$tool" -v w="$wall" -v c="$cpu" -v r="$rss" -v z="$(stat -c %s "$STARTUP_FILE")" \
			'BEGIN {printf "%-6s %-8s %9.3f %9s %8.4f %8.3f %9s %11s %9.1f   (median of the start-up runs)", s, t, z/1e6, "", w, c, "", "", r/1024}')")
	done
	startup=$(awk -v s="$STARTUP_FILE" -v n="$STARTUP_RUNS" -v f="$st_floor_wall" -v k="$st_kfsniff_wall" -v r="$st_kfsniff_rss" -v fc="$st_floor_cpu" -v kc="$st_kfsniff_cpu" '
		BEGIN { printf "| start-up: `%s`, median of %d runs | %.1f ms | %.1f ms | %.2f %s | %.0f / %.0f ms, %.2f | %.0f MiB |", s, n, f*1000, k*1000, k/f, (k/f <= 1.5 ? "PASS" : "**MISS**"), fc*1000, kc*1000, (fc > 0 ? kc/fc : 0), r/1024 }')
fi
echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) after the runs"

echo
echo "== results (median of $RUNS alternating runs; cpu_s: user + system; RSS: largest of the runs)"
printf "%-6s %-8s %9s %9s %8s %8s %9s %11s %9s   %s\n" capture program file_MB packets wall_s cpu_s MB/s packets/s RSS_MiB "all wall times (s)"
for r in "${rows[@]}"; do
	echo "$r"
done

echo
echo "== for BENCHMARKS.md (wall: median of $RUNS, seconds; kfsniff: --json, default workers ($(nproc) CPUs) unless said; RSS: largest of the runs)"
echo
echo "| capture | MB | packets | exchanges | floor s | kfsniff 1 worker s | kfsniff default s | tshark s | kfsniff ÷ floor (≥ 0.5) | × tshark (≥ 30; the floor's in brackets) | default ÷ 1 worker (≥ 1.6; the ceiling by CPU in brackets) | peak RSS MiB (< 200) | RSS ÷ tshark's (< 0.25) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for r in "${md[@]}"; do
	echo "$r"
done
if [ -n "$startup" ]; then
	echo
	echo "| start-up | floor | kfsniff | kfsniff ÷ floor (≤ 1.5) | CPU time: floor / kfsniff, ratio | kfsniff peak RSS |"
	echo "|---|---|---|---|---|---|"
	echo "$startup"
fi
