# SPDX-License-Identifier: MIT
# --help: exit status 0 and the usage on stdout (PASS_REGULAR_EXPRESSION alone would ignore the exit status).
#   cmake -DPROGRAM=path -DNAME=pmc-mem-latency -P help.cmake
execute_process(COMMAND "${PROGRAM}" --help RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} --help: exit status ${rc}, expected 0\n${out}${err}")
endif()
if(NOT out MATCHES "^usage: ${NAME} ")
  message(FATAL_ERROR "${PROGRAM} --help: stdout does not start with 'usage: ${NAME} ':\n${out}")
endif()
