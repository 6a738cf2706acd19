#!/usr/bin/env bash
# Gives the environment one good CPU OpenCL driver, and says which one and why.
#
# Usage: tools/setup-cpu-driver.sh VENV_BIN   (after the core is installed into the venv)
#
# 1. The system's PoCL (Debian/Ubuntu's pocl-opencl-icd) knows current CPUs; PyPI's
#    (pocl-binary-distribution 3.0, LLVM 14, 2022) does not: on some CPUs it builds slow
#    generic code, on Zen 4 its compiler aborts the process. As root with apt-get, the
#    system's PoCL is installed (tools/install-system-pocl.sh) and PyPI's is kept out of
#    the environment (removed if an earlier set-up put it there).
# 2. Otherwise (no root, no apt-get, or apt-get failed) PyPI's PoCL is installed.
# 3. Every device is then tested in a child process (`wticonv devices`; a driver that
#    aborts, hangs or computes wrongly is set aside, never fatal). If the system's PoCL
#    is set aside and no other CPU device works, PyPI's PoCL is installed as a fallback.
# Never fails the set-up: a machine without a working CPU driver may still have a GPU.
set -u
BIN=${1:?usage: tools/setup-cpu-driver.sh VENV_BIN}
here=$(dirname "$0")
"$here/install-system-pocl.sh"

system_pocl=no
if command -v dpkg-query >/dev/null 2>&1 \
   && [ "$(dpkg-query -W -f='${Status}' pocl-opencl-icd 2>/dev/null)" = "install ok installed" ]; then
  system_pocl=yes
elif [ -e /etc/OpenCL/vendors/pocl.icd ]; then
  system_pocl=yes
fi

pypi_pocl() { "$BIN/python" -m pip install -q "pocl-binary-distribution>=3.0"; }

if [ "$system_pocl" = yes ]; then
  if "$BIN/python" -m pip show -q pocl-binary-distribution >/dev/null 2>&1; then
    "$BIN/python" -m pip uninstall -q -y pocl-binary-distribution
    echo "setup: removed PyPI's PoCL from $BIN/.. (the system's PoCL serves the CPU)"
  fi
  echo "setup: CPU OpenCL driver: the system's PoCL (pocl-opencl-icd), which knows current"
  echo "       CPUs; PyPI's PoCL is not installed beside it"
else
  echo "setup: CPU OpenCL driver: PyPI's PoCL (pocl-binary-distribution): the system's PoCL"
  echo "       is not installed (needs root and apt-get: sudo apt-get install pocl-opencl-icd)"
  pypi_pocl
fi

usable_cpu() {
  "$BIN/wticonv" devices --json 2>/dev/null | "$BIN/python" "$here/usable_cpu.py"
}

echo "setup: testing the OpenCL devices (each in a child process; cached)..."
if usable_cpu; then
  exit 0
fi
if [ "$system_pocl" = yes ]; then
  echo "setup: no CPU device works with the system's PoCL: installing PyPI's PoCL as well"
  pypi_pocl && usable_cpu && exit 0
fi
echo "setup: WARNING: no OpenCL CPU device works here (see the reasons above); wticonv needs"
echo "       a working OpenCL device: install your distribution's PoCL or a GPU driver"
exit 0
