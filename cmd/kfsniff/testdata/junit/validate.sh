#!/bin/sh
# validate.sh FILE...: validate JUnit XML files against the published
# schemas beside this script (README.md), with xmllint. Installs Debian's
# libxml2-utils when xmllint is missing and we are root (CI); otherwise
# says how to install it and exits 3.
set -eu
dir=$(cd "$(dirname "$0")" && pwd)
if ! command -v xmllint >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "validate.sh: installing xmllint (libxml2-utils)" >&2
		export DEBIAN_FRONTEND=noninteractive
		apt-get install -y -qq --no-install-recommends libxml2-utils >&2 ||
			{ apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends libxml2-utils >&2; }
	else
		echo "validate.sh: xmllint not found: install libxml2-utils (apt-get install libxml2-utils)" >&2
		exit 3
	fi
fi
for xsd in junit-10.xsd JUnit.xsd; do
	xmllint --noout --schema "$dir/$xsd" "$@"
done
