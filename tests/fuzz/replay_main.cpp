// SPDX-License-Identifier: MIT
// Runs a libFuzzer target without libFuzzer: feeds every regular file of the given directories (or the given
// files) to LLVMFuzzerTestOneInput, after LLVMFuzzerInitialize if the target defines one. This is how the fuzz
// target and its seed corpus run in every build, under any compiler (ctest -R fuzz-corpus-replay).
//
// Seed names may state the expected outcome, checked when the target exports pmc_fuzz_last_input_parsed():
// a file named ok-* must parse, one named bad-* must be rejected (against the target's fake sysfs tree). That keeps
// the seeds honest: a typo in a seed that was meant to cover some syntax fails the replay instead of silently
// covering only the error path.
//
// Usage: pmc-fuzz-replay DIR_OR_FILE...   (exit 0: all inputs ran and met their expectation)
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);
extern "C" __attribute__((weak)) int pmc_fuzz_last_input_parsed();

namespace {

bool is_directory(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_regular(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> files_in(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (const dirent* e = ::readdir(d)) {
            std::string path = dir + "/" + e->d_name;
            if (e->d_name[0] != '.' && is_regular(path)) out.push_back(path);
        }
        ::closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::string base_name(const std::string& path) {
    auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    std::vector<std::string> inputs;
    for (int i = 1; i < argc; ++i) {
        if (is_directory(argv[i])) {
            auto more = files_in(argv[i]);
            if (more.empty()) {
                std::fprintf(stderr, "replay: %s has no input files\n", argv[i]);
                return 1;
            }
            inputs.insert(inputs.end(), more.begin(), more.end());
        } else if (is_regular(argv[i])) {
            inputs.emplace_back(argv[i]);
        } else {
            std::fprintf(stderr, "replay: %s is neither a directory nor a file\n", argv[i]);
            return 1;
        }
    }

    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);

    int wrong = 0, parsed = 0, rejected = 0;
    for (const auto& path : inputs) {
        std::ifstream in(path, std::ios::binary);
        if (!in) {
            std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
            return 1;
        }
        std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        // A fresh heap copy of exactly the input's size, as libFuzzer passes it (ASan sees reads past the end).
        std::vector<std::uint8_t> data(bytes.begin(), bytes.end());
        static const std::uint8_t empty = 0; // libFuzzer never passes a null pointer, even for an empty input
        LLVMFuzzerTestOneInput(data.empty() ? &empty : data.data(), data.size());
        if (!pmc_fuzz_last_input_parsed) continue;
        const bool ok = pmc_fuzz_last_input_parsed() != 0;
        (ok ? parsed : rejected)++;
        const std::string name = base_name(path);
        const bool want_ok = name.rfind("ok-", 0) == 0, want_bad = name.rfind("bad-", 0) == 0;
        if ((want_ok && !ok) || (want_bad && ok)) {
            std::fprintf(stderr, "replay: %s was %s, but its name says it should be %s\n", path.c_str(),
                         ok ? "accepted" : "rejected", ok ? "rejected" : "accepted");
            ++wrong;
        }
    }
    std::printf("replay: %zu inputs ran", inputs.size());
    if (pmc_fuzz_last_input_parsed) std::printf(" (%d parsed, %d rejected)", parsed, rejected);
    std::printf(", %d with the wrong outcome\n", wrong);
    return wrong == 0 ? 0 : 1;
}
