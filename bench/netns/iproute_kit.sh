#!/usr/bin/env bash
# iproute_kit.sh: Debian's `ip` and `tc` with the libraries they load, in a folder that can travel
# to a machine without iproute2 (the lent GPU machine has none), so bench/netns/cluster.sh runs
# there with the folder's bin/ first on PATH. glibc and libz are left to that machine.
#
#   bench/netns/iproute_kit.sh [DEST]        (default .iproute)
#   PATH=$PWD/DEST/bin:$PATH bench/netns/cluster.sh check
#
# bin/ip and bin/tc are wrappers: the libraries are put in front for iproute2 alone, and
# `ip netns exec NS CMD` runs CMD with the caller's LD_LIBRARY_PATH, not the folder's.
set -euo pipefail
dest=${1:-.iproute}
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/real" "$dest/lib"
skip='^(linux-vdso|ld-linux|libc|libm|libz)\.so'
for tool in ip tc; do
  path=$(command -v "$tool") || { echo "iproute_kit.sh: $tool not found (apt-get install iproute2)" >&2; exit 2; }
  cp "$path" "$dest/real/$tool"
  ldd "$path" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
    [[ $(basename "$lib") =~ $skip ]] || cp -L "$lib" "$dest/lib/"
  done
  cat >"$dest/bin/$tool" <<'WRAP'
#!/usr/bin/env bash
here=$(cd "$(dirname "$0")/.." && pwd)
name=$(basename "$0")
if [ "$name" = ip ] && [ "${1:-}" = netns ] && [ "${2:-}" = exec ] && [ $# -ge 4 ]; then
  ns=$3
  shift 3
  if [ -n "${LD_LIBRARY_PATH:-}" ]; then keep=(env "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"); else keep=(env -u LD_LIBRARY_PATH); fi
  LD_LIBRARY_PATH=$here/lib exec "$here/real/ip" netns exec "$ns" "${keep[@]}" "$@"
fi
LD_LIBRARY_PATH=$here/lib exec "$here/real/$name" "$@"
WRAP
  chmod +x "$dest/bin/$tool"
done
du -sh "$dest"
