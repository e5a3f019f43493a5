# SPDX-License-Identifier: MIT
# A bad command line: exit status 1 and, on stderr, exactly what every pmc program says (tools/command_line.hpp):
#   PROGRAM: WHAT IS WRONG
#   Run 'PROGRAM --help' for usage.
#   cmake -DPROGRAM=path "-DARGS=--min;banana" -DEXPECT=regex -P usage_error.cmake
# With -DUSAGE=OFF (an error found before measuring, not a usage error: a folder that cannot be written): status 1
# and a message that matches EXPECT, without the line about --help.
if(NOT DEFINED USAGE)
  set(USAGE ON)
endif()
get_filename_component(name "${PROGRAM}" NAME)
execute_process(COMMAND "${PROGRAM}" ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "${PROGRAM} ${ARGS}: exit status ${rc}, expected 1\n${out}${err}")
endif()
if(NOT err MATCHES "${EXPECT}")
  message(FATAL_ERROR "${PROGRAM} ${ARGS}: message does not match '${EXPECT}':\n${err}")
endif()
if(USAGE)
  if(NOT err MATCHES "^${name}: [^\n]+\nRun '${name} --help' for usage\\.\n$")
    message(FATAL_ERROR "${PROGRAM} ${ARGS}: a usage error is two lines, '${name}: WHAT IS WRONG' and "
                        "\"Run '${name} --help' for usage.\", not:\n${err}")
  endif()
elseif(err MATCHES "--help' for usage")
  message(FATAL_ERROR "${PROGRAM} ${ARGS}: not a usage error, but the message points to --help:\n${err}")
endif()
message(STATUS "${err}")
