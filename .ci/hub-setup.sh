#!/usr/bin/env bash
# A real Hugging Face hub for the hub tests (tests/test_hub.py): olah 0.5.4, a self-hosted hub mirror
# that serves local git repositories as hub repos (offline mode), in its own virtualenv .venv-olah (its
# web stack stays out of the kit's), and git-lfs, with which the tests commit archives and weights as
# large files, as the hub stores them. Idempotent: what is present is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo -n "$@"; else return 1; fi
}

if ! command -v git-lfs >/dev/null; then
    echo "hub-setup: installing git-lfs"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q git-lfs
fi

if ! .venv-olah/bin/python -c "import olah" 2>/dev/null; then
    echo "hub-setup: installing olah into .venv-olah"
    python3 -m venv .venv-olah
    .venv-olah/bin/python -m pip install -q --upgrade pip
    .venv-olah/bin/python -m pip install -q olah==0.5.4
fi
echo "hub-setup: $(git lfs version), olah $(.venv-olah/bin/python -c 'import importlib.metadata as m; print(m.version("olah"))')"
