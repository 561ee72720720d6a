#!/bin/sh
# The docs site's browser check needs Chromium. Install Debian's package when it is missing and
# this runs as root (CI does); otherwise say how, and fail.
command -v chromium >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null &&
    exit 0
fi
echo "Chromium is missing: install Debian's chromium package (apt-get install chromium)" >&2
exit 1
