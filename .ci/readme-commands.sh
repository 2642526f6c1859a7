#!/usr/bin/env bash
# The README's quick start as a newcomer runs it: a clean clone of this checkout's HEAD, the README's
# install block, then its two commands in that order (the main job on the embedded default, then the
# tests), with no setup script run and no Docker engine reachable. The commands are read from the
# README's "Quick start" section, so what is tested is what the README says. Run by .ci/run before the
# setup scripts start any service.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q --no-hardlinks "$PWD" "$work/kit"
python3 .ci/quick_start.py README.md > "$work/quick-start.sh"
echo "README quick start, in a clean clone ($work/kit):"
sed 's/^/  /' "$work/quick-start.sh"

cd "$work/kit"
# As on a newcomer's machine: not CI (whose setup scripts ran), and no engine for the tests to find even
# where one runs here: the tests of services must skip, saying why.
env -u CI DOCKER_HOST=unix:///nonexistent/docker.sock bash -euo pipefail "$work/quick-start.sh"
