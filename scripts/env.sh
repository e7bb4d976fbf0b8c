# Source me from bash:  source scripts/env.sh   (any working directory)
#
# Activates .venv (and, without a sourced ROS 2, the ROS 2 wheels in it) and the colcon
# overlay in install/, so that `python -c "import rclpy, state_observer.msg"` and
# `state-observer --help` work. It does not build: run `bash scripts/bootstrap.sh` (or any
# make target) first, and again after changing the sources.

_so_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ ! -x $_so_repo/.venv/bin/python || ! -f $_so_repo/install/setup.sh ]]; then
  echo "scripts/env.sh: not built yet; run: bash $_so_repo/scripts/bootstrap.sh" >&2
  unset _so_repo
  return 1
fi

source "$_so_repo/.venv/bin/activate"
if [[ -z ${ROS_DISTRO:-} ]]; then
  # ROS 2 from the wheels: their ament index (rmw implementations, message packages)
  # is under the venv prefix. rclpy finds the wheels' libraries by itself.
  case ":${AMENT_PREFIX_PATH:-}:" in
    *":$VIRTUAL_ENV:"*) ;;
    *) export AMENT_PREFIX_PATH=$VIRTUAL_ENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH} ;;
  esac
fi
# colcon's POSIX setup script: PYTHONPATH, PATH, LD_LIBRARY_PATH and AMENT_PREFIX_PATH
# for install/state_observer.
source "$_so_repo/install/setup.sh"
# It leaves a trailing ':' (= the working directory) when LD_LIBRARY_PATH was empty.
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH%:}
unset _so_repo
