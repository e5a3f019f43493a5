# SPDX-License-Identifier: MIT
# The memory experiments as an oracle for pmc's cache model (issue 33, item 4): pmc-mem-latency or pmc-memory run
# under `pmc emulate --cache GEOMETRY` must find one level per modelled data cache (D1, the L2 if any, the LL), each
# boundary within one sweep step of the configured size, and memory beyond; the output must say the levels are
# modelled and by which geometry. This script reads the sizes the program printed and checks them itself (it does
# not trust the program's own verdict). pmc-memory must also leave out bandwidth and page faults, saying why, and
# write a summary.md that says the levels are the model's. With the pinned geometry (GEOMETRY empty) the program
# must also refuse to run under pmc emulate without --cache, saying how to run it.
#   -DPMC=pmc  -DPROGRAM=pmc-mem-latency|pmc-memory  -DOUT=dir  -DGEOMETRY=--D1=...|--LL=...  -DEXPECT=32768;8388608
# The program runs with --quick: 4 points per octave, so one step is a factor of 1.25.
cmake_minimum_required(VERSION 3.16)
include(${CMAKE_CURRENT_LIST_DIR}/../support/emulator.cmake)
pmc_skip_without_emulator(${PMC})

get_filename_component(name ${PROGRAM} NAME)
string(REPLACE "|" ";" GEOMETRY "${GEOMETRY}")
file(REMOVE_RECURSE ${OUT})
execute_process(COMMAND ${PMC} emulate --cache ${GEOMETRY} -- ${PROGRAM} --quick --quiet --no-plot --out ${OUT}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
if(NOT status EQUAL 0)
  message(FATAL_ERROR "pmc emulate --cache ${GEOMETRY} -- ${name} exited with ${status}: ${err}")
endif()
if(NOT out MATCHES "Levels found from pmc's cache model \\(pmc emulate --cache: ([^)]*)\\)")
  message(FATAL_ERROR "the output does not say the levels come from pmc's cache model, and by which geometry")
endif()
set(geometry "${CMAKE_MATCH_1}")
foreach(configured ${EXPECT})
  if(NOT geometry MATCHES "(D1|L2|LL) ${configured},")
    message(FATAL_ERROR "the geometry stated (${geometry}) has no level of ${configured} bytes")
  endif()
endforeach()

string(REGEX MATCHALL "level (L[0-9]+|LL): boundary [0-9]+ bytes" found "${out}")
list(LENGTH found found_count)
list(LENGTH EXPECT expected_count)
if(NOT found_count EQUAL expected_count)
  message(FATAL_ERROR "${found_count} cache levels found, the model has ${expected_count} (${EXPECT})")
endif()
math(EXPR last "${expected_count} - 1")
foreach(i RANGE ${last})
  list(GET found ${i} line)
  list(GET EXPECT ${i} configured)
  string(REGEX REPLACE ".*boundary ([0-9]+) bytes" "\\1" size "${line}")
  # One step of the --quick grid: configured / 1.25 <= found <= configured * 1.25.
  math(EXPR high "4 * ${size} - 5 * ${configured}")
  math(EXPR low "5 * ${size} - 4 * ${configured}")
  if(high GREATER 0 OR low LESS 0)
    message(FATAL_ERROR "level ${i}: found ${size} bytes, the model's is ${configured}: more than one step (x1.25) off")
  endif()
  message("level ${i}: found ${size} bytes, configured ${configured}: within one step")
endforeach()
# The last cache level is Cachegrind's LL, with or without an L2 (it was called L2 without one).
list(GET found -1 last_found)
if(NOT last_found MATCHES "^level LL: ")
  message(FATAL_ERROR "the last cache level found is not named LL: '${last_found}'")
endif()
if(NOT out MATCHES "\nLL +[0-9.]+ [KMG]iB")
  message(FATAL_ERROR "the table does not name the last cache level LL")
endif()
if(NOT out MATCHES "\nmemory +\\(beyond the caches\\)")
  message(FATAL_ERROR "no memory level beyond the last cache")
endif()
if(NOT EXISTS ${OUT}/latency-modelled.csv)
  message(FATAL_ERROR "${OUT}/latency-modelled.csv was not written")
endif()

if(GEOMETRY STREQUAL "")
  # Under pmc emulate without --cache there is nothing to measure: status 1, and the fix.
  execute_process(COMMAND ${PMC} emulate -- ${PROGRAM} --quick --quiet --no-plot --out ${OUT}-no-model
                  RESULT_VARIABLE no_model_status OUTPUT_QUIET ERROR_VARIABLE no_model_err)
  if(NOT no_model_status EQUAL 1 OR NOT no_model_err MATCHES "under pmc emulate without --cache.*Fix: `pmc emulate --cache")
    message(FATAL_ERROR "${name} under pmc emulate without --cache: status ${no_model_status}, not 1 with the fix:\n"
                        "${no_model_err}")
  endif()
  if(name STREQUAL "pmc-mem-latency")
    # The timed sweep's options do not apply under the model: each is refused with why, not ignored.
    foreach(option "--chain;forward" "--runs;5" "--sweeps;2" "--hugepages" "--no-pin")
      execute_process(COMMAND ${PMC} emulate --cache -- ${PROGRAM} ${option} --quiet --no-plot --out ${OUT}-refused
                      RESULT_VARIABLE refused_status OUTPUT_QUIET ERROR_VARIABLE refused_err)
      list(GET option 0 option_name)
      if(NOT refused_status EQUAL 1 OR NOT refused_err MATCHES "${option_name}(:| does not apply) .*under pmc emulate --cache"
         OR NOT refused_err MATCHES "Run 'pmc-mem-latency --help' for usage")
        message(FATAL_ERROR "pmc-mem-latency ${option} under the model: status ${refused_status}, not 1 with the "
                            "reason:\n${refused_err}")
      endif()
    endforeach()
    # The oracle fails a script: a sweep that stops below the D1 finds no cache level, status 2, said.
    execute_process(COMMAND ${PMC} emulate --cache -- ${PROGRAM} --max 1K --quiet --no-plot --out ${OUT}-short
                    RESULT_VARIABLE short_status OUTPUT_VARIABLE short_out ERROR_VARIABLE short_err)
    if(NOT short_status EQUAL 2 OR NOT short_err MATCHES "exit status 2: 2 of the model's 2 cache levels not found")
      message(FATAL_ERROR "pmc-mem-latency --max 1K under the model: status ${short_status}, not 2 with the "
                          "levels missing:\n${short_err}")
    endif()
    # Its one level is the L1 the sweep never left: not "beyond the caches", and no "memory" in the model's column.
    if(NOT short_out MATCHES "\nL1 +\\(no boundary in the sweep\\) +[0-9.]+ +-\n" OR short_out MATCHES "beyond the caches")
      message(FATAL_ERROR "pmc-mem-latency --max 1K under the model: the L1 row is not labelled as a level with no "
                          "boundary in the sweep:\n${short_out}")
    endif()
  endif()
  # The oracle fails a script: an LL only twice the D1 (inclusive) merges with it into one level, status 2, said
  # (after the report is written), as for pmc-mem-latency.
  execute_process(COMMAND ${PMC} emulate --cache --D1=32768,8,64 --LL=65536,16,64 -- ${PROGRAM} --quick --quiet
                          --no-plot --out ${OUT}-merged
                  RESULT_VARIABLE merged_status OUTPUT_VARIABLE merged_out ERROR_VARIABLE merged_err)
  if(NOT merged_status EQUAL 2 OR NOT merged_err MATCHES "${name}: exit status 2: 1 of the model's 2 cache levels not found"
     OR NOT merged_out MATCHES "DISAGREES")
    message(FATAL_ERROR "${name} with a 64 KiB LL over a 32 KiB D1 under the model: status ${merged_status}, not 2 "
                        "with the level missing:\n${merged_out}\n${merged_err}")
  endif()
  # An LL smaller than the D1 (Cachegrind allows it): the sweep runs past the D1, the larger, which it finds (named LL,
  # the last level found); the LL inside it is missing, status 2. The sweep once ended at 4x the LL, 128 KiB, and
  # found neither.
  execute_process(COMMAND ${PMC} emulate --cache --D1=65536,4,256 --LL=32768,4,64 -- ${PROGRAM} --quick --quiet
                          --no-plot --out ${OUT}-ll-below-d1
                  RESULT_VARIABLE below_status OUTPUT_VARIABLE below_out ERROR_VARIABLE below_err)
  if(NOT below_status EQUAL 2 OR NOT below_err MATCHES "${name}: exit status 2: 1 of the model's 2 cache levels not found"
     OR NOT below_out MATCHES "level LL: boundary [0-9]+ bytes \\(between 65536 and 81920\\); the model's D1: 65536"
     OR NOT below_out MATCHES "level missing: the model's LL \\(32768 bytes\\)")
    message(FATAL_ERROR "${name} with a 32 KiB LL under a 64 KiB D1 under the model: status ${below_status}, not 2 "
                        "with the D1 found and the LL missing:\n${below_out}\n${below_err}")
  endif()
  if(name STREQUAL "pmc-memory")
    # Under the model only the latency experiment runs: leaving it out leaves nothing, a usage error.
    execute_process(COMMAND ${PMC} emulate --cache -- ${PROGRAM} --skip latency --quiet --out ${OUT}-skip
                    RESULT_VARIABLE skip_status OUTPUT_QUIET ERROR_VARIABLE skip_err)
    if(NOT skip_status EQUAL 1 OR NOT skip_err MATCHES "--skip latency: under pmc emulate --cache")
      message(FATAL_ERROR "pmc-memory --skip latency under the model: status ${skip_status}, not 1:\n${skip_err}")
    endif()
    # The timed run's pinning and the page-fault file's folder do not apply under the model: refused, not ignored.
    foreach(option "--cpu;0" "--no-pin" "--dir;${OUT}")
      execute_process(COMMAND ${PMC} emulate --cache -- ${PROGRAM} ${option} --quick --quiet --no-plot
                              --out ${OUT}-refused
                      RESULT_VARIABLE refused_status OUTPUT_QUIET ERROR_VARIABLE refused_err)
      list(GET option 0 option_name)
      if(NOT refused_status EQUAL 1 OR NOT refused_err MATCHES "${option_name} does not apply under pmc emulate --cache"
         OR NOT refused_err MATCHES "Run 'pmc-memory --help' for usage")
        message(FATAL_ERROR "pmc-memory ${option} under the model: status ${refused_status}, not 1 with the "
                            "reason:\n${refused_err}")
      endif()
    endforeach()
  endif()
endif()

if(name STREQUAL "pmc-memory")
  # Timings under QEMU are the emulator's: bandwidth and page faults are left out, and said to be.
  foreach(experiment "Bandwidth" "Page faults")
    if(NOT out MATCHES "${experiment}: not measured under pmc emulate --cache")
      message(FATAL_ERROR "the output does not say that ${experiment} was not measured under the emulator")
    endif()
  endforeach()
  foreach(file bandwidth.csv pagefault.csv latency.csv)
    if(EXISTS ${OUT}/${file})
      message(FATAL_ERROR "${OUT}/${file} was written: a timed experiment ran under the emulator")
    endif()
  endforeach()
  if(NOT EXISTS ${OUT}/summary.md)
    message(FATAL_ERROR "${OUT}/summary.md was not written")
  endif()
  file(READ ${OUT}/summary.md summary)
  string(FIND "${summary}" "${geometry}" at)
  if(at LESS 0 OR NOT summary MATCHES "under pmc's cache model" OR NOT summary MATCHES "within one step")
    message(FATAL_ERROR "summary.md does not state the model (${geometry}) and its levels:\n${summary}")
  endif()
endif()
