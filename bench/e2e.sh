#!/usr/bin/env bash
# bench/e2e.sh: the real kfsniff binary on the benchmark captures.
#
# Builds kfsniff (as `make build` does), bench/cmd/benchgen and bench/cmd/floor,
# generates the captures (bench/workload), then for each shape runs, RUNS times
# alternately,
#     /usr/bin/time -v floor X
#     /usr/bin/time -v kfsniff -r X --json > /dev/null               (one worker per CPU)
#     /usr/bin/time -v kfsniff -r X --json --workers 1 > /dev/null   (kfsniff-1)
# and prints the median wall time, MB/s (10^6 bytes per second of file),
# packets/s, the largest peak RSS of the runs, kfsniff's throughput as a
# fraction of the floor's, and the default's speed-up over one worker.
#
# Environment:
#   SHAPES   shapes to run (default "small large")
#   PACKETS  small shape: about this many packets (default 1000000)
#   SIZE_MB  large shape: about this many MB (default 1000)
#   RUNS     runs of each program per shape (default 3)
#   DIR      where to write the captures (default: a temporary directory,
#            removed at the end); with REUSE=1, captures already there are used
#   GO       the go command (default go)
#   BASE     a git revision: also build kfsniff at BASE and run it the same
#            way, alternated with the others on the same captures (base,
#            base1), to show a change made kfsniff no slower
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
SHAPES=${SHAPES:-small large}
PACKETS=${PACKETS:-1000000}
SIZE_MB=${SIZE_MB:-1000}
RUNS=${RUNS:-3}
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

echo "== build"
CGO_ENABLED=0 $GO build -trimpath -o "$work/kfsniff" ./cmd/kfsniff
CGO_ENABLED=0 $GO build -trimpath -o "$work/benchgen" ./bench/cmd/benchgen
CGO_ENABLED=0 $GO build -trimpath -o "$work/floor" ./bench/cmd/floor
tools="floor kfsniff kfsniff1"
if [ -n "$BASE" ]; then
	git worktree add -q --detach "$work/base" "$BASE"
	(cd "$work/base" && CGO_ENABLED=0 $GO build -trimpath -o "$work/kfsniff-base" ./cmd/kfsniff)
	tools="$tools base base1"
fi

echo "== machine"
echo "cpu:    $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc)"
echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
echo "go:     $($GO version)"
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' + uncommitted changes')"
if [ -n "$BASE" ]; then echo "base:   $(git rev-parse --short "$BASE")"; fi
echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) before the runs"

median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

# measure NAME CMD...: runs CMD under /usr/bin/time -v, stdout to /dev/null;
# appends "wall_seconds max_rss_kib" to $work/NAME.runs.
measure() {
	local name=$1
	shift
	local t0 t1
	t0=$(date +%s%N)
	/usr/bin/time -v -o "$work/time.txt" "$@" > /dev/null
	t1=$(date +%s%N)
	local rss
	rss=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$work/time.txt")
	echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", (b-a)/1e9}') $rss" >> "$work/$name.runs"
}

rows=()
for shape in $SHAPES; do
	f="$DIR/$shape.pcap"
	echo "== $shape"
	if [ "$REUSE" = 1 ] && [ -f "$f" ]; then
		echo "reusing $f"
	else
		"$work/benchgen" -o "$DIR" -shape "$shape" -packets "$PACKETS" -size-mb "$SIZE_MB"
	fi
	size=$(stat -c %s "$f")
	# One untimed floor run warms the page cache and counts the packets.
	packets=$("$work/floor" "$f" | sed -E 's/.*: ([0-9]+) packets.*/\1/')
	for tool in $tools; do rm -f "$work/$tool.runs"; done
	for i in $(seq "$RUNS"); do
		measure floor "$work/floor" "$f"
		measure kfsniff "$work/kfsniff" -r "$f" --json
		measure kfsniff1 "$work/kfsniff" -r "$f" --json --workers 1
		if [ -n "$BASE" ]; then
			measure base "$work/kfsniff-base" -r "$f" --json
			measure base1 "$work/kfsniff-base" -r "$f" --json --workers 1
		fi
	done
	for tool in $tools; do
		wall=$(cut -d' ' -f1 "$work/$tool.runs" | median)
		rss=$(cut -d' ' -f2 "$work/$tool.runs" | sort -g | tail -1)
		all=$(cut -d' ' -f1 "$work/$tool.runs" | tr '\n' ' ')
		eval "${tool}_wall=$wall"
		rows+=("$(awk -v s="$shape" -v t="$tool" -v w="$wall" -v z="$size" -v p="$packets" -v r="$rss" -v a="$all" \
			'BEGIN {printf "%-6s %-8s %9.1f %9d %8.3f %9.1f %11.0f %9.1f   %s", s, t, z/1e6, p, w, z/w/1e6, p/w, r/1024, a}')")
	done
	rows+=("$(awk -v s="$shape" -v f="$floor_wall" -v k="$kfsniff_wall" -v o="$kfsniff1_wall" -v n="$(nproc)" \
		'BEGIN {printf "%-6s kfsniff/floor throughput: %.3f (the floor is %.1fx faster); one worker: %.3f; default (%d CPUs) / one worker: %.2fx", s, f/k, k/f, f/o, n, o/k}')")
	if [ -n "$BASE" ]; then
		rows+=("$(awk -v s="$shape" -v k="$kfsniff_wall" -v o="$kfsniff1_wall" -v b="$base_wall" -v c="$base1_wall" \
			'BEGIN {printf "%-6s kfsniff speed / base speed: %.3f (default), %.3f (one worker)", s, b/k, c/o}')")
	fi
done
echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) after the runs"

echo
echo "== results (median of $RUNS runs; RSS: largest of the runs)"
printf "%-6s %-8s %9s %9s %8s %9s %11s %9s   %s\n" shape program file_MB packets wall_s MB/s packets/s RSS_MiB "all wall times (s)"
for r in "${rows[@]}"; do
	echo "$r"
done
