#!/usr/bin/env bash
# Debian's headless chromium for the report and TensorBoard screenshot tests. Where it can install (root with apt-get)
# and chromium is still missing, those tests fail; elsewhere (not root) they are skipped.
set -uo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "install-browser: could not install chromium; the browser tests will fail" >&2
else
  echo "install-browser: not root or no apt-get; browser tests will be skipped" >&2
fi
exit 0
