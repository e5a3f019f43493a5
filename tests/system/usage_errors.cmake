# SPDX-License-Identifier: MIT
# Every program fails alike on a usage error (tools/command_line.hpp): for each line of the table
#     PROGRAM|EXECUTABLE[|ARGUMENT]        e.g. "pmc count|/build/tools/pmc|count"
# (ARGUMENT: the word that names a pmc command), an unknown option prints exactly these two lines on stderr,
# nothing on stdout, and exits 1:
#     PROGRAM: unknown option '--no-such-option'
#     Run 'PROGRAM --help' for usage.
# and -h and --help each print the program's help ("usage: ...") on stdout, nothing on stderr, and exit 0.
# A line "help-only:PROGRAM|EXECUTABLE" is a program with its own command line (the README's quickstart, a
# PMC_BENCHMARK_MAIN harness): only -h and --help are checked, and that they print help instead of running.
#   cmake -DTABLE=file -P usage_errors.cmake
if(NOT EXISTS "${TABLE}")
  message(FATAL_ERROR "usage_errors.cmake: no table '${TABLE}' (cmake -DTABLE=file -P usage_errors.cmake)")
endif()
file(STRINGS "${TABLE}" lines)
set(failures "")
set(checked 0)
foreach(line IN LISTS lines)
  if(line STREQUAL "" OR line MATCHES "^#")
    continue()
  endif()
  set(help_only FALSE)
  if(line MATCHES "^help-only:")
    set(help_only TRUE)
    string(REGEX REPLACE "^help-only:" "" line "${line}")
  endif()
  string(REPLACE "|" ";" fields "${line}")
  list(GET fields 0 program)
  list(GET fields 1 executable)
  set(words "")
  list(LENGTH fields n)
  if(n GREATER 2)
    list(SUBLIST fields 2 -1 words)
  endif()

  if(NOT help_only)
    execute_process(COMMAND "${executable}" ${words} --no-such-option RESULT_VARIABLE rc OUTPUT_VARIABLE out
                    ERROR_VARIABLE err)
    set(expected "${program}: unknown option '--no-such-option'\nRun '${program} --help' for usage.\n")
    if(NOT rc STREQUAL "1" OR NOT err STREQUAL expected OR NOT out STREQUAL "")
      string(APPEND failures "\n${program} --no-such-option: exit status ${rc} (expected 1), stderr:\n${err}"
                             "expected on stderr:\n${expected}stdout (expected empty):\n${out}")
    endif()
  endif()

  foreach(help -h --help)
    execute_process(COMMAND "${executable}" ${words} ${help} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                    ERROR_VARIABLE err)
    if(NOT rc STREQUAL "0" OR NOT out MATCHES "^usage: " OR NOT err STREQUAL "")
      string(APPEND failures "\n${program} ${help}: exit status ${rc} (expected 0), stdout (expected to start with "
                             "'usage: '):\n${out}stderr (expected empty):\n${err}")
    endif()
  endforeach()
  math(EXPR checked "${checked} + 1")
endforeach()

if(checked EQUAL 0)
  message(FATAL_ERROR "usage_errors.cmake: '${TABLE}' lists no program")
endif()
if(NOT failures STREQUAL "")
  message(FATAL_ERROR "a program does not fail as tools/command_line.hpp says:${failures}")
endif()
message(STATUS "${checked} programs: an unknown option gives the two lines and status 1; -h and --help exit 0")
