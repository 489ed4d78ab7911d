#!/usr/bin/env bash
# Checks the user install path: a copy of the working tree's files (what a
# fresh clone has), `pip install .` into a new --system-site-packages venv,
# then `python setup.py sdist` and a pip install of that archive, each
# followed by a smoke test (save/load, compile with the c backend).
# Offline; a few minutes (the library compiles twice).  Not part of make test.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
python=${JITGRAD_PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir "$work/src"
(cd "$root" && git ls-files -co --exclude-standard | tar -cf - -T -) | tar -xf - -C "$work/src"

smoke() {
    (cd "$work" && JITGRAD_CACHE_DIR="$work/cache" "$1/bin/python" - <<'PY'
import io
import jitgrad as torch
b = io.BytesIO()
torch.save({"w": torch.ones(2, 3)}, b)
b.seek(0)
assert torch.load(b)["w"].tolist() == [[1.0] * 3] * 2
f = torch.compile(lambda a: (a * a).sum(), backend="c")
a = torch.randn(3, requires_grad=True)
f(a).backward()
assert a.grad.tolist() == (2 * a).tolist()
print("ok:", torch.__file__)
PY
    )
}

"$python" -m venv --system-site-packages "$work/venv"
(cd "$work/src" && "$work/venv/bin/pip" install --quiet --no-index .)
smoke "$work/venv"

(cd "$work/src" && "$python" setup.py -q sdist -d "$work/dist" >/dev/null)
"$python" -m venv --system-site-packages "$work/venv2"
"$work/venv2/bin/pip" install --quiet --no-index "$work"/dist/jitgrad-*.tar.gz
smoke "$work/venv2"
echo "pip-install-check: pip install . and the sdist both build and work"
