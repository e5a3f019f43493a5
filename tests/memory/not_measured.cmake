# SPDX-License-Identifier: MIT
# pmc-mem-bandwidth and pmc-mem-pagefault run alone under pmc emulate (with --cache or not) measure nothing: under
# QEMU their bytes per second and nanoseconds per fault are the emulator's, and fault counts need perf_event_open.
# Each must say it did not measure, why, and the fix, exit 1, and write no report (pmc-memory leaves both out the
# same way: model_oracle.cmake).
#   -DPMC=pmc  -DPROGRAM=pmc-mem-bandwidth|pmc-mem-pagefault  -DOUT=dir
cmake_minimum_required(VERSION 3.16)
include(${CMAKE_CURRENT_LIST_DIR}/../support/emulator.cmake)
pmc_skip_without_emulator(${PMC})

get_filename_component(name ${PROGRAM} NAME)
foreach(model "" "--cache")
  file(REMOVE_RECURSE ${OUT})
  execute_process(COMMAND ${PMC} emulate ${model} -- ${PROGRAM} --quick --out ${OUT}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 1)
    message(FATAL_ERROR "pmc emulate ${model} -- ${name}: exit status ${status}, expected 1 (nothing measured):\n"
                        "${out}${err}")
  endif()
  if(NOT err MATCHES "${name}: not measured under pmc emulate: .*Run ${name} without the emulator")
    message(FATAL_ERROR "pmc emulate ${model} -- ${name} does not say it measured nothing, and the fix:\n${err}")
  endif()
  if(EXISTS ${OUT})
    message(FATAL_ERROR "pmc emulate ${model} -- ${name} wrote ${OUT}: figures of the emulator, not memory")
  endif()
endforeach()
message(STATUS "${name} under pmc emulate (and --cache): not measured, said so, status 1, nothing written")
