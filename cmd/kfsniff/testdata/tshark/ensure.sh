#!/bin/sh
# ensure.sh: install tshark and editcap (Debian's tshark package) when
# missing, for the tests that compare kfsniff with them. Exit 0 when they
# are there; otherwise the reason on stderr and exit 1 (the test skips).
command -v tshark >/dev/null 2>&1 && command -v editcap >/dev/null 2>&1 && exit 0
echo "ensure.sh: installing tshark" >&2
if [ "$(id -u)" != 0 ]; then
	echo "ensure.sh: not root: cannot apt-get install tshark" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null
apt-get update -qq >&2 && apt-get install -y -qq tshark >&2 || exit 1
command -v tshark >/dev/null 2>&1 && command -v editcap >/dev/null 2>&1
