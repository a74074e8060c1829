#!/usr/bin/env bash
# Runs the README's set-up commands verbatim, as a newcomer would, in a clean Debian 12 root made
# with debootstrap: no CUDA toolkit, no packages beyond Debian's minimal base, a fresh clone of the
# committed HEAD (uncommitted changes are not seen). Each command's exit status and time is
# printed; the script fails on the first command that fails. Run it before a release; CI runs it
# for command 2 (the tests) on every submission.
#
# usage: sudo bash scripts/clean-root-check.sh [--commands 1,2] [--root DIR] [--keep]
#   --commands  which README commands to run, in order (default: 1,2)
#   --root      where to build the root (default: a new directory under ${TMPDIR:-/var/tmp});
#               an existing root made by an earlier --keep run is reused as it is
#   --keep      leave the root in place afterwards (to look around: chroot DIR bash)
# Needs root (debootstrap, chroot, mount) and Debian's package registry; installs debootstrap on
# the host with apt when it is missing. Exit status: that of the first failing command, 2 for bad
# arguments or no root, 3 when the root could not be made (debootstrap failed). JOBS and NEMOTRON_FUZZ_SECONDS pass through to the commands.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$(pwd)

commands="1,2"
root=""
keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --commands) commands="$2"; shift 2 ;;
    --root) root="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "clean-root: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ ! "$commands" =~ ^[12](,[12])*$ ]]; then
  echo "clean-root: --commands: expected a list of 1 and 2 such as 1,2; got '$commands'" >&2
  exit 2
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "clean-root: needs root (debootstrap, chroot and mount); run it with sudo" >&2
  exit 2
fi

# The README's commands: the line after "# 1. ..." and after "# 2. ..." in its first sh block.
readme_command() {
  awk -v n="$1" '
    /^```sh/ { inblock = 1; next }
    /^```/ && inblock { exit }
    inblock && want && $0 !~ /^#/ && NF { print; exit }
    inblock && $0 ~ "^# " n "\\." { want = 1 }
  ' README.md
}
for n in ${commands//,/ }; do
  if [[ -z "$(readme_command "$n")" ]]; then
    echo "clean-root: README.md: no command $n in the Quick start block (a '# $n.' line followed by the command)" >&2
    exit 2
  fi
done

head_commit=$(git rev-parse HEAD)
if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
  echo "clean-root: note: uncommitted changes are not tested; the root gets a clone of ${head_commit:0:7}"
fi

if ! command -v debootstrap >/dev/null 2>&1; then
  echo "clean-root: installing debootstrap on the host"
  if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
         DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }; then
    echo "clean-root: could not install debootstrap" >&2
    exit 3
  fi
fi

made_root=0
if [[ -z "$root" ]]; then
  root=$(mktemp -d "${TMPDIR:-/var/tmp}/nemotron-clean-root.XXXXXX")
  # mktemp makes it 0700: the root's / must be 0755 as on a real system, or system users (munge's
  # post-install `su munge -s /bin/sh`, the test-only Slurm packages) cannot reach /bin/sh.
  chmod 755 "$root"
fi
mounts=()
cleanup() {
  local status=$?
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" 2>/dev/null || true
  done
  if [[ $keep -eq 0 && $made_root -eq 1 ]]; then
    rm -rf --one-file-system "$root"
  elif [[ $keep -eq 1 ]]; then
    echo "clean-root: root kept at $root"
  fi
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ ! -x "$root/usr/bin/apt-get" ]]; then
  made_root=1
  echo "clean-root: debootstrap --variant=minbase bookworm -> $root"
  t0=$SECONDS
  if ! debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$root.debootstrap.log" 2>&1; then
    tail -20 "$root.debootstrap.log" >&2
    echo "clean-root: debootstrap failed (log: $root.debootstrap.log)" >&2
    exit 3
  fi
  rm -f "$root.debootstrap.log"
  echo "clean-root: root made in $((SECONDS - t0)) s ($(cat "$root/etc/debian_version"))"
fi

mount_into() {  # mount_into TARGET mount-args...
  mkdir -p "$root/$1"
  mount "${@:2}" "$root/$1"
  mounts+=("$root/$1")
}
mount_into proc -t proc proc
mount_into sys -t sysfs sysfs
mount_into dev --bind /dev
mount_into dev/pts --bind /dev/pts
mount_into dev/shm -t tmpfs tmpfs
cp -L /etc/resolv.conf "$root/etc/resolv.conf"

if chroot "$root" sh -c 'command -v nvcc || test -d /usr/local/cuda' >/dev/null 2>&1; then
  echo "clean-root: $root holds a CUDA toolkit: not a newcomer's machine" >&2
  exit 1
fi

# A fresh clone of HEAD, made from the host's repository (the root has no git until command 1 or
# 2 installs it; a newcomer arrives with their clone).
work=/home/newcomer/nemotron-cpp
if [[ ! -d "$root$work/.git" ]]; then
  mkdir -p "$root/home/newcomer"
  git clone -q --no-hardlinks "$repo" "$root$work"
  git -C "$root$work" checkout -q "$head_commit"
fi
echo "clean-root: fresh clone of ${head_commit:0:7} at $work inside the root"

in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    ${JOBS:+JOBS=$JOBS} ${NEMOTRON_FUZZ_SECONDS:+NEMOTRON_FUZZ_SECONDS=$NEMOTRON_FUZZ_SECONDS} \
    bash -c "cd $work && $1"
}

summary=()
for n in ${commands//,/ }; do
  cmd=$(readme_command "$n")
  echo "clean-root: command $n: $cmd"
  t0=$SECONDS
  set +e
  in_root "$cmd"
  status=$?
  set -e
  line="command $n: exit $status in $((SECONDS - t0)) s"
  summary+=("$line")
  echo "clean-root: $line"
  if [[ $status -ne 0 ]]; then
    echo "clean-root: FAILED: README command $n in a clean Debian 12 root" >&2
    exit "$status"
  fi
done
echo "clean-root: all passed (${head_commit:0:7}, Debian $(cat "$root/etc/debian_version"), no CUDA):"
printf 'clean-root:   %s\n' "${summary[@]}"
