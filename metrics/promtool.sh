#!/usr/bin/env bash
# metrics/promtool.sh: prints the path of promtool, installing Debian's
# prometheus package first when it is missing (the metrics tests check
# kfsniff's /metrics with `promtool check metrics`).
#
# The package is large: 22.5 MB to download, 332 MB on disk with its 11
# dependencies (JavaScript libraries for Prometheus's web UI, which
# --no-install-recommends does not drop: they are Depends). Installing it
# took 28 s on the development machine (2 vCPUs, Debian's mirror), once
# per machine. Installing needs root and Debian's package mirror; where
# either is missing the script says so and exits 1. The tests only run
# promtool; on a host with systemd, Debian's package also enables and
# starts a Prometheus server on :9090 (in containers such as CI's,
# policy-rc.d keeps apt from starting services): install promtool
# yourself there first if you do not want that.
set -euo pipefail

if p=$(command -v promtool); then
	echo "$p"
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
	echo "promtool is missing; install it with: apt-get install -y --no-install-recommends prometheus (as root, on Debian)" >&2
	exit 1
fi
{
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y --no-install-recommends prometheus ||
		{ apt-get update && apt-get install -y --no-install-recommends prometheus; }
} >&2
command -v promtool
