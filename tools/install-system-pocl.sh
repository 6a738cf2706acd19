#!/usr/bin/env bash
# Installs the distribution's PoCL (the CPU OpenCL driver) when it can, and says what it did.
#
# Why: PyPI's PoCL (pocl-binary-distribution 3.0, LLVM 14, from 2022, installed through the
# core's `pocl` extra) does not know recent CPUs: on this project's machines it either
# generates slow generic code or fails to build kernels ("unknown target CPU 'generic'").
# Debian's pocl-opencl-icd (PoCL 3.1, LLVM 15) knows them. wticonv then picks the CPU device
# with the higher measured peak. Never fails the set-up: without root or apt-get it carries
# on with PyPI's PoCL.
set -u
if command -v dpkg-query >/dev/null 2>&1; then
  if [ "$(dpkg-query -W -f='${Status}' pocl-opencl-icd 2>/dev/null)" = "install ok installed" ]; then
    echo "setup: system PoCL already installed (pocl-opencl-icd)"
    exit 0
  fi
elif [ -e /etc/OpenCL/vendors/pocl.icd ]; then
  echo "setup: system PoCL already installed (/etc/OpenCL/vendors/pocl.icd)"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: no apt-get here; using PyPI's PoCL only (install your distribution's PoCL for faster CPU kernels)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "setup: not root, so the system PoCL is not installed; using PyPI's PoCL."
  echo "       For faster CPU kernels run: sudo apt-get install -y pocl-opencl-icd"
  exit 0
fi
echo "setup: installing the system PoCL (apt-get install pocl-opencl-icd)..."
export DEBIAN_FRONTEND=noninteractive
if apt-get install -y -q pocl-opencl-icd >/tmp/wticonv-apt.log 2>&1 \
   || { apt-get update -q >>/tmp/wticonv-apt.log 2>&1 && apt-get install -y -q pocl-opencl-icd >>/tmp/wticonv-apt.log 2>&1; }; then
  echo "setup: system PoCL installed"
else
  echo "setup: apt-get could not install pocl-opencl-icd (log: /tmp/wticonv-apt.log); using PyPI's PoCL"
fi
exit 0
