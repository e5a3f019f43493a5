# A bad command line: exit status 2, and a message that names the problem and points to --help.
#   cmake -DPROGRAM=path "-DARGS=--min;banana" -DEXPECT=regex -P usage_error.cmake
execute_process(COMMAND "${PROGRAM}" ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "${PROGRAM} ${ARGS}: exit status ${rc}, expected 2\n${out}${err}")
endif()
if(NOT err MATCHES "${EXPECT}" OR NOT err MATCHES "--help")
  message(FATAL_ERROR "${PROGRAM} ${ARGS}: message does not match '${EXPECT}' and mention --help:\n${err}")
endif()
message(STATUS "${err}")
