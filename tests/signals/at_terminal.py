# SPDX-License-Identifier: MIT
# Runs a command as a job-control shell runs a foreground job on a real pseudo-terminal, and types at it:
#   at_terminal.py READY [--stop-early] -- COMMAND [ARGS]
# types "hello" and Enter (the command reads it), waits for READY, types Ctrl-Z (the job must stop: the shell says
# "job stopped by N"), continues it in the foreground as `fg` does, then types Ctrl-C. Prints the terminal's output
# and "job status signal N" or "job status exit N"; "TIMEOUT" if a step took over 30 s (then it kills the job).
# --stop-early: first a Ctrl-Z and fg as soon as the job hands the terminal to a process group of its own (as pmc
# does to the command's, before the command's exec), then the steps above.
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
    stop_early = sys.argv[2] == "--stop-early"
    command = sys.argv[3 + stop_early:]
    pid, fd = pty.fork()
    if pid == 0:
        shell(command)
    output = b""

    def expect(text, also=lambda: True, poll=0.05):
        nonlocal output
        deadline = time.time() + 30
        while text.encode() not in output or not also():
            if time.time() > deadline:
                return False
            readable, _, _ = select.select([fd], [], [], poll)
            if readable:
                try:
                    output += os.read(fd, 4096)
                except OSError:
                    return text.encode() in output and also()
        return True

    def handed_on():
        """The terminal's foreground group is neither the shell's nor its job's (whose parent is the shell)."""
        try:
            group = os.tcgetpgrp(fd)
            with open("/proc/%d/stat" % group) as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        return group != pid and parent != pid

    # (the early stop's words are in the output already: the later ones are counted past them)
    def said(text, times):
        return lambda: output.count(text.encode()) >= times

    ok = not stop_early or (expect("", handed_on, poll=0.001) and os.write(fd, b"\x1a") and expect("job stopped by")
                            and os.write(fd, b"fg\n") and expect("job continued"))
    ok = ok and (os.write(fd, b"hello\n") > 0 and expect("read: hello")
                 and expect("", lambda: os.path.exists(ready)) and os.write(fd, b"\x1a")
                 and expect("job stopped by", said("job stopped by", 1 + stop_early))
                 and os.write(fd, b"fg\n") and expect("job continued", said("job continued", 1 + stop_early)))
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
