# The "--name VALUE" flags of the benchmark scripts (bench/torch/run.sh, bench/netns/cluster.sh,
# bench/compare_allreduce.sh). Sourced; defines one function.
#
# value_flag NAMES "$@": when $1 is --NAME for one of the space-separated NAMES, sets the shell
# variable NAME (hyphens read as underscores: --build-dir sets build_dir) to $2 and returns 0, so
# the caller shifts 2; returns 1 when $1 is none of them (the caller reads it itself); exits 2,
# saying so, when the flag has no value.
value_flag() {
  local _vf_names=" $1 " _vf_flag=$2
  shift
  case "$_vf_flag" in --*) ;; *) return 1 ;; esac
  local _vf_name=${_vf_flag#--}
  [[ "$_vf_names" == *" $_vf_name "* ]] || return 1
  if [ $# -lt 2 ]; then
    echo "$(basename "$0"): $_vf_flag needs a value" >&2
    exit 2
  fi
  printf -v "${_vf_name//-/_}" '%s' "$2"
}
