// The libFuzzer target of tests/fuzz without libFuzzer: replays the committed corpus
// (tests/fuzz/corpus, which includes the inputs of every crash found so far) and a fixed set
// of mutants of them, so that every ctest run (and the sanitizer build) re-checks them.
// A failure aborts with "FUZZ FAILURE: ..." and the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

#include "../fuzz/fuzz_forward.cpp"

namespace {

std::filesystem::path corpus_dir() {
    return std::filesystem::path(__FILE__).parent_path().parent_path() / "fuzz" / "corpus";
}

std::vector<std::filesystem::path> corpus_files() {
    std::vector<std::filesystem::path> files;
    if (!std::filesystem::is_directory(corpus_dir())) return files;
    for (const auto& e : std::filesystem::directory_iterator(corpus_dir()))
        if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    return files;
}

std::vector<uint8_t> read_file(const std::filesystem::path& f) {
    std::ifstream in(f, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(FuzzCorpus, ReplaysCommittedInputs) {
    const auto files = corpus_files();
    ASSERT_FALSE(files.empty()) << corpus_dir();
    for (const auto& f : files) {
        SCOPED_TRACE(f.string());
        const std::vector<uint8_t> bytes = read_file(f);
        LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    }
}

// Deterministic mutants of the corpus (byte changes, insertions, deletions, as libFuzzer
// makes them): a few thousand more cases on every ctest run, without clang.
TEST(FuzzCorpus, MutatedInputs) {
    std::mt19937 rng(20240607);
    const auto files = corpus_files();
    ASSERT_FALSE(files.empty());
    for (const auto& f : files) {
        SCOPED_TRACE(f.string());
        const std::vector<uint8_t> seed = read_file(f);
        for (int i = 0; i < 200; ++i) {
            std::vector<uint8_t> bytes = seed;
            for (int m = 1 + int(rng() % 4); m > 0; --m) {
                const size_t at = bytes.empty() ? 0 : rng() % bytes.size();
                switch (rng() % 4) {
                    case 0: if (!bytes.empty()) bytes[at] = uint8_t(rng()); break;
                    case 1: if (!bytes.empty()) bytes[at] ^= uint8_t(1u << (rng() % 8)); break;
                    case 2: bytes.insert(bytes.begin() + long(at), uint8_t(rng() % 16)); break;
                    default: if (!bytes.empty()) bytes.erase(bytes.begin() + long(at)); break;
                }
            }
            LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
        }
    }
}

}  // namespace
