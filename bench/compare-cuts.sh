#!/usr/bin/env bash
# bench/compare-cuts.sh: kfsniff against tshark on captures that begin
# mid-connection, as issue 10 measured it: each capture given (default: the
# real-client and recorded captures) is cut so that it starts at 10%, 20%,
# ... 90% of its packets (editcap -r), and the requests per (API key,
# version) kfsniff reports are compared with tshark's on the same cut file.
# Also counts the connections kfsniff shows with a server port of the
# capture as its client (inverted). Installs tshark if missing (Debian).
#
#   bench/compare-cuts.sh [capture...]
#   PORTS=9092-9094 bench/compare-cuts.sh   (the Kafka ports tshark is told)
set -euo pipefail
cd "$(dirname "$0")/.."
PORTS=${PORTS:-9092-9094}
if ! command -v tshark > /dev/null || ! command -v editcap > /dev/null; then
	echo "== installing tshark"
	if ! command -v apt-get > /dev/null || [ "$(id -u)" != 0 ]; then
		echo "compare-cuts.sh: tshark and editcap are missing; install them (Debian/Ubuntu: sudo apt-get install -y tshark)" >&2
		exit 2
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tshark > /dev/null
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/kfsniff-cuts.XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -o "$work/kfsniff" ./cmd/kfsniff
captures=("$@")
if [ ${#captures[@]} -eq 0 ]; then
	captures=(fixtures/pcaps/clients/*.pcap fixtures/pcaps/recorded-*.pcap)
fi
echo "tshark: $(tshark --version 2> /dev/null | head -1)"
total=0 same=0 inverted=0
for f in "${captures[@]}"; do
	n=$(capinfos -c -M "$f" | awk '/Number of packets/{print $NF}')
	for pct in 10 20 30 40 50 60 70 80 90; do
		start=$((n * pct / 100 + 1))
		editcap -r "$f" "$work/cut.pcap" "$start-$n" 2> /dev/null
		ts=$(tshark -r "$work/cut.pcap" -o "kafka.tcp.ports:$PORTS" -Y kafka.request_key -T fields \
			-e kafka.request_key -e kafka.api_version 2> /dev/null |
			awk -F'\t' '$2!=""{print $1"v"$2}' | sort | uniq -c | awk '{print $2"="$1}' | sort | tr '\n' ' ')
		"$work/kfsniff" -r "$work/cut.pcap" --ports "$PORTS" --json > "$work/cut.json"
		kf=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(sorted("%dv%d=%d"%(a["key"],a["version"],a["requests"]) for a in d["apis"] if a["requests"]>0)))' "$work/cut.json")
		inv=$(python3 -c '
import json,sys
lo,hi=(int(x) for x in sys.argv[2].split("-"))
d=json.load(open(sys.argv[1]))
print(sum(1 for c in d["connections"] if lo<=int(c["client"].rsplit(":",1)[1])<=hi))' "$work/cut.json" "$PORTS")
		total=$((total + 1))
		inverted=$((inverted + inv))
		if [ "$(echo $ts)" == "$(echo $kf)" ]; then
			same=$((same + 1))
		else
			echo "$(basename "$f") cut at $pct% (packet $start): differs"
			echo "    tshark:  $ts"
			echo "    kfsniff: $kf"
		fi
	done
done
echo "cuts: $total, same request counts per (key, version) as tshark: $same, connections shown inverted: $inverted"
