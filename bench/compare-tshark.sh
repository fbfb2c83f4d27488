#!/usr/bin/env bash
# bench/compare-tshark.sh: kfsniff against Wireshark's Kafka dissector.
#
# Installs tshark if it is missing (Debian: apt-get install -y tshark), builds
# kfsniff and bench/cmd/benchgen, generates the benchmark captures, and times,
# alternately, RUNS times each,
#     tshark -r X -Y kafka -T fields -e kafka.request_key -e kafka.correlation_id -e kafka.error
#     kfsniff -r X --json
# (both writing their output to a file) under /usr/bin/time -v, then prints
# the median wall times, MB/s, packets/s, kfsniff's speed-up over tshark and
# the peak RSS of each.
#
# tshark dissects Kafka on port 9092 only by default: the captures use 9092.
# Two sets of captures (VERSIONS):
#   tshark   the highest message versions tshark 4.0 dissects in full
#            (Produce v8, Fetch v11, Metadata v9, FindCoordinator v3): the
#            fair comparison, tshark doing its whole job
#   current  what Kafka 3.7 clients send (Produce v9, Fetch v15, Metadata v12):
#            tshark 4.0 gives up on Produce and Fetch bodies ("Unsupported
#            Produce version", malformed), so it does less work than on
#            traffic it knows
#
# Environment:
#   SHAPES    shapes to run (default "small large")
#   VERSIONS  capture sets (default "tshark current")
#   PACKETS   small shape: about this many packets (default 1000000)
#   SIZE_MB   large shape: about this many MB (default 1000); lower it when
#             tshark is too slow, the size used is printed
#   RUNS      runs of each program per capture (default 3)
#   DIR       where to write the captures (default: a temporary directory)
#   GO        the go command (default go)
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
SHAPES=${SHAPES:-small large}
VERSIONS=${VERSIONS:-tshark current}
PACKETS=${PACKETS:-1000000}
SIZE_MB=${SIZE_MB:-1000}
RUNS=${RUNS:-3}

if ! command -v tshark > /dev/null; then
	echo "== installing tshark"
	if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null; then
		echo "compare-tshark.sh: tshark is missing; install it (Debian/Ubuntu: sudo apt-get install -y tshark)" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	# Do not ask whether non-root users may capture.
	echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
	apt-get update -qq
	apt-get install -y -qq tshark > /dev/null
fi
if [ ! -x /usr/bin/time ]; then
	echo "compare-tshark.sh: /usr/bin/time is missing (apt-get install -y time)" >&2
	exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kfsniff-tshark.XXXXXX")
trap 'rm -rf "$work"' EXIT
DIR=${DIR:-$work/captures}
mkdir -p "$DIR"

echo "== build"
CGO_ENABLED=0 $GO build -trimpath -o "$work/kfsniff" ./cmd/kfsniff
CGO_ENABLED=0 $GO build -trimpath -o "$work/benchgen" ./bench/cmd/benchgen

echo "== machine"
echo "cpu:    $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc)"
echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
echo "tshark: $(tshark --version 2> /dev/null | head -1)"
echo "go:     $($GO version)"
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' + uncommitted changes')"
echo "sizes:  PACKETS=$PACKETS (small), SIZE_MB=$SIZE_MB (large)"
echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) before the runs"

median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

# measure NAME OUT CMD...: runs CMD under /usr/bin/time -v with stdout to OUT;
# appends "wall_seconds max_rss_kib" to $work/NAME.runs.
measure() {
	local name=$1 out=$2
	shift 2
	local t0 t1 rss
	t0=$(date +%s%N)
	/usr/bin/time -v -o "$work/time.txt" "$@" > "$out" 2> "$work/$name.err" || {
		echo "compare-tshark.sh: $name failed:" >&2
		cat "$work/$name.err" "$work/time.txt" >&2
		exit 1
	}
	t1=$(date +%s%N)
	rss=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$work/time.txt")
	echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b-a)/1e9}') $rss" >> "$work/$name.runs"
}

rows=()
for versions in $VERSIONS; do
	for shape in $SHAPES; do
		name=$shape
		[ "$versions" = current ] || name="$shape-$versions"
		f="$DIR/$name.pcap"
		echo "== $name"
		"$work/benchgen" -o "$DIR" -shape "$shape" -packets "$PACKETS" -size-mb "$SIZE_MB" -versions "$versions"
		size=$(stat -c %s "$f")
		cat "$f" > /dev/null # page cache
		rm -f "$work/tshark.runs" "$work/kfsniff.runs"
		for i in $(seq "$RUNS"); do
			measure tshark "$work/tshark.out" tshark -r "$f" -Y kafka -T fields -e kafka.request_key -e kafka.correlation_id -e kafka.error
			measure kfsniff "$work/kfsniff.json" "$work/kfsniff" -r "$f" --json
			echo "run $i: tshark $(tail -1 "$work/tshark.runs" | cut -d' ' -f1)s, kfsniff $(tail -1 "$work/kfsniff.runs" | cut -d' ' -f1)s"
		done
		packets=$(grep -m1 '"packets"' "$work/kfsniff.json" | tr -dc 0-9)
		reqs=$(grep -m1 '"requests"' "$work/kfsniff.json" | tr -dc 0-9)
		resps=$(grep -m1 '"responses"' "$work/kfsniff.json" | tr -dc 0-9)
		echo "tshark printed $(wc -l < "$work/tshark.out") lines (one per packet holding Kafka PDUs); kfsniff decoded $reqs requests and $resps responses in $packets packets"
		for tool in tshark kfsniff; do
			wall=$(cut -d' ' -f1 "$work/$tool.runs" | median)
			rss=$(cut -d' ' -f2 "$work/$tool.runs" | sort -g | tail -1)
			all=$(cut -d' ' -f1 "$work/$tool.runs" | tr '\n' ' ')
			eval "${tool}_wall=$wall ${tool}_rss=$rss"
			rows+=("$(awk -v s="$name" -v t="$tool" -v w="$wall" -v z="$size" -v p="$packets" -v r="$rss" -v a="$all" \
				'BEGIN {printf "%-13s %-8s %9.1f %9d %9.2f %9.1f %11.0f %9.1f   %s", s, t, z/1e6, p, w, z/w/1e6, p/w, r/1024, a}')")
		done
		rows+=("$(awk -v s="$name" -v t="$tshark_wall" -v k="$kfsniff_wall" -v tr="$tshark_rss" -v kr="$kfsniff_rss" \
			'BEGIN {printf "%-13s kfsniff is %.1fx faster than tshark; peak RSS kfsniff/tshark %.3f", s, t/k, kr/tr}')")
	done
done
echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) after the runs"

echo
echo "== results (median of $RUNS alternating runs; RSS: largest of the runs)"
printf "%-13s %-8s %9s %9s %9s %9s %11s %9s   %s\n" capture program file_MB packets wall_s MB/s packets/s RSS_MiB "all wall times (s)"
for r in "${rows[@]}"; do
	echo "$r"
done
