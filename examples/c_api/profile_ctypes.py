# SPDX-License-Identifier: MIT
# pmc's C API from Python through ctypes: a counter, and a nested profile that `pmc summarize` reads.
#     python3 profile_ctypes.py /path/to/libpmc_c.so out.pmcprof
import ctypes, sys

pmc = ctypes.CDLL(sys.argv[1])
pmc.pmc_last_error.restype = ctypes.c_char_p
pmc.pmc_counter_open.restype = ctypes.c_void_p
pmc.pmc_counter_open.argtypes = [ctypes.c_char_p]
pmc.pmc_counter_read.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)]
pmc.pmc_counter_close.argtypes = [ctypes.c_void_p]
pmc.pmc_profiler_options_init.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
pmc.pmc_profiler_open.restype = ctypes.c_void_p
pmc.pmc_profiler_open.argtypes = [ctypes.c_void_p]
pmc.pmc_profiler_close.argtypes = [ctypes.c_void_p]
pmc.pmc_profiler_label.restype = ctypes.c_uint32
pmc.pmc_profiler_label.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
pmc.pmc_profiler_begin.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32]
pmc.pmc_profiler_end.argtypes = [ctypes.c_void_p, ctypes.c_uint32]


class Options(ctypes.Structure):  # pmc_profiler_options: the fields used here (size says how many)
    _fields_ = [("size", ctypes.c_size_t), ("path", ctypes.c_char_p), ("counters", ctypes.c_char_p)]


# Errors come back as text: what failed, why, and the fix.
if not pmc.pmc_counter_open(b"instrutions"):
    print("error:", pmc.pmc_last_error().decode().splitlines()[0])

faults = pmc.pmc_counter_open(b"page-faults")
if faults:
    before, after = ctypes.c_uint64(), ctypes.c_uint64()
    pmc.pmc_counter_read(faults, ctypes.byref(before))
    data = bytearray(64 * 4096)  # fresh memory: the first write to each page faults
    for i in range(0, len(data), 4096):
        data[i] = 1
    pmc.pmc_counter_read(faults, ctypes.byref(after))
    pmc.pmc_counter_close(faults)
    print("page faults for 64 fresh pages:", after.value - before.value)
else:
    print("page-faults cannot be counted here:", pmc.pmc_last_error().decode())

options = Options()
pmc.pmc_profiler_options_init(ctypes.byref(options), ctypes.sizeof(options))
options.path = sys.argv[2].encode()
prof = pmc.pmc_profiler_open(ctypes.byref(options))
if not prof:
    sys.exit("pmc: " + pmc.pmc_last_error().decode())
request, query = pmc.pmc_profiler_label(prof, b"request"), pmc.pmc_profiler_label(prof, b"query")
for _ in range(100):
    pmc.pmc_profiler_begin(prof, request, 0)
    for _ in range(3):
        pmc.pmc_profiler_begin(prof, query, 0)
        sum(range(1000))
        pmc.pmc_profiler_end(prof, query)
    pmc.pmc_profiler_end(prof, request)
pmc.pmc_profiler_close(prof)
