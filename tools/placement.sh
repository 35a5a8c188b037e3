# placement.sh - sourced by compare.sh and device_compare.sh: how many
# cores the run has, and the mpirun options that place Open MPI's ranks
# as tide-run places tide's (tools/launcher/bind.h), so that both are measured
# under the same placement.

# The physical cores we may run on: a core's hardware threads count once,
# as tide-run and Open MPI's --bind-to core count them.  nproc counts
# hardware threads, and obeys OMP_NUM_THREADS besides (on-device.sh sets
# it to 1).
count_cores() {
  local list range cpu topo
  list=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
  for range in ${list//,/ }; do
    for ((cpu = ${range%-*}; cpu <= ${range#*-}; cpu++)); do
      topo=/sys/devices/system/cpu/cpu$cpu/topology
      if [[ -r $topo/core_id ]]; then
        echo "$(cat "$topo/physical_package_id") $(cat "$topo/core_id")"
      else
        echo "cpu $cpu"
      fi
    done
  done | sort -u | wc -l
}

# ompi_binding RANKS CORES [bound|unbound]: sets ompi_bind to mpirun's
# placement options, those that give each rank what tide-run gives it:
# two cores where there are two a rank (compute and progress thread; Open
# MPI progresses only inside its calls, so the second core is there for
# fairness), one core where there is one, else none.
ompi_binding() {
  local n=$1 cores=$2
  if [[ ${3:-bound} == unbound ]]; then
    ompi_bind=(--bind-to none)
  elif ((cores >= 2 * n)); then
    ompi_bind=(--map-by slot:PE=2 --bind-to core)
  elif ((cores >= n)); then
    ompi_bind=(--bind-to core)
  else
    ompi_bind=(--bind-to none)
  fi
}
