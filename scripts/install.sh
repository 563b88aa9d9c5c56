#!/usr/bin/env bash
# Install gelus and what it needs on a fresh machine.
#   scripts/install.sh          the package and its runtime dependencies, plus offline Fashion-MNIST
#   scripts/install.sh --dev    the same plus the test tools
# torch is pinned through constraints.txt so that pip takes the CPU build and never pulls CUDA wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

extras=""
[ "${1:-}" = "--dev" ] && extras="[dev]"

# Fashion-MNIST from Debian (IDX files under /usr/share/datasets/fashion-mnist); best effort, since
# a user's machine may have no apt or no root.
if [ ! -d /usr/share/datasets/fashion-mnist ] && command -v apt-get >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist >/dev/null) \
      || echo "install.sh: could not install dataset-fashion-mnist with apt; see 'gelus data'" >&2
  else
    echo "install.sh: not root, skipping 'apt-get install dataset-fashion-mnist'; see 'gelus data'" >&2
  fi
fi

"$PYTHON" -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".${extras}"
