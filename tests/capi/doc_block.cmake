# SPDX-License-Identifier: MIT
# Fails unless DOC contains FILE's text verbatim as a fenced code block (```LANG ... ```): the docs show what the
# tests run.   cmake -DDOC=docs/x.md -DFILE=examples/y.py -DLANG=python -P doc_block.cmake
file(READ ${DOC} doc)
file(READ ${FILE} text)
# (the file's SPDX license line, first or after a #! line, is not shown)
string(REGEX REPLACE "(^|\n)[^\n]*SPDX-License-Identifier[^\n]*\n" "\\1" text "${text}")
string(FIND "${doc}" "```${LANG}\n${text}```\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${DOC} has no ```${LANG} block that is exactly ${FILE}: copy the file into it")
endif()
message(STATUS "${DOC} shows ${FILE} as it is")
