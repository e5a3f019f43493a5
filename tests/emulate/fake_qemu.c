// SPDX-License-Identifier: MIT
// pmc-fake-qemu: a stand-in for QEMU user mode whose words a test scripts. pmc takes it for a QEMU that loads
// plugins (it exports the plugin API's first symbol and holds QEMU's version text); it runs the shell script
// $PMC_FAKE_QEMU_SCRIPT with its own arguments, so the script answers pmc's `-cpu MODEL /dev/null` check as it likes.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

// What pmc reads in the binary: the version literal (as QEMU's --version prints it) and the exported symbol.
const char pmc_fake_qemu_version[] = "qemu-x86_64 version 7.2.0";
__attribute__((visibility("default"))) void qemu_plugin_register_vcpu_tb_trans_cb(void) {}

int main(int argc, char** argv) {
    const char* script = getenv("PMC_FAKE_QEMU_SCRIPT");
    if (!script) {
        fprintf(stderr, "%s (pmc-fake-qemu): PMC_FAKE_QEMU_SCRIPT is not set\n", pmc_fake_qemu_version);
        return 1;
    }
    char** args = calloc((size_t)argc + 2, sizeof *args);
    if (!args) return 1;
    args[0] = "/bin/sh";
    args[1] = (char*)script;
    for (int i = 1; i < argc; ++i) args[i + 1] = argv[i];
    execv("/bin/sh", args);
    perror("pmc-fake-qemu: /bin/sh");
    return 127;
}
