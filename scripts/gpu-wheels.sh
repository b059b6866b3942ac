#!/usr/bin/env bash
# Wheels the GPU machine lacks for scripts/gpu-check.sh (its Python 3.12 has torch, numpy, pandas, pyarrow,
# pyyaml, scikit-learn, but no snakemake or jsonschema): downloaded here into .whl/ (git-ignored through
# .git/info/exclude), to be carried to the device and installed by gpu-check.sh. The packages and versions
# are those installed in this project's environment (.venv, from pyproject.toml's pins): snakemake and
# jsonschema with everything they require. Binary wheels for CPython 3.12 come from the index; the few
# pure-Python packages published only as sources are built into wheels here.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf .whl && mkdir -p .whl
"$PY" - <<'PYEOF' > /tmp/hasfl-wheel-pins.txt
# the requirement closure of snakemake and jsonschema as installed here (name==version)
import re
from importlib import metadata
# present on the GPU machine's Python (docs: /work/.library/device/KINDS.md); left out
PRESENT = {"numpy", "pandas", "pyarrow", "pyyaml", "requests", "urllib3", "idna", "certifi", "charset-normalizer",
           "packaging", "psutil", "attrs", "jinja2", "markupsafe", "typing-extensions", "wrapt", "tabulate",
           "platformdirs", "six", "python-dateutil", "setuptools", "pip", "wheel"}
seen, todo = {}, ["snakemake", "jsonschema"]
while todo:
    name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
    if name in seen or name in PRESENT:
        continue
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        continue
    seen[name] = dist.version
    for req in dist.requires or []:
        if "extra ==" in req:
            continue
        todo.append(re.match(r"[A-Za-z0-9_.\-]+", req).group(0))
print("\n".join(f"{n}=={v}" for n, v in sorted(seen.items())))
PYEOF
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
      --platform manylinux1_x86_64)
while read -r pin; do
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      "${plat[@]}" -d .whl "$pin" 2>/dev/null ||
    "$PY" -m pip wheel -q --no-deps -w .whl "$pin"  # sources only: a pure-Python wheel built here
done < /tmp/hasfl-wheel-pins.txt
echo "$(ls .whl | wc -l) wheels, $(du -sh .whl | cut -f1) in .whl/"
