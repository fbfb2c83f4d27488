#!/bin/sh
# install-chromium.sh: installs Debian's chromium when no Chromium is on the
# PATH, for the HTML report's browser test (report/html_browser_test.go
# runs it). Needs root and a Debian package mirror (CI has both); prints
# the browser's path on its last line.
set -eu
for b in chromium chromium-browser google-chrome; do
	if p=$(command -v "$b" 2> /dev/null); then
		echo "$p"
		exit 0
	fi
done
if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null; then
	echo "install-chromium.sh: chromium is missing; install it (Debian: sudo apt-get install -y --no-install-recommends chromium)" >&2
	exit 1
fi
echo "== installing chromium (apt-get install -y --no-install-recommends chromium)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends chromium >&2
command -v chromium
