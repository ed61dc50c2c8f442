# shellcheck shell=bash
# The Debian 12 packages testbedctl needs, in one place: the light set scripts/setup installs by
# default, and the groups of extras `scripts/setup --with GROUP` (or --all) and scripts/test add.
# Sourced by scripts/setup and scripts/test; src/core/extras.cc names the same packages for the
# verbs' "install the Debian package X (scripts/setup --with GROUP)" messages, and a unit test
# (tests/unit/extras_test.cc) checks that each one is in the group named here.

# Building the product and running a lab's core verbs (up, status, exec, bench, fault, verify,
# run, watch, HTML reports, down) on one host.
tb_pkg_light=(
  build-essential g++ cmake ninja-build pkg-config
  libnl-3-dev libnl-route-3-dev libmnl-dev libnetfilter-queue-dev
  libtoml11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev libgloo-dev
  libibverbs-dev librdmacm-dev
  libgtest-dev  # small; CMake finds GTest at configure time for the test targets
  # HTML reports (report/html.cc): Graphviz's headers at build time, its libgvc (libgvc6, also
  # a dependency of libgraphviz-dev) loaded when a report draws the topology; Chart.js inlined.
  libgraphviz-dev libgvc6 libjs-chart.js
  help2man  # man pages from --help (scripts/make-man): the `man` target scripts/setup builds
  # At run time: iproute2 for people, iptables and nft for the delay stage's and loss rules.
  iproute2 iputils-ping iptables nftables util-linux procps
)

# The extras, one group each. Keep tb_pkg_groups and tb_pkg_about in step with the arrays.
tb_pkg_groups=(tests launch slurm vm package frr dev)
declare -A tb_pkg_about=(
  [tests]="the test tiers' tools: python3 (check-rooms), iperf3, chromium, tmux"
  [launch]="launch's real frameworks: PyTorch under /usr/bin/python3, Open MPI (launch --mpi)"
  [slurm]="Slurm and munge for scripts/tb-srun and its tests (their services stay disabled)"
  [vm]="the lab VM (scripts/labvm): qemu-system-x86, debootstrap, cpio, zstd"
  [package]="scripts/package's check of the .deb: lintian"
  [frr]="FRR's zebra, bgpd and bfdd for [failover] mode = \"bfd\" (its service stays disabled)"
  [dev]="clang-format, to format C++ changes before a commit"
)
tb_pkg_tests=(python3 iperf3 chromium tmux)
# PyTorch with gloo under Debian's /usr/bin/python3, and Open MPI (mpirun; mpicxx for tests/mpi/).
tb_pkg_launch=(python3 python3-torch openmpi-bin libopenmpi-dev)
# The tests run their own munged, slurmctld and slurmd (tests/e2e/slurm_cluster.h), never the
# system's services; scripts/tb-srun reads the plan with python3.
tb_pkg_slurm=(slurmctld slurmd slurm-client munge python3)
tb_pkg_vm=(qemu-system-x86 debootstrap cpio zstd)
tb_pkg_package=(lintian)
tb_pkg_frr=(frr)
tb_pkg_dev=(clang-format)
# What scripts/test installs: every group its tiers use; of them, what building the tests needs
# (Open MPI's compiler wrapper, looked for at configure: tests/mpi/), installed before the build,
# the rest beside it.
tb_pkg_test_groups=(tests launch slurm vm package frr)
tb_pkg_test_build=(openmpi-bin libopenmpi-dev)

tb_pkg_is_group() {
  local g
  for g in "${tb_pkg_groups[@]}"; do [ "$g" = "$1" ] && return 0; done
  return 1
}

# The packages of the light set and of each group named (no duplicates), one per line.
tb_pkg_list() {
  local g p name
  local -A seen=()
  for g in light "$@"; do
    name="tb_pkg_$g[@]"
    for p in "${!name}"; do [ -n "${seen[$p]:-}" ] || { seen[$p]=1; echo "$p"; }; done
  done
}

# Installs the packages given that are not installed yet (dpkg-query first: nothing to do costs
# no apt run). WHO prefixes the messages. Services that would start in the host's own namespace
# (frr, munge, slurmctld, slurmd) are kept from starting while they install and disabled after.
tb_pkg_install() {
  local who=$1 p
  shift
  local missing=() installed
  # One dpkg-query for all of them (a package it does not know is left out of its answer).
  installed=" $(dpkg-query -W -f='${Package}:${Status}\n' "$@" 2>/dev/null |
    sed -n 's/:install ok installed$//p' | tr '\n' ' ' || true) "
  for p in "$@"; do
    [[ $installed == *" $p "* ]] || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "$who: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # frr's package would start its daemons in the host's own namespace; labs run their own (in
  # the routers' namespaces), so keep the services from starting while they install. The same
  # for munge, slurmctld and slurmd: the Slurm tests start their own, on their own socket and
  # ports, and a system slurmd would fight them.
  local made_policy=0 rc=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" || rc=$?
  [ "$made_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  [ "$rc" = 0 ] || return "$rc"
  local service
  for service in frr munge slurmctld slurmd; do
    if command -v systemctl >/dev/null && systemctl is-enabled "$service" >/dev/null 2>&1; then
      systemctl disable "$service" >/dev/null 2>&1 || true
    fi
  done
}

# The programs the scripts run that come from a package, and that package (the product's own
# are in src/core/extras.cc).
declare -A tb_pkg_of_program=(
  [qemu-system-x86_64]=qemu-system-x86 [debootstrap]=debootstrap [cpio]=cpio [zstd]=zstd
  [srun]=slurm-client [lintian]=lintian [help2man]=help2man [cmake]=cmake [cpack]=cmake
  [dpkg-deb]=dpkg [apt-get]=apt [chroot]=coreutils [python3]=python3
)

# "scripts/setup --with GROUP" for the first group that holds package $1, or "scripts/setup
# installs it" for the light set.
tb_pkg_setup_hint() {
  local g p name
  for p in "${tb_pkg_light[@]}"; do [ "$p" = "$1" ] && { echo "scripts/setup installs it"; return; }; done
  for g in "${tb_pkg_groups[@]}"; do
    name="tb_pkg_$g[@]"
    for p in "${!name}"; do [ "$p" = "$1" ] && { echo "scripts/setup --with $g"; return; }; done
  done
  echo "apt-get install $1"
}

# Exits 2 when a program named is not on PATH, one line per missing one:
#   "WHO needs debootstrap: install the Debian package debootstrap (scripts/setup --with vm)"
tb_need() {
  local who=$1 t pkg missing=0
  shift
  for t in "$@"; do
    command -v "$t" >/dev/null && continue
    pkg=${tb_pkg_of_program[$t]:-}
    if [ -n "$pkg" ]; then
      echo "$who: needs $t: install the Debian package $pkg ($(tb_pkg_setup_hint "$pkg"))" >&2
    else
      echo "$who: needs $t, which is not on PATH" >&2
    fi
    missing=1
  done
  [ "$missing" = 0 ] || exit 2
}
