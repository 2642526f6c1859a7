#!/usr/bin/env bash
# Install the tools the report checks run: pdflatex + latexmk (booktabs, xcolor, graphicx, lmodern),
# headless Chromium, and poppler's pdftoppm; and rsync, with which snakemake-storage-plugin-fs stages
# files in the storage-provider test. Idempotent: packages already installed are skipped, and
# nothing is fetched when all are present. Without root (and no passwordless sudo) it says so and
# exits 0: the report tests that need these tools then skip and name the missing tool.
set -euo pipefail

PACKAGES=(texlive-latex-recommended lmodern latexmk chromium poppler-utils rsync)

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo -n "$@"; else return 1; fi
}

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "report-tools: all present (${PACKAGES[*]})"
    exit 0
fi

echo "report-tools: installing ${missing[*]}"
start=$(date +%s)
if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q; then
    echo "report-tools: unavailable (cannot run apt-get as root)"
    exit 0
fi
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "report-tools: installed in $(($(date +%s) - start)) s"
