# SPDX-License-Identifier: MIT
# Runs a command as a job-control shell runs a foreground job on a real pseudo-terminal, and types at it:
#   at_terminal.py READY -- COMMAND [ARGS]
# types "hello" and Enter (the command reads it), waits for READY, types Ctrl-Z (the job must stop: the shell says
# "job stopped by N"), continues it in the foreground as `fg` does, then types Ctrl-C. Prints the terminal's output
# and "job status signal N" or "job status exit N"; "TIMEOUT" if a step took over 30 s (then it kills the job).
import os
import pty
import select
import signal
import sys
import time


def shell(command):
    """The session leader on the terminal: starts COMMAND as a foreground job in a process group of its own."""
    job = os.fork()
    if job == 0:
        os.setpgid(0, 0)
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        os.tcsetpgrp(0, os.getpid())
        for sig in (signal.SIGTTOU, signal.SIGPIPE, signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP):
            signal.signal(sig, signal.SIG_DFL)
        os.execv(command[0], command)
    try:
        os.setpgid(job, job)
    except OSError:
        pass  # (the job did it and executed already)
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    os.tcsetpgrp(0, job)
    while True:
        _, status = os.waitpid(job, os.WUNTRACED)
        if os.WIFSTOPPED(status):
            os.tcsetpgrp(0, os.getpgrp())
            print("job stopped by %d" % os.WSTOPSIG(status), flush=True)
            sys.stdin.readline()  # "fg"
            os.tcsetpgrp(0, job)
            os.killpg(job, signal.SIGCONT)
            print("job continued", flush=True)
            continue
        os.tcsetpgrp(0, os.getpgrp())
        if os.WIFSIGNALED(status):
            print("job status signal %d" % os.WTERMSIG(status), flush=True)
        else:
            print("job status exit %d" % os.WEXITSTATUS(status), flush=True)
        os._exit(0)


def main():
    ready = sys.argv[1]
    command = sys.argv[3:]
    pid, fd = pty.fork()
    if pid == 0:
        shell(command)
    output = b""

    def expect(text, also=lambda: True):
        nonlocal output
        deadline = time.time() + 30
        while text.encode() not in output or not also():
            if time.time() > deadline:
                return False
            readable, _, _ = select.select([fd], [], [], 0.05)
            if readable:
                try:
                    output += os.read(fd, 4096)
                except OSError:
                    return text.encode() in output and also()
        return True

    ok = (os.write(fd, b"hello\n") > 0 and expect("read: hello")
          and expect("", lambda: os.path.exists(ready)) and os.write(fd, b"\x1a") and expect("job stopped by")
          and os.write(fd, b"fg\n") and expect("job continued"))
    if ok:
        time.sleep(0.2)
        os.write(fd, b"\x03")
        ok = expect("job status")
    sys.stdout.write(output.decode(errors="replace").replace("\r", ""))
    if not ok:
        print("\nTIMEOUT")
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


main()
