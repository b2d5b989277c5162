#!/bin/sh
# netns_rsh.sh: an "rsh agent" for OpenMPI that enters a network namespace of the emulated
# cluster (bench/netns/cluster.sh) instead of logging in to another machine, so mpirun can start
# its daemons in cohort-h0, cohort-h1, ... without ssh:
#
#   mpirun --mca plm_rsh_agent $PWD/bench/netns/netns_rsh.sh --mca plm_rsh_no_tree_spawn 1 \
#          --host h0,h1,h2,h3 ...
#
# OpenMPI calls it like ssh: [options] HOST COMMAND...; the command words are joined and run by
# a shell inside the namespace, as sshd would. Options (ssh's -x and the like) are ignored.
while [ $# -gt 0 ]; do
  case "$1" in
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "netns_rsh.sh: usage: netns_rsh.sh HOST COMMAND..." >&2; exit 2; }
host=$1
shift
case "$host" in
  cohort-h*) ns=$host ;;
  *) ns=cohort-$host ;;
esac
exec ip netns exec "$ns" /bin/sh -c "$*"
