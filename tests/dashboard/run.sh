#!/usr/bin/env bash
# The built-in dashboard in a real browser: check.mjs drives Debian's
# Chromium through playwright-core against a gateway that the caller has
# already started and sent traffic to (see check.mjs for what it checks).
# playwright-core is installed from the npm registry with `npm ci` against
# the pinned lockfile (its integrity hash verifies the package) into a cache
# folder outside the checkout, reinstalled only when package.json or the
# lockfile changes; it never downloads a browser of its own.
#   usage: tests/dashboard/run.sh BASE_URL ADMIN_KEY_OR_EMPTY SCREENSHOT.png
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ $# -ne 3 ]; then
  echo "usage: $0 BASE_URL ADMIN_KEY_OR_EMPTY SCREENSHOT.png" >&2
  exit 2
fi
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}/npm-dashboard"
stamp="$cache/.package.sha256"
want=$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)
if [ ! -f "$cache/node_modules/playwright-core/package.json" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "== installing playwright-core into $cache"
  mkdir -p "$cache"
  cp "$here/package.json" "$here/package-lock.json" "$cache/"
  (cd "$cache" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" > "$stamp"
fi

if [ ! -x /usr/bin/chromium ]; then
  echo "== installing Debian's chromium"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi

# check.mjs runs from the cache folder, where its import resolves (ES modules
# ignore NODE_PATH).
cp "$here/check.mjs" "$cache/"
timeout 120 node "$cache/check.mjs" "$@"
