# SPDX-License-Identifier: MIT
# For cmake -P test scripts that run programs under pmc emulate: include() it, then call
# pmc_skip_without_emulator(${PMC}) first. Where pmc emulate cannot run (no QEMU that loads plugins, no plugin), the
# test prints "SKIPPED: " with pmc's reason (the test's SKIP_REGULAR_EXPRESSION) and the script ends there.
macro(pmc_skip_without_emulator pmc)
  execute_process(COMMAND ${pmc} emulate -- /bin/true RESULT_VARIABLE _pmc_emulate_status
                  ERROR_VARIABLE _pmc_emulate_err OUTPUT_QUIET)
  if(NOT _pmc_emulate_status EQUAL 0)
    message("SKIPPED: pmc emulate cannot run here: ${_pmc_emulate_err}")
    return() # a macro's return() ends the script that called it
  endif()
endmacro()
