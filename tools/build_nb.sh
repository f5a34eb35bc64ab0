#!/usr/bin/env bash
# Author a chapter from its jupytext percent file: _jt/NAME.py -> nbs/NAME.ipynb, run it (outputs kept for
# the book), clean it, export the package. To edit an existing chapter first:
#   jupytext --to py:percent -o _jt/NAME.py nbs/NAME.ipynb
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
for name in "$@"; do
  name=$(basename "$name" .py); name=${name%.ipynb}
  upd=""; [ -f "nbs/$name.ipynb" ] && upd="--update"
  jupytext --quiet --to ipynb $upd --update-metadata '{"kernelspec":{"display_name":"Python 3","language":"python","name":"python3"},"jupytext":null}' -o "nbs/$name.ipynb" "_jt/$name.py"
  nbdev_export
  python tools/run_nb.py "nbs/$name.ipynb"
  nbdev_clean --fname "nbs/$name.ipynb"
done
nbdev_export
