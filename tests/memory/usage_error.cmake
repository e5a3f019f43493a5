# SPDX-License-Identifier: MIT
# A bad command line: exit status 2, and a message that names the problem and points to --help.
#   cmake -DPROGRAM=path "-DARGS=--min;banana" -DEXPECT=regex -P usage_error.cmake
# With -DSTATUS=1 (an error found before measuring, not a usage error): exit status 1 and the message only.
if(NOT DEFINED STATUS)
  set(STATUS 2)
endif()
execute_process(COMMAND "${PROGRAM}" ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL STATUS)
  message(FATAL_ERROR "${PROGRAM} ${ARGS}: exit status ${rc}, expected ${STATUS}\n${out}${err}")
endif()
if(NOT err MATCHES "${EXPECT}" OR (STATUS EQUAL 2 AND NOT err MATCHES "--help"))
  message(FATAL_ERROR "${PROGRAM} ${ARGS}: message does not match '${EXPECT}' (and mention --help for status 2):\n${err}")
endif()
message(STATUS "${err}")
