#!/usr/bin/env bash
# Debian's headless chromium for the report and TensorBoard screenshot tests. Skipped quietly where it cannot install.
set -uo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "install-browser: could not install chromium; browser tests will be skipped" >&2
else
  echo "install-browser: not root or no apt-get; browser tests will be skipped" >&2
fi
exit 0
