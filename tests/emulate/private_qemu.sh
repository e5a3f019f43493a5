#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-unprivileged with a PMC_QEMU that uid 65534 cannot run (in a directory closed to others, as scripts/build-qemu's
# under root's home): the rerun must get a QEMU it can run, not skip every emulated case and pass.
#
#   private_qemu.sh RUN_UNPRIVILEGED
set -u
run_unprivileged=$1
qemu=$(command -v qemu-x86_64 || command -v qemu-aarch64) || { echo "SKIPPED: no qemu-user (qemu-x86_64)"; exit 77; }
closed=$(mktemp -d /tmp/pmc-private-qemu-XXXXXX) || exit 1
trap 'rm -rf "$closed"' EXIT
chmod 700 "$closed" && cp "$qemu" "$closed/" || exit 1
PMC_QEMU=$closed/$(basename "$qemu") "$run_unprivileged" /bin/sh -c \
    'case $PMC_QEMU in /tmp/pmc-private-qemu-*) echo "still the closed copy: $PMC_QEMU"; exit 1;; esac
     "$PMC_QEMU" --version | head -n 1'
