# SPDX-License-Identifier: MIT
# scripts/layout-sensitivity in small (docs/emulated-pmu.md): two identical runs of the pointer chase give a spread
# of 0 % in every event, and the heap factor gives a row; --help exits 0. -DSCRIPT=... -DPMC=...
cmake_minimum_required(VERSION 3.16)
include(${CMAKE_CURRENT_LIST_DIR}/../support/emulator.cmake)
pmc_skip_without_emulator(${PMC})
execute_process(COMMAND ${SCRIPT} --help RESULT_VARIABLE status OUTPUT_VARIABLE out)
if(NOT status EQUAL 0 OR NOT out MATCHES "usage: scripts/layout-sensitivity")
  message(FATAL_ERROR "--help: status ${status}: ${out}")
endif()
execute_process(COMMAND ${SCRIPT} --pmc ${PMC} --layouts 2 --workloads chase --factors none,heap
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT status EQUAL 0)
  message(FATAL_ERROR "scripts/layout-sensitivity exited with ${status}")
endif()
# Identical runs: 0 %, or what a whole program's start-up moves in about 1 run in 30 on a loaded machine (a few
# dozen instructions, a few loads: docs/emulated-pmu.md "Limits"), under 0.1 % of the chase's counts.
set(same " 0(\\.0[0-9]*)? % \\([1-9][0-9]*\\) \\|")
if(NOT out MATCHES "\\| chase \\| none \\|${same}${same}${same}${same}${same}")
  message(FATAL_ERROR "identical runs of the chase should spread by 0 % (under 0.1 %) in all five events")
endif()
if(NOT out MATCHES "\\| chase \\| heap \\|( [0-9.e+-]+ % \\([1-9][0-9]*\\) \\|)+")
  message(FATAL_ERROR "no row for the heap factor")
endif()
