#!/usr/bin/env bash
# Install gelus and what it needs on a fresh machine.
#   scripts/install.sh            the package with the harness extra (.[harness]), plus offline Fashion-MNIST
#   scripts/install.sh --dev      the package with the dev extra (.[dev]: the harness and the test tools)
#   scripts/install.sh --corpora  plus the larger text corpus of the scale experiment
#                                 (Debian's linux-doc-6.1: 37 MB to download, 24 MB of text)
# The flags combine (--dev --corpora); an unknown one is refused with the usage line (exit status 2).
# torch is pinned through constraints.txt so that pip takes the CPU build and never pulls CUDA wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

usage="usage: scripts/install.sh [--dev] [--corpora] [--help]"
extras="[harness]"
corpora=0
for flag in "$@"; do
  case "$flag" in
    --dev) extras="[dev]" ;;
    --corpora) corpora=1 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "install.sh: unknown option '$flag'; $usage" >&2; exit 2 ;;
  esac
done

# System packages from Debian, best effort (a user's machine may have no apt or no root):
# Fashion-MNIST's IDX files (/usr/share/datasets/fashion-mnist) and English fortunes
# (/usr/share/games/fortunes) for the offline reproduction, and
# with --dev headless Chromium, which the report's rendering test drives.
apt_packages=()
[ -d /usr/share/datasets/fashion-mnist ] || apt_packages+=(dataset-fashion-mnist)
[ -d /usr/share/games/fortunes ] || apt_packages+=(fortunes)  # the language model's offline corpus
[ "$corpora" = 1 ] && [ ! -d /usr/share/doc/linux-doc-6.1/html/_sources ] && apt_packages+=(linux-doc-6.1)
[ "$extras" = "[dev]" ] && ! command -v chromium >/dev/null 2>&1 && apt_packages+=(chromium)
if [ ${#apt_packages[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_packages[@]}" >/dev/null) \
      || echo "install.sh: could not apt-get install ${apt_packages[*]}; see 'gelus data'" >&2
  else
    echo "install.sh: no apt-get or not root; install ${apt_packages[*]} by hand (see 'gelus data')" >&2
  fi
fi

"$PYTHON" -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".${extras}"
