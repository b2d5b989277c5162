# shellcheck shell=bash
# bundle_lib.sh: shell functions shared by bench/gpu/bundle.sh and bench/gpu/torch_kit.sh (sourced,
# not run).

# copy_deps FILE LIBDIR SKIP WHO: copies every shared library FILE loads, as resolved on this
# machine, into LIBDIR (stripped of debug info), except those whose file name matches the regular
# expression SKIP and those LIBDIR already holds. Exits 1, naming WHO (the calling script), if FILE
# has libraries this machine cannot resolve.
copy_deps() {
  local file=$1 libdir=$2 skip=$3 who=$4 lib name
  ldd "$file" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
    name=$(basename "$lib")
    [[ $name =~ $skip ]] && continue
    [ -e "$libdir/$name" ] && continue
    cp -L "$lib" "$libdir/$name"
    strip --strip-debug "$libdir/$name"
  done
  if ldd "$file" | grep -q 'not found'; then
    echo "$who: $file has unresolved libraries here:" >&2
    ldd "$file" | grep 'not found' >&2
    exit 1
  fi
}
