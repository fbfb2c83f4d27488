#!/bin/sh
# compare-reports.sh OLD [NEW]: the JSON report of every committed capture
# (and the shared ones beside the repository), from kfsniff built at git
# revision OLD and at NEW (default: the working tree), compared after
# leaving out what NEW adds that OLD could not say: report sections OLD did
# not have, and findings of rules OLD did not have. Prints one line per
# capture that differs, with the JSON paths that differ, then a count.
# Used to show that a restructuring changed no output (issue 11), and to
# list the changes a re-tuning made. Needs git, go and jq.
set -eu
old=${1:?usage: compare-reports.sh OLD [NEW]}
new=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/old" >/dev/null 2>&1 || true; git -C "$root" worktree remove --force "$work/new" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

build() { # build REV DIR -> DIR/kfsniff
	if [ -z "$1" ]; then
		mkdir -p "$2"
		(cd "$root" && CGO_ENABLED=0 go build -o "$2/kfsniff" ./cmd/kfsniff)
		return
	fi
	git -C "$root" worktree add -q --detach "$2" "$1"
	(cd "$2" && CGO_ENABLED=0 go build -o "$2/kfsniff" ./cmd/kfsniff)
}
build "$old" "$work/old"
build "$new" "$work/new"
newbin=$work/new/kfsniff

# Rules OLD knew, and the top-level keys of OLD's report.
"$work/old/kfsniff" --list-detectors | sed -n 's/^\([a-z0-9-]*\) (up to .*/\1/p' | jq -R . | jq -s . >"$work/rules.json"

captures=$(cd "$root" && find fixtures/pcaps -name '*.pcap' -o -name '*.pcapng' -o -name '*.pcap.gz' | sort)
shared=$(cd "$root" && find ../shared/captures -name '*.pcap' -o -name '*.pcapng' 2>/dev/null | sort || true)
differ=0
added_only=0
total=0
for c in $captures $shared; do
	total=$((total + 1))
	"$work/old/kfsniff" -r "$root/$c" --json >"$work/a.json" 2>/dev/null || true
	"$newbin" -r "$root/$c" --json >"$work/b.json" 2>/dev/null || true
	# Keep OLD's keys only, and findings of OLD's rules.
	jq -S --slurpfile rules "$work/rules.json" --slurpfile a "$work/a.json" '
		with_entries(select(.key as $k | $a[0] | has($k)))
		| if .findings then .findings |= map(select(.detector as $d | $rules[0] | index($d))) else . end
	' "$work/b.json" >"$work/b2.json"
	jq -S . "$work/a.json" >"$work/a2.json"
	if ! cmp -s "$work/a2.json" "$work/b2.json"; then
		differ=$((differ + 1))
		# Paths whose value changed (fields NEW adds inside objects are
		# additions, counted apart).
		paths=$(jq -n --slurpfile a "$work/a2.json" --slurpfile b "$work/b2.json" -r '
			[($a[0] | paths(scalars)) as $p | select(($a[0] | getpath($p)) != ($b[0] | getpath($p))) | $p]
			| map(map(if type == "number" then "[]" else . end) | join(".")) | unique | .[:12] | join(" ")')
		added=$(jq -n --slurpfile a "$work/a2.json" --slurpfile b "$work/b2.json" -r '
			[($b[0] | paths(scalars)) as $p | select(($a[0] | getpath($p)) == null) | $p[-1] | strings] | unique | join(" ")')
		if [ -z "$paths" ]; then
			added_only=$((added_only + 1))
			[ -n "${VERBOSE:-}" ] && echo "$c: added $added"
			continue
		fi
		[ -n "$added" ] && paths="$paths (added: $added)"
		echo "$c: $paths"
	fi
done
echo "$((differ - added_only)) of $total captures differ; $added_only more only add fields"
