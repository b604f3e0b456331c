// Find / FindEx, the find-db and the selection options: sorted results, every
// algorithm's status, the workspace limit, deterministic-only, CONVCORE_DISABLE_ALGOS, the db
// round trip (a shape in the db times nothing), hand-edited and corrupt db files, bad
// arguments. Concurrent processes writing one db: tests/python/test_find.py. No timed assertions.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
#include "api_test_util.hpp"

using convcore_test::db_hits;
using convcore_test::timed_runs;

namespace {

using Perf = convcoreConvolutionFwdAlgoPerf_t;

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_text(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
}


// A small 3x3 problem (stride 1, padding 1) that every CPU algorithm can run, with its own
// find-db file in a fresh temporary directory.
struct FindTest : ::testing::Test {
    convcore::Handle handle;
    convcore::TensorDesc x{CONVCORE_DATA_FLOAT, 1, 4, 10, 9};
    convcore::FilterDesc w{CONVCORE_DATA_FLOAT, 5, 4, 3, 3};
    convcore::ConvDesc conv{1};
    convcore::TensorDesc y{CONVCORE_DATA_FLOAT, 1, 5, 10, 9};
    std::string dir, db;

    void SetUp() override {
        char tmpl[] = "/tmp/convcore_find_XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir = tmpl;
        db = dir + "/sub/find-db.txt";  // the directory is created on the first write
        setenv("CONVCORE_FIND_DB", db.c_str(), 1);
        unsetenv("CONVCORE_DISABLE_ALGOS");
        convcoreClearFindCache();
    }
    void TearDown() override {
        unsetenv("CONVCORE_FIND_DB");
        unsetenv("CONVCORE_DISABLE_ALGOS");
        convcoreClearFindCache();
        std::system(("rm -rf " + dir).c_str());
    }

    std::vector<Perf> find() {
        std::vector<Perf> perf(CONVCORE_FWD_ALGO_COUNT);
        int returned = 0;
        EXPECT_EQ(convcoreFindConvolutionForwardAlgorithm(handle, x, w, conv, y, CONVCORE_FWD_ALGO_COUNT,
                                                          &returned, perf.data()),
                  CONVCORE_STATUS_SUCCESS)
            << convcoreGetLastErrorString();
        perf.resize(returned);
        return perf;
    }
    std::vector<Perf> get() {
        std::vector<Perf> perf(CONVCORE_FWD_ALGO_COUNT);
        int returned = 0;
        EXPECT_EQ(convcoreGetConvolutionForwardAlgorithm(handle, x, w, conv, y, CONVCORE_FWD_ALGO_COUNT,
                                                         &returned, perf.data()),
                  CONVCORE_STATUS_SUCCESS);
        perf.resize(returned);
        return perf;
    }
    static const Perf& of(const std::vector<Perf>& perf, convcoreConvolutionFwdAlgo_t algo) {
        for (const Perf& p : perf)
            if (p.algo == algo) return p;
        ADD_FAILURE() << "algorithm " << algo << " missing";
        return perf.front();
    }
};

// Successes first, by time; then the rest in enum order; each algorithm once.
template <typename P>
void expect_sorted(const std::vector<P>& perf, size_t count = CONVCORE_FWD_ALGO_COUNT) {
    ASSERT_EQ(perf.size(), count);
    std::set<int> seen;
    bool failures_started = false;
    for (size_t i = 0; i < perf.size(); ++i) {
        seen.insert(perf[i].algo);
        const bool ok = perf[i].status == CONVCORE_STATUS_SUCCESS;
        if (ok) {
            EXPECT_FALSE(failures_started) << "a success after a failure at " << i;
            EXPECT_GE(perf[i].time, 0.0f);
            if (i > 0 && perf[i - 1].status == CONVCORE_STATUS_SUCCESS) EXPECT_LE(perf[i - 1].time, perf[i].time);
        } else {
            if (failures_started) EXPECT_LT(perf[i - 1].algo, perf[i].algo);
            failures_started = true;
            EXPECT_EQ(perf[i].time, -1.0f);
        }
    }
    EXPECT_EQ(seen.size(), count);
}

}  // namespace

TEST_F(FindTest, SortedWithEveryAlgorithmsStatusAndWorkspace) {
    const int64_t before = timed_runs();
    const std::vector<Perf> perf = find();
    expect_sorted(perf);
    const std::vector<Perf> ranking = get();
    int successes = 0;
    for (const Perf& g : ranking) {
        const Perf& f = of(perf, g.algo);
        // Find runs exactly what Get calls applicable (on the CPU every run succeeds).
        EXPECT_EQ(f.status, g.status) << convcoreGetFwdAlgoName(g.algo);
        EXPECT_EQ(f.determinism, g.determinism);
        if (g.status == CONVCORE_STATUS_SUCCESS) {
            ++successes;
            size_t bytes = 0;
            ASSERT_EQ(convcoreGetConvolutionForwardWorkspaceSize(handle, x, w, conv, y, g.algo, &bytes),
                      CONVCORE_STATUS_SUCCESS);
            EXPECT_EQ(f.memory, bytes) << convcoreGetFwdAlgoName(g.algo);
        }
    }
    EXPECT_GE(successes, 8);  // the 3x3 stride-1 problem suits nearly every algorithm
    EXPECT_EQ(timed_runs() - before, successes);

    // Fewer results asked for: the first ones.
    Perf top[2];
    int returned = 0;
    ASSERT_EQ(convcoreFindConvolutionForwardAlgorithm(handle, x, w, conv, y, 2, &returned, top),
              CONVCORE_STATUS_SUCCESS);
    ASSERT_EQ(returned, 2);
    EXPECT_EQ(top[0].algo, perf[0].algo);
    EXPECT_EQ(top[1].algo, perf[1].algo);
}

TEST_F(FindTest, NotSupportedAlgorithmsAreReportedNotTimed) {
    convcore::FilterDesc w5(CONVCORE_DATA_FLOAT, 5, 4, 5, 5);  // 5x5: no Winograd F(.,3x3)
    convcore::ConvDesc conv2(2, 1);
    std::vector<Perf> perf(CONVCORE_FWD_ALGO_COUNT);
    int returned = 0;
    ASSERT_EQ(convcoreFindConvolutionForwardAlgorithm(handle, x, w5, conv2, y, CONVCORE_FWD_ALGO_COUNT,
                                                      &returned, perf.data()),
              CONVCORE_STATUS_SUCCESS);
    perf.resize(returned);
    expect_sorted(perf);
    EXPECT_EQ(of(perf, CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3).status, CONVCORE_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(of(perf, CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3).status, CONVCORE_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(of(perf, CONVCORE_FWD_ALGO_DIRECT).status, CONVCORE_STATUS_SUCCESS);
}

TEST_F(FindTest, WorkspaceLimitOnTheHandle) {
    const std::vector<Perf> all = find();
    size_t largest = 0;
    int zero_workspace = 0;
    for (const Perf& p : all) {
        if (p.status != CONVCORE_STATUS_SUCCESS) continue;
        largest = std::max(largest, p.memory);
        zero_workspace += p.memory == 0;
    }
    ASSERT_GT(largest, 0u);
    ASSERT_GT(zero_workspace, 0);  // DIRECT at least: the limit leaves something to run
    const size_t limit = largest - 1;
    ASSERT_EQ(convcoreSetFindWorkspaceLimit(handle, limit), CONVCORE_STATUS_SUCCESS);
    const std::vector<Perf> limited = find();
    expect_sorted(limited);
    int over = 0;
    for (const Perf& p : limited) {
        const Perf& before = of(all, p.algo);
        if (before.status != CONVCORE_STATUS_SUCCESS) {
            EXPECT_EQ(p.status, before.status);
        } else if (before.memory > limit) {
            ++over;
            EXPECT_EQ(p.status, CONVCORE_STATUS_ALLOC_FAILED) << convcoreGetFwdAlgoName(p.algo);
            EXPECT_EQ(p.memory, before.memory);  // what it would need
        } else {
            EXPECT_EQ(p.status, CONVCORE_STATUS_SUCCESS);
            EXPECT_LE(p.memory, limit);
        }
    }
    EXPECT_GE(over, 1);
    ASSERT_EQ(convcoreSetFindWorkspaceLimit(handle, 0), CONVCORE_STATUS_SUCCESS);
    for (const Perf& p : find())
        if (p.status == CONVCORE_STATUS_SUCCESS) EXPECT_EQ(p.memory, 0u);
}

TEST_F(FindTest, FindExTimesOnTheCallersBuffersWithinTheirWorkspace) {
    std::vector<float> xs(1 * 4 * 10 * 9), ws(5 * 4 * 3 * 3), ys(1 * 5 * 10 * 9);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(std::sin(0.37 * double(i)));
    for (size_t i = 0; i < ws.size(); ++i) ws[i] = float(std::cos(0.91 * double(i)));
    const std::vector<Perf> all = get();
    size_t largest = 0;
    for (const Perf& p : all) largest = std::max(largest, p.memory);
    const size_t given = largest / 2;
    std::vector<double> workspace(given / sizeof(double) + 1);
    std::vector<Perf> perf(CONVCORE_FWD_ALGO_COUNT);
    int returned = 0;
    const int64_t before = timed_runs();
    ASSERT_EQ(convcoreFindConvolutionForwardAlgorithmEx(handle, x, xs.data(), w, ws.data(), conv, y, ys.data(),
                                                        CONVCORE_FWD_ALGO_COUNT, &returned, perf.data(),
                                                        workspace.data(), given),
              CONVCORE_STATUS_SUCCESS)
        << convcoreGetLastErrorString();
    perf.resize(returned);
    expect_sorted(perf);
    int ran = 0, refused = 0;
    for (const Perf& p : perf) {
        const Perf& g = of(all, p.algo);
        if (g.status != CONVCORE_STATUS_SUCCESS) continue;
        EXPECT_EQ(p.memory, g.memory);
        if (g.memory > given) {
            EXPECT_EQ(p.status, CONVCORE_STATUS_ALLOC_FAILED) << convcoreGetFwdAlgoName(p.algo);
            ++refused;
        } else {
            EXPECT_EQ(p.status, CONVCORE_STATUS_SUCCESS) << convcoreGetFwdAlgoName(p.algo);
            ++ran;
        }
    }
    EXPECT_GE(ran, 1);
    EXPECT_GE(refused, 1);
    EXPECT_EQ(timed_runs() - before, ran);
}

TEST_F(FindTest, DeterministicOnly) {
    ASSERT_EQ(convcoreSetDeterministicOnly(handle, 1), CONVCORE_STATUS_SUCCESS);
    const std::vector<Perf> perf = find();
    expect_sorted(perf);
    int ran = 0;
    for (const Perf& p : perf) {
        if (p.determinism == CONVCORE_NON_DETERMINISTIC) EXPECT_NE(p.status, CONVCORE_STATUS_SUCCESS);
        ran += p.status == CONVCORE_STATUS_SUCCESS;
    }
    // Every CPU algorithm is deterministic: the filter removes none of them here.
    int applicable = 0;
    for (const Perf& g : get()) applicable += g.status == CONVCORE_STATUS_SUCCESS;
    EXPECT_EQ(ran, applicable);
}

TEST_F(FindTest, DisableAlgosEnvironmentSwitch) {
    const std::vector<Perf> before = find();
    ASSERT_EQ(of(before, CONVCORE_FWD_ALGO_FFT).status, CONVCORE_STATUS_SUCCESS);
    ASSERT_EQ(of(before, CONVCORE_FWD_ALGO_POLY_HANKEL).status, CONVCORE_STATUS_SUCCESS);
    setenv("CONVCORE_DISABLE_ALGOS", "fft, Poly_Hankel,no_such_algo", 1);
    for (const std::vector<Perf>& perf : {find(), get()}) {
        EXPECT_EQ(of(perf, CONVCORE_FWD_ALGO_FFT).status, CONVCORE_STATUS_NOT_SUPPORTED);
        EXPECT_EQ(of(perf, CONVCORE_FWD_ALGO_POLY_HANKEL).status, CONVCORE_STATUS_NOT_SUPPORTED);
        EXPECT_EQ(of(perf, CONVCORE_FWD_ALGO_FFT_TILING).status, CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(perf.back().status, CONVCORE_STATUS_NOT_SUPPORTED);
    }
    // Backward rankings too (same names).
    convcoreConvolutionBwdDataAlgoPerf_t bd[CONVCORE_BWD_DATA_ALGO_COUNT];
    int returned = 0;
    ASSERT_EQ(convcoreGetConvolutionBackwardDataAlgorithm(handle, w, y, conv, x, CONVCORE_BWD_DATA_ALGO_COUNT,
                                                          &returned, bd),
              CONVCORE_STATUS_SUCCESS);
    for (int i = 0; i < returned; ++i)
        if (bd[i].algo == CONVCORE_BWD_DATA_ALGO_FFT) EXPECT_EQ(bd[i].status, CONVCORE_STATUS_NOT_SUPPORTED);
    // An algorithm passed by name still runs.
    std::vector<float> xs(1 * 4 * 10 * 9, 0.5f), ws(5 * 4 * 3 * 3, 0.25f), ys(1 * 5 * 10 * 9);
    size_t bytes = 0;
    ASSERT_EQ(convcoreGetConvolutionForwardWorkspaceSize(handle, x, w, conv, y, CONVCORE_FWD_ALGO_FFT, &bytes),
              CONVCORE_STATUS_SUCCESS);
    std::vector<double> workspace(bytes / 8 + 1);
    const float one = 1.0f, zero = 0.0f;
    EXPECT_EQ(convcoreConvolutionForward(handle, &one, x, xs.data(), w, ws.data(), conv, CONVCORE_FWD_ALGO_FFT,
                                         workspace.data(), bytes, &zero, y, ys.data()),
              CONVCORE_STATUS_SUCCESS);
    unsetenv("CONVCORE_DISABLE_ALGOS");
    EXPECT_EQ(of(find(), CONVCORE_FWD_ALGO_FFT).status, CONVCORE_STATUS_SUCCESS);
}

TEST_F(FindTest, SecondFindTimesNothingAndTheDbSurvivesTheProcessCache) {
    const std::vector<Perf> first = find();
    const std::string text = read_text(db);
    ASSERT_EQ(text.rfind("convcore-find-db 3\n", 0), 0u) << text;
    EXPECT_NE(text.find("\tfwd\tmb1ic4ih10iw9oc5kh3kw3ph1pw1sh1sw1dh1dw1g1_f32_xcorr\tDIRECT\tSUCCESS\t"),
              std::string::npos)
        << text;

    const int64_t runs = timed_runs(), hits = db_hits();
    const std::vector<Perf> cached = find();  // the in-process cache
    convcoreClearFindCache();
    const std::vector<Perf> from_file = find();  // the file
    EXPECT_EQ(timed_runs(), runs);
    EXPECT_EQ(db_hits(), hits + 2);
    for (const auto* again : {&cached, &from_file}) {
        ASSERT_EQ(again->size(), first.size());
        for (size_t i = 0; i < first.size(); ++i) {
            EXPECT_EQ((*again)[i].algo, first[i].algo);
            EXPECT_EQ((*again)[i].status, first[i].status);
            EXPECT_NEAR((*again)[i].time, first[i].time, 1e-3 * std::abs(first[i].time) + 1e-6);
            EXPECT_EQ((*again)[i].timePerCall, first[i].timePerCall);
            EXPECT_EQ((*again)[i].timePrepared, first[i].timePrepared);
        }
    }
}

// The db keeps each time exactly when it rewrites the file: a time rounded to a few digits
// could tie two close algorithms and change Find's order once the db is read back.
TEST_F(FindTest, DbTimesRoundTripExactly) {
    setenv("CONVCORE_DISABLE_ALGOS", "im2win", 1);
    find();
    unsetenv("CONVCORE_DISABLE_ALGOS");
    std::istringstream in(read_text(db));
    std::string line, edited;
    while (std::getline(in, line)) {
        if (line.find("\tSUCCESS\t") != std::string::npos) {  // both times: per call, then prepared
            const size_t times = line.find("\tSUCCESS\t") + 9;
            line = line.substr(0, times) + (line.find("\tDIRECT\t") != std::string::npos
                                                ? "1.2345678912345\t0.98765432109876"
                                                : "1.2345679\t1.2345679");
        }
        edited += line + "\n";
    }
    write_text(db, edited);
    convcoreClearFindCache();
    find();  // times IM2WIN, then rewrites the file with the records above
    const std::string text = read_text(db);
    const std::string field = "\tDIRECT\tSUCCESS\t";
    const size_t at = text.find(field);
    ASSERT_NE(at, std::string::npos) << text;
    char* end = nullptr;
    EXPECT_EQ(std::strtod(text.c_str() + at + field.size(), &end), 1.2345678912345) << text.substr(at, 60);
    ASSERT_EQ(*end, '\t') << text.substr(at, 60);
    EXPECT_EQ(std::strtod(end + 1, nullptr), 0.98765432109876) << text.substr(at, 60);
}

TEST_F(FindTest, FindUsesTheTimesInTheDb) {
    find();
    // Rewrite the times: DIRECT 0.25 ms, the others 7 ms. Find must report exactly those.
    std::istringstream in(read_text(db));
    std::string line, edited;
    int rewritten = 0;
    while (std::getline(in, line)) {
        if (line.find("\tSUCCESS\t") != std::string::npos) {
            const bool direct = line.find("\tDIRECT\t") != std::string::npos;
            line = line.substr(0, line.find("\tSUCCESS\t") + 9) + (direct ? "0.25\t0.25" : "7\t7");
            ++rewritten;
        }
        edited += line + "\n";
    }
    ASSERT_GE(rewritten, 8);
    write_text(db, edited);
    convcoreClearFindCache();
    const int64_t runs = timed_runs();
    const std::vector<Perf> perf = find();
    EXPECT_EQ(timed_runs(), runs);
    ASSERT_EQ(perf[0].algo, CONVCORE_FWD_ALGO_DIRECT);
    EXPECT_FLOAT_EQ(perf[0].time, 0.25f);
    EXPECT_FLOAT_EQ(perf[1].time, 7.0f);
}

TEST_F(FindTest, MissingAlgorithmsAreTimedTheOthersAreNot) {
    setenv("CONVCORE_DISABLE_ALGOS", "im2win", 1);
    find();
    unsetenv("CONVCORE_DISABLE_ALGOS");
    const int64_t runs = timed_runs();
    EXPECT_EQ(of(find(), CONVCORE_FWD_ALGO_IM2WIN).status, CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(timed_runs(), runs + 1);  // only IM2WIN was new
}

TEST_F(FindTest, CorruptDbIsIgnoredAndRewritten) {
    std::system(("mkdir -p " + dir + "/sub").c_str());
    for (const std::string garbage :
         {std::string("\x00\xff\xfe garbage\n\n\t\t\t", 12), std::string("convcore-find-db 999\nx\ty\n"),
          std::string("convcore-find-db 3\n0.1.0\tcpu\tfwd\tmb1\tDIRECT\tSUCCESS\tnot_a_number\t1\n"
                      "too\tfew\tfields\n0.1.0\tcpu\tfwd\tmb1\tDIRECT\tWHAT\t1\t1\n\t\t\t\t\t\t\t\n"
                      "0.1.0\tcpu\tfwd\tmb1\tDIRECT\tSUCCESS\t1\tinf\n0.1.0\tcpu\tfwd\tmb1\tDIRECT\tSUCCESS\t1\n"
                      "0.1.0\tcpu\tfwd\tmb1\tDIRECT\tSUCC")}) {
        write_text(db, garbage);
        convcoreClearFindCache();
        const int64_t runs = timed_runs();
        const std::vector<Perf> perf = find();
        expect_sorted(perf);
        EXPECT_GT(timed_runs(), runs);  // nothing usable in it
        const std::string text = read_text(db);
        EXPECT_EQ(text.rfind("convcore-find-db 3\n", 0), 0u);
        EXPECT_NE(text.find("\tDIRECT\tSUCCESS\t"), std::string::npos);
        EXPECT_EQ(text.find("garbage"), std::string::npos);
        EXPECT_EQ(text.find("not_a_number"), std::string::npos);
    }
}

TEST_F(FindTest, DbOffWritesNothing) {
    setenv("CONVCORE_FIND_DB", "off", 1);
    convcoreClearFindCache();
    expect_sorted(find());
    EXPECT_NE(access(dir.c_str(), F_OK), -1);
    EXPECT_EQ(access((dir + "/sub").c_str(), F_OK), -1);  // no file, not even its directory
    const int64_t runs = timed_runs();
    find();  // this process still remembers
    EXPECT_EQ(timed_runs(), runs);
}

TEST_F(FindTest, UnwritableDbLocationStillFinds) {
    setenv("CONVCORE_FIND_DB", "/proc/no/such/dir/find-db.txt", 1);
    convcoreClearFindCache();
    expect_sorted(find());
}

TEST_F(FindTest, BadArguments) {
    Perf perf[CONVCORE_FWD_ALGO_COUNT];
    int returned = 7;
    EXPECT_EQ(convcoreFindConvolutionForwardAlgorithm(handle, x, w, conv, y, 0, &returned, perf),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_EQ(returned, 0);
    EXPECT_EQ(convcoreFindConvolutionForwardAlgorithm(handle, x, w, conv, y, 1, nullptr, perf),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_EQ(convcoreFindConvolutionForwardAlgorithm(handle, x, w, conv, y, 1, &returned, nullptr),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_EQ(convcoreFindConvolutionForwardAlgorithm(nullptr, x, w, conv, y, 1, &returned, perf),
              CONVCORE_STATUS_BAD_PARAM);
    convcore::TensorDesc wrong_y(CONVCORE_DATA_FLOAT, 1, 5, 8, 9);
    EXPECT_EQ(convcoreFindConvolutionForwardAlgorithm(handle, x, w, conv, wrong_y, 1, &returned, perf),
              CONVCORE_STATUS_BAD_PARAM);
    std::vector<float> xs(1 * 4 * 10 * 9 + 1), ws(5 * 4 * 3 * 3), ys(1 * 5 * 10 * 9);
    EXPECT_EQ(convcoreFindConvolutionForwardAlgorithmEx(handle, x, nullptr, w, ws.data(), conv, y, ys.data(), 1,
                                                        &returned, perf, nullptr, 0),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_EQ(convcoreFindConvolutionForwardAlgorithmEx(handle, x, xs.data(), w, ws.data(), conv, y, ys.data(), 1,
                                                        &returned, perf, nullptr, 64),
              CONVCORE_STATUS_BAD_PARAM);
    // Misaligned x: the runs say BAD_PARAM, and so does FindEx (not a per-algorithm status).
    const void* misaligned = reinterpret_cast<const char*>(xs.data()) + 1;
    EXPECT_EQ(convcoreFindConvolutionForwardAlgorithmEx(handle, x, misaligned, w, ws.data(), conv, y, ys.data(),
                                                        1, &returned, perf, nullptr, 0),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("aligned"), std::string::npos);
    EXPECT_EQ(convcoreSetFindWorkspaceLimit(nullptr, 0), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_EQ(convcoreSetDeterministicOnly(nullptr, 1), CONVCORE_STATUS_BAD_PARAM);
}

TEST_F(FindTest, BackwardPasses) {
    using DataPerf = convcoreConvolutionBwdDataAlgoPerf_t;
    using FilterPerf = convcoreConvolutionBwdFilterAlgoPerf_t;
    const auto find_data = [&] {
        std::vector<DataPerf> perf(CONVCORE_BWD_DATA_ALGO_COUNT);
        int returned = 0;
        EXPECT_EQ(convcoreFindConvolutionBackwardDataAlgorithm(handle, w, y, conv, x, CONVCORE_BWD_DATA_ALGO_COUNT,
                                                               &returned, perf.data()),
                  CONVCORE_STATUS_SUCCESS)
            << convcoreGetLastErrorString();
        perf.resize(returned);
        return perf;
    };
    const auto find_filter = [&] {
        std::vector<FilterPerf> perf(CONVCORE_BWD_FILTER_ALGO_COUNT);
        int returned = 0;
        EXPECT_EQ(convcoreFindConvolutionBackwardFilterAlgorithm(handle, x, y, conv, w, CONVCORE_BWD_FILTER_ALGO_COUNT,
                                                                 &returned, perf.data()),
                  CONVCORE_STATUS_SUCCESS)
            << convcoreGetLastErrorString();
        perf.resize(returned);
        return perf;
    };
    const int64_t before = timed_runs();
    const std::vector<DataPerf> data = find_data();
    const std::vector<FilterPerf> filter = find_filter();
    expect_sorted(data, CONVCORE_BWD_DATA_ALGO_COUNT);
    expect_sorted(filter, CONVCORE_BWD_FILTER_ALGO_COUNT);
    int ran = 0;
    for (const DataPerf& p : data) {
        if (p.status != CONVCORE_STATUS_SUCCESS) continue;
        ++ran;
        size_t bytes = 0;
        ASSERT_EQ(convcoreGetConvolutionBackwardDataWorkspaceSize(handle, w, y, conv, x, p.algo, &bytes),
                  CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(p.memory, bytes);
    }
    for (const FilterPerf& p : filter) {
        if (p.status != CONVCORE_STATUS_SUCCESS) continue;
        ++ran;
        size_t bytes = 0;
        ASSERT_EQ(convcoreGetConvolutionBackwardFilterWorkspaceSize(handle, x, y, conv, w, p.algo, &bytes),
                  CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(p.memory, bytes);
    }
    EXPECT_GE(ran, 8);
    EXPECT_EQ(timed_runs() - before, ran);
    const std::string text = read_text(db);
    EXPECT_NE(text.find("\tbwd_data\tmb1ic4ih10iw9oc5kh3kw3ph1pw1sh1sw1dh1dw1g1_f32_xcorr\tDIRECT\tSUCCESS\t"),
              std::string::npos);
    EXPECT_NE(text.find("\tbwd_filter\tmb1ic4ih10iw9oc5kh3kw3ph1pw1sh1sw1dh1dw1g1_f32_xcorr\tWINOGRAD_3X3_2X2\t"),
              std::string::npos);
    convcoreClearFindCache();
    find_data();
    find_filter();
    EXPECT_EQ(timed_runs() - before, ran);  // the second time: all from the db

    // FindEx on the caller's buffers with no workspace: only workspace-free algorithms run.
    std::vector<float> xs(1 * 4 * 10 * 9, 0.5f), ws(5 * 4 * 3 * 3, -0.25f), dys(1 * 5 * 10 * 9, 0.75f);
    std::vector<float> dx(xs.size()), dw(ws.size());
    std::vector<DataPerf> dperf(CONVCORE_BWD_DATA_ALGO_COUNT);
    std::vector<FilterPerf> fperf(CONVCORE_BWD_FILTER_ALGO_COUNT);
    int returned = 0;
    ASSERT_EQ(convcoreFindConvolutionBackwardDataAlgorithmEx(handle, w, ws.data(), y, dys.data(), conv, x, dx.data(),
                                                             CONVCORE_BWD_DATA_ALGO_COUNT, &returned, dperf.data(),
                                                             nullptr, 0),
              CONVCORE_STATUS_SUCCESS)
        << convcoreGetLastErrorString();
    expect_sorted(dperf, CONVCORE_BWD_DATA_ALGO_COUNT);
    ASSERT_EQ(convcoreFindConvolutionBackwardFilterAlgorithmEx(handle, x, xs.data(), y, dys.data(), conv, w,
                                                               dw.data(), CONVCORE_BWD_FILTER_ALGO_COUNT, &returned,
                                                               fperf.data(), nullptr, 0),
              CONVCORE_STATUS_SUCCESS)
        << convcoreGetLastErrorString();
    expect_sorted(fperf, CONVCORE_BWD_FILTER_ALGO_COUNT);
    int refused = 0;
    for (const DataPerf& p : dperf) {
        if (p.status == CONVCORE_STATUS_SUCCESS) EXPECT_EQ(p.memory, 0u);
        refused += p.status == CONVCORE_STATUS_ALLOC_FAILED;
    }
    for (const FilterPerf& p : fperf) {
        if (p.status == CONVCORE_STATUS_SUCCESS) EXPECT_EQ(p.memory, 0u);
        refused += p.status == CONVCORE_STATUS_ALLOC_FAILED;
    }
    EXPECT_GE(refused, 2);
    EXPECT_EQ(dperf[0].status, CONVCORE_STATUS_SUCCESS);  // DIRECT needs no workspace
    EXPECT_EQ(fperf[0].status, CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(convcoreFindConvolutionBackwardFilterAlgorithmEx(handle, x, xs.data(), y, nullptr, conv, w, dw.data(),
                                                               1, &returned, fperf.data(), nullptr, 0),
              CONVCORE_STATUS_BAD_PARAM);
}

TEST_F(FindTest, ThreadsShareTheCacheAndTheFile) {
    // Each thread: its own handle, one shape of its own and one shape common to all.
    const auto find_shape = [](int64_t c) {
        convcore::Handle h;
        convcoreSetNumThreads(h, 1);
        convcore::TensorDesc xd(CONVCORE_DATA_FLOAT, 1, c, 8, 8);
        convcore::FilterDesc wd(CONVCORE_DATA_FLOAT, 3, c, 3, 3);
        convcore::ConvDesc cd(1);
        convcore::TensorDesc yd(CONVCORE_DATA_FLOAT, 1, 3, 8, 8);
        Perf perf[CONVCORE_FWD_ALGO_COUNT];
        int returned = 0;
        const convcoreStatus_t st =
            convcoreFindConvolutionForwardAlgorithm(h, xd, wd, cd, yd, CONVCORE_FWD_ALGO_COUNT, &returned, perf);
        return st == CONVCORE_STATUS_SUCCESS && returned == CONVCORE_FWD_ALGO_COUNT &&
               perf[0].status == CONVCORE_STATUS_SUCCESS;
    };
    constexpr int kThreads = 4;
    std::vector<std::thread> threads;
    std::atomic<int> ok{0};
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] { ok += find_shape(2 + t) && find_shape(1); });
    for (auto& th : threads) th.join();
    EXPECT_EQ(ok.load(), kThreads);
    convcoreClearFindCache();
    const int64_t runs = timed_runs();
    for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(find_shape(2 + t));
    EXPECT_TRUE(find_shape(1));
    EXPECT_EQ(timed_runs(), runs);  // every shape of every thread is in the file
}

// ---- Select: the decision of "auto" (MEASURED), "find" (FIND) and the heuristic ----

namespace {

convcoreConvolutionFwdAlgo_t select_fwd(FindTest& t, convcoreSelectMode_t mode, const void* x = nullptr,
                                        const void* w = nullptr, void* y = nullptr) {
    convcoreConvolutionFwdAlgo_t algo{};
    EXPECT_EQ(convcoreSelectConvolutionForwardAlgorithm(t.handle, t.x, x, t.w, w, t.conv, t.y, y, mode, &algo),
              CONVCORE_STATUS_SUCCESS)
        << convcoreGetLastErrorString();
    return algo;
}

}  // namespace

TEST_F(FindTest, SelectHeuristicIsGetsFirstAndTimesNothing) {
    const int64_t before = timed_runs();
    EXPECT_EQ(select_fwd(*this, CONVCORE_SELECT_HEURISTIC), get().front().algo);
    EXPECT_EQ(timed_runs(), before);
}

// The algorithms the find-db file holds a time for ("\tNAME\tSUCCESS" lines).
std::set<std::string> timed_in_db(const std::string& text) {
    std::set<std::string> names;
    for (int a = 0; a < CONVCORE_FWD_ALGO_COUNT; ++a) {
        const std::string name = convcoreGetFwdAlgoName(convcoreConvolutionFwdAlgo_t(a));
        if (text.find("\t" + name + "\tSUCCESS") != std::string::npos) names.insert(name);
    }
    return names;
}

// What "auto" must time: the ranking's first CONVCORE_SELECT_CANDIDATES, the general lowerings
// and the algorithms made for the problem (the solvers' made_for, core/solver.hpp), whatever
// their rank.
std::set<std::string> top_and(const std::vector<Perf>& ranking, std::initializer_list<convcoreConvolutionFwdAlgo_t> made) {
    std::set<std::string> names;
    for (int i = 0; i < CONVCORE_SELECT_CANDIDATES; ++i) names.insert(convcoreGetFwdAlgoName(ranking[i].algo));
    for (auto a : {CONVCORE_FWD_ALGO_IM2COL_GEMM, CONVCORE_FWD_ALGO_IMPLICIT_GEMM, CONVCORE_FWD_ALGO_IM2WIN})
        names.insert(convcoreGetFwdAlgoName(a));
    for (auto a : made) names.insert(convcoreGetFwdAlgoName(a));
    return names;
}

// The fixture's problem: 3x3, stride 1, 4 channels. Made for it: both Winograd algorithms, and
// CYCLIC_MINIMAL (4 channels per group: its GEMM-free path).
TEST_F(FindTest, SelectMeasuredTimesTheTopCandidatesAndTheMadeForOnceThenLooksUp) {
    const int64_t before = timed_runs();
    const auto chosen = select_fwd(*this, CONVCORE_SELECT_MEASURED);
    const int64_t timed = timed_runs() - before;
    const std::vector<Perf> ranking = get();
    const std::set<std::string> expected = top_and(ranking, {CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3,
                                                             CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3,
                                                             CONVCORE_FWD_ALGO_CYCLIC_MINIMAL});
    EXPECT_EQ(timed, int64_t(expected.size()));
    EXPECT_EQ(timed_in_db(read_text(db)), expected);
    EXPECT_TRUE(expected.count(convcoreGetFwdAlgoName(chosen))) << convcoreGetFwdAlgoName(chosen);
    // Cached: the same decision, nothing timed, not even a db lookup.
    const int64_t hits = db_hits();
    EXPECT_EQ(select_fwd(*this, CONVCORE_SELECT_MEASURED), chosen);
    EXPECT_EQ(timed_runs() - before, timed);
    EXPECT_EQ(db_hits(), hits);
    // A new process (cleared caches) reads the db and times nothing.
    convcoreClearFindCache();
    EXPECT_EQ(select_fwd(*this, CONVCORE_SELECT_MEASURED), chosen);
    EXPECT_EQ(timed_runs() - before, timed);
}

// On a 5x5 problem made for none but the FFT family, auto times the top candidates and those.
TEST_F(FindTest, SelectMeasuredTimesTheFftFamilyOnLargeFilters) {
    const convcore::FilterDesc w5(CONVCORE_DATA_FLOAT, 5, 4, 5, 5);
    const convcore::ConvDesc conv2{2};
    std::vector<Perf> ranking(CONVCORE_FWD_ALGO_COUNT);
    int returned = 0;
    ASSERT_EQ(convcoreGetConvolutionForwardAlgorithm(handle, x, w5, conv2, y, CONVCORE_FWD_ALGO_COUNT, &returned,
                                                     ranking.data()),
              CONVCORE_STATUS_SUCCESS);
    convcoreConvolutionFwdAlgo_t algo{};
    ASSERT_EQ(convcoreSelectConvolutionForwardAlgorithm(handle, x, nullptr, w5, nullptr, conv2, y, nullptr,
                                                        CONVCORE_SELECT_MEASURED, &algo),
              CONVCORE_STATUS_SUCCESS)
        << convcoreGetLastErrorString();
    EXPECT_EQ(timed_in_db(read_text(db)),
              top_and(ranking, {CONVCORE_FWD_ALGO_FFT, CONVCORE_FWD_ALGO_FFT_TILING, CONVCORE_FWD_ALGO_FINE_GRAINED_FFT,
                                CONVCORE_FWD_ALGO_POLY_HANKEL}));
}

// On an NHWC problem with few input channels (a 3-D filter's 3 depth taps stacked as channels),
// IMPLICIT_GEMM's NHWC GEMM, a general lowering, is timed whatever its rank (the model, fitted on
// NCHW runs, ranks it 4th there).
TEST_F(FindTest, SelectMeasuredTimesTheNhwcGemmBesideTheTopCandidates) {
    const convcore::TensorDesc xn(CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, 32, 3, 12, 12);
    const convcore::FilterDesc wn(CONVCORE_DATA_FLOAT, 32, 3, 3, 3);
    const convcore::TensorDesc yn(CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, 32, 32, 12, 12);
    std::vector<Perf> ranking(CONVCORE_FWD_ALGO_COUNT);
    int returned = 0;
    ASSERT_EQ(convcoreGetConvolutionForwardAlgorithm(handle, xn, wn, conv, yn, CONVCORE_FWD_ALGO_COUNT, &returned,
                                                     ranking.data()),
              CONVCORE_STATUS_SUCCESS);
    const int64_t before = timed_runs();
    convcoreConvolutionFwdAlgo_t algo{};
    ASSERT_EQ(convcoreSelectConvolutionForwardAlgorithm(handle, xn, nullptr, wn, nullptr, conv, yn, nullptr,
                                                        CONVCORE_SELECT_MEASURED, &algo),
              CONVCORE_STATUS_SUCCESS)
        << convcoreGetLastErrorString();
    const std::set<std::string> expected =
        top_and(ranking, {CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3, CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3,
                          CONVCORE_FWD_ALGO_CYCLIC_MINIMAL});
    EXPECT_EQ(timed_runs() - before, int64_t(expected.size()));
    EXPECT_EQ(timed_in_db(read_text(db)), expected);
}

TEST_F(FindTest, SelectFindIsFindsFastestAndUsesTheCallersBuffers) {
    std::vector<float> xs(size_t(1 * 4 * 10 * 9), 0.5f), ws(size_t(5 * 4 * 3 * 3), -0.25f),
        ys(size_t(1 * 5 * 10 * 9), 0.0f);
    const auto chosen = select_fwd(*this, CONVCORE_SELECT_FIND, xs.data(), ws.data(), ys.data());
    EXPECT_EQ(chosen, find().front().algo);  // find() reads the same db entries: nothing re-timed
    // x and w were only read; y was written (scratch).
    EXPECT_TRUE(std::all_of(xs.begin(), xs.end(), [](float v) { return v == 0.5f; }));
    EXPECT_TRUE(std::all_of(ws.begin(), ws.end(), [](float v) { return v == -0.25f; }));
    EXPECT_TRUE(std::any_of(ys.begin(), ys.end(), [](float v) { return v != 0.0f; }));
}

TEST_F(FindTest, SelectHonoursDisabledAlgorithmsAndTheAutoSwitch) {
    const auto first = get().front().algo;
    setenv("CONVCORE_DISABLE_ALGOS", convcoreGetFwdAlgoName(first), 1);
    EXPECT_NE(select_fwd(*this, CONVCORE_SELECT_MEASURED), first);
    EXPECT_NE(select_fwd(*this, CONVCORE_SELECT_HEURISTIC), first);
    unsetenv("CONVCORE_DISABLE_ALGOS");
    setenv("CONVCORE_AUTO", "heuristic", 1);
    const int64_t before = timed_runs();
    EXPECT_EQ(select_fwd(*this, CONVCORE_SELECT_MEASURED), first);
    EXPECT_EQ(timed_runs(), before);
    unsetenv("CONVCORE_AUTO");
}

TEST_F(FindTest, SelectBadArguments) {
    convcoreConvolutionFwdAlgo_t algo{};
    EXPECT_EQ(convcoreSelectConvolutionForwardAlgorithm(handle, x, nullptr, w, nullptr, conv, y, nullptr,
                                                        CONVCORE_SELECT_MEASURED, nullptr),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_EQ(convcoreSelectConvolutionForwardAlgorithm(handle, x, nullptr, w, nullptr, conv, y, nullptr,
                                                        convcoreSelectMode_t(7), &algo),
              CONVCORE_STATUS_BAD_PARAM);
    EXPECT_NE(std::string(convcoreGetLastErrorString()).find("mode=7"), std::string::npos);
    EXPECT_EQ(convcoreSelectConvolutionForwardAlgorithm(nullptr, x, nullptr, w, nullptr, conv, y, nullptr,
                                                        CONVCORE_SELECT_MEASURED, &algo),
              CONVCORE_STATUS_BAD_PARAM);
    convcore::TensorDesc wrong_y{CONVCORE_DATA_FLOAT, 1, 5, 9, 9};
    EXPECT_EQ(convcoreSelectConvolutionForwardAlgorithm(handle, x, nullptr, w, nullptr, conv, wrong_y, nullptr,
                                                        CONVCORE_SELECT_MEASURED, &algo),
              CONVCORE_STATUS_BAD_PARAM);
}

TEST_F(FindTest, SelectBackwardPasses) {
    convcoreConvolutionBwdDataAlgo_t data{};
    ASSERT_EQ(convcoreSelectConvolutionBackwardDataAlgorithm(handle, w, nullptr, y, nullptr, conv, x, nullptr,
                                                             CONVCORE_SELECT_MEASURED, &data),
              CONVCORE_STATUS_SUCCESS)
        << convcoreGetLastErrorString();
    EXPECT_NE(convcoreGetBwdDataAlgoName(data), nullptr);
    convcoreConvolutionBwdFilterAlgo_t filter{};
    ASSERT_EQ(convcoreSelectConvolutionBackwardFilterAlgorithm(handle, x, nullptr, y, nullptr, conv, w, nullptr,
                                                               CONVCORE_SELECT_MEASURED, &filter),
              CONVCORE_STATUS_SUCCESS)
        << convcoreGetLastErrorString();
    EXPECT_NE(convcoreGetBwdFilterAlgoName(filter), nullptr);
}

TEST_F(FindTest, StridedProblemsAreTimedApartFromPackedOnes) {
    convcore::TensorDesc nhwc{CONVCORE_DATA_FLOAT, 1, 4, 10, 9};
    nhwc.set_strided(CONVCORE_DATA_FLOAT, {1, 4, 10, 9}, {10 * 9 * 4, 1, 9 * 4, 4});
    convcoreConvolutionFwdAlgo_t algo{};
    ASSERT_EQ(convcoreSelectConvolutionForwardAlgorithm(handle, nhwc, nullptr, w, nullptr, conv, y, nullptr,
                                                        CONVCORE_SELECT_MEASURED, &algo),
              CONVCORE_STATUS_SUCCESS)
        << convcoreGetLastErrorString();
    const std::string text = read_text(db);
    EXPECT_NE(text.find("g1_f32_xcorr_xnhwc_ynchw\t"), std::string::npos) << text;
    EXPECT_EQ(text.find("g1_f32_xcorr\t"), std::string::npos) << "a packed problem was recorded";
}

// ---- the two ways of running the forward filters: per call, or prepared once ----

namespace {

// Rewrites every SUCCESS line of the db: `times(algorithm name)` gives its two time fields
// ("<per call>\t<prepared>"). Returns the number of lines rewritten.
template <typename Times>
int rewrite_times(const std::string& db, Times times) {
    std::istringstream in(read_text(db));
    std::string line, edited;
    int rewritten = 0;
    while (std::getline(in, line)) {
        const size_t status = line.find("\tSUCCESS\t");
        if (status != std::string::npos && line[0] != '#') {
            const size_t name_start = line.rfind('\t', status - 1) + 1;
            line = line.substr(0, status + 9) + times(line.substr(name_start, status - name_start));
            ++rewritten;
        }
        edited += line + "\n";
    }
    write_text(db, edited);
    return rewritten;
}

// A caller's own choice (convcoreStoreChoiceTimes / convcoreGetFastestChoice): kept in the db
// file beside Find's records, read back by a later process (the cache cleared), the fastest
// option given; Find's own directions and malformed fields are BAD_PARAM naming the argument.
TEST_F(FindTest, ACallersChoiceIsKeptAndTheFastestGiven) {
    char option[32] = "x";
    ASSERT_EQ(convcoreGetFastestChoice(handle, "nd_schedule_forward", "p1", option, sizeof option),
              CONVCORE_STATUS_SUCCESS);
    EXPECT_STREQ(option, "");  // none stored
    const char* names[] = {"taps", "stacked", "native"};
    const float times[] = {3.0f, 1.5f, 2.0f};
    ASSERT_EQ(convcoreStoreChoiceTimes(handle, "nd_schedule_forward", "p1", 3, names, times), CONVCORE_STATUS_SUCCESS)
        << convcoreGetLastErrorString();
    EXPECT_NE(read_text(db).find("\tnd_schedule_forward\tp1\tstacked\tSUCCESS\t1.5\t"), std::string::npos);
    convcoreClearFindCache();  // as a new process: from the file
    ASSERT_EQ(convcoreGetFastestChoice(handle, "nd_schedule_forward", "p1", option, sizeof option),
              CONVCORE_STATUS_SUCCESS);
    EXPECT_STREQ(option, "stacked");
    const char* again[] = {"stacked"};
    const float slower[] = {9.0f};  // a time stored again replaces the old one
    ASSERT_EQ(convcoreStoreChoiceTimes(handle, "nd_schedule_forward", "p1", 1, again, slower), CONVCORE_STATUS_SUCCESS);
    ASSERT_EQ(convcoreGetFastestChoice(handle, "nd_schedule_forward", "p1", option, sizeof option),
              CONVCORE_STATUS_SUCCESS);
    EXPECT_STREQ(option, "native");
    // another problem or direction is another choice
    ASSERT_EQ(convcoreGetFastestChoice(handle, "nd_schedule_backward_data", "p1", option, sizeof option),
              CONVCORE_STATUS_SUCCESS);
    EXPECT_STREQ(option, "");

    const auto bad = [&](convcoreStatus_t status, const char* argument) {
        EXPECT_EQ(status, CONVCORE_STATUS_BAD_PARAM) << argument;
        EXPECT_NE(std::string(convcoreGetLastErrorString()).find(argument), std::string::npos)
            << convcoreGetLastErrorString();
    };
    bad(convcoreStoreChoiceTimes(handle, "fwd", "p1", 3, names, times), "direction");
    bad(convcoreStoreChoiceTimes(handle, "", "p1", 3, names, times), "direction");
    bad(convcoreStoreChoiceTimes(handle, "nd", "p\t1", 3, names, times), "problem");
    bad(convcoreStoreChoiceTimes(handle, "nd", "p\n1", 3, names, times), "problem");
    bad(convcoreStoreChoiceTimes(handle, "nd", "p1", 0, names, times), "count");
    bad(convcoreStoreChoiceTimes(handle, "nd", "p1", 3, nullptr, times), "options");
    bad(convcoreStoreChoiceTimes(handle, "nd", "p1", 3, names, nullptr), "timesMs");
    const char* empty[] = {"taps", ""};
    bad(convcoreStoreChoiceTimes(handle, "nd", "p1", 2, empty, times), "options[1]");
    const float nan[] = {1.0f, std::nanf("")};
    bad(convcoreStoreChoiceTimes(handle, "nd", "p1", 2, names, nan), "timesMs[1]");
    const float negative[] = {-1.0f};
    bad(convcoreStoreChoiceTimes(handle, "nd", "p1", 1, names, negative), "timesMs[0]");
    bad(convcoreStoreChoiceTimes(nullptr, "nd", "p1", 3, names, times), "handle");
    bad(convcoreGetFastestChoice(handle, "bwd_filter", "p1", option, sizeof option), "direction");
    bad(convcoreGetFastestChoice(handle, "nd_schedule_forward", "p1", nullptr, 8), "option");
    bad(convcoreGetFastestChoice(handle, "nd_schedule_forward", "p1", option, 6), "capacity");  // "native" + NUL
    ASSERT_EQ(convcoreGetFastestChoice(handle, "nd_schedule_forward", "p1", option, 7), CONVCORE_STATUS_SUCCESS);
    EXPECT_STREQ(option, "native");
    EXPECT_EQ(read_text(db).find("\tnd\t"), std::string::npos);  // nothing stored by the bad calls
}

}  // namespace

// Find measures both times of every forward algorithm that ran; an algorithm with nothing to
// prepare has one time in both fields; with the default protocol, time is the per-call time and
// the order follows it. The db has both fields on every line.
TEST_F(FindTest, FindReportsBothTimes) {
    const std::vector<Perf> perf = find();
    expect_sorted(perf);
    int ran = 0;
    for (const Perf& p : perf) {
        if (p.status != CONVCORE_STATUS_SUCCESS) {
            EXPECT_EQ(p.timePerCall, -1.0f);
            EXPECT_EQ(p.timePrepared, -1.0f);
            continue;
        }
        ++ran;
        EXPECT_GE(p.timePerCall, 0.0f);
        EXPECT_GE(p.timePrepared, 0.0f);
        EXPECT_EQ(p.time, p.timePerCall) << convcoreGetFwdAlgoName(p.algo);
    }
    EXPECT_GE(ran, 8);
    // DIRECT prepares nothing: one measurement, in both fields.
    EXPECT_EQ(of(perf, CONVCORE_FWD_ALGO_DIRECT).timePerCall, of(perf, CONVCORE_FWD_ALGO_DIRECT).timePrepared);
    // The Winograd algorithms prepare U on the CPU: two measurements of their own (two medians of
    // nanosecond clocks are equal by chance for one of them, rarely for both).
    const Perf& w2 = of(perf, CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3);
    const Perf& w4 = of(perf, CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3);
    EXPECT_TRUE(w2.timePerCall != w2.timePrepared || w4.timePerCall != w4.timePrepared)
        << "the prepared-filter runs of Winograd were not timed apart";
    // Get times nothing: every time is -1.
    for (const Perf& p : get()) {
        EXPECT_EQ(p.time, -1.0f);
        EXPECT_EQ(p.timePerCall, -1.0f);
        EXPECT_EQ(p.timePrepared, -1.0f);
    }
    std::istringstream in(read_text(db));
    std::string line;
    int lines = 0;
    while (std::getline(in, line)) {
        if (line.find("\tSUCCESS\t") == std::string::npos || line[0] == '#') continue;
        ++lines;
        EXPECT_EQ(std::count(line.begin(), line.end(), '\t'), 7) << line;
    }
    EXPECT_EQ(lines, ran);
}

// The protocol decides by its own column: with times put in the db where the per-call and the
// prepared orders disagree, Find's order and time, Select (FIND and MEASURED) and plan creation
// follow the convolution descriptor's protocol, each with its own cached decision.
TEST_F(FindTest, TheFilterProtocolChoosesByItsTime) {
    find();
    // DIRECT fastest per call, WINOGRAD_4X4_3X3 fastest with prepared filters, the rest slower.
    const int rewritten = rewrite_times(db, [](const std::string& name) {
        if (name == "DIRECT") return std::string("0.25\t7");
        if (name == "WINOGRAD_4X4_3X3") return std::string("7\t0.125");
        return std::string("5\t5");
    });
    ASSERT_GE(rewritten, 8);
    convcoreClearFindCache();
    const int64_t runs = timed_runs();

    convcoreFilterProtocol_t protocol{};
    ASSERT_EQ(convcoreGetConvolutionFilterProtocol(conv, &protocol), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(protocol, CONVCORE_FILTERS_PER_CALL);  // the default
    std::vector<Perf> per_call = find();
    ASSERT_EQ(per_call[0].algo, CONVCORE_FWD_ALGO_DIRECT);
    EXPECT_EQ(per_call[0].time, 0.25f);
    EXPECT_EQ(per_call[0].timePerCall, 0.25f);
    EXPECT_EQ(per_call[0].timePrepared, 7.0f);
    size_t last_success = 0;
    for (size_t i = 0; i < per_call.size(); ++i)
        if (per_call[i].status == CONVCORE_STATUS_SUCCESS) last_success = i;
    EXPECT_EQ(per_call[last_success].algo, CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3);  // the slowest per call (7 ms)
    EXPECT_EQ(select_fwd(*this, CONVCORE_SELECT_FIND), CONVCORE_FWD_ALGO_DIRECT);
    EXPECT_EQ(select_fwd(*this, CONVCORE_SELECT_MEASURED), CONVCORE_FWD_ALGO_DIRECT);  // the db knows it
    {
        convcore::Plan plan(handle, CONVCORE_PASS_FORWARD, x, w, conv, y, CONVCORE_PLAN_SELECT_FIND);
        int algo = -1;
        ASSERT_EQ(convcoreGetConvolutionPlanAlgorithm(plan, &algo), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(algo, CONVCORE_FWD_ALGO_DIRECT);
    }

    conv.set_filter_protocol(CONVCORE_FILTERS_PREPARED);
    ASSERT_EQ(convcoreGetConvolutionFilterProtocol(conv, &protocol), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(protocol, CONVCORE_FILTERS_PREPARED);
    const std::vector<Perf> prepared = find();
    ASSERT_EQ(prepared[0].algo, CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3);
    EXPECT_EQ(prepared[0].time, 0.125f);
    EXPECT_EQ(prepared[0].timePerCall, 7.0f);
    EXPECT_EQ(prepared[0].timePrepared, 0.125f);
    for (size_t i = 1; i < prepared.size(); ++i)
        if (prepared[i].status == CONVCORE_STATUS_SUCCESS) EXPECT_LE(prepared[i - 1].timePrepared, prepared[i].timePrepared);
    EXPECT_EQ(select_fwd(*this, CONVCORE_SELECT_FIND), CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3);
    EXPECT_EQ(select_fwd(*this, CONVCORE_SELECT_MEASURED), CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3);
    {
        convcore::Plan plan(handle, CONVCORE_PASS_FORWARD, x, w, conv, y, CONVCORE_PLAN_SELECT_MEASURED);
        int algo = -1;
        ASSERT_EQ(convcoreGetConvolutionPlanAlgorithm(plan, &algo), CONVCORE_STATUS_SUCCESS);
        EXPECT_EQ(algo, CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3);
    }
    // Each protocol keeps its own decision in the cache.
    conv.set_filter_protocol(CONVCORE_FILTERS_PER_CALL);
    EXPECT_EQ(select_fwd(*this, CONVCORE_SELECT_FIND), CONVCORE_FWD_ALGO_DIRECT);
    EXPECT_EQ(timed_runs(), runs);  // everything came from the db

    EXPECT_EQ(convcoreSetConvolutionFilterProtocol(conv, convcoreFilterProtocol_t(2)), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_EQ(convcoreSetConvolutionFilterProtocol(nullptr, CONVCORE_FILTERS_PREPARED), CONVCORE_STATUS_BAD_PARAM);
    EXPECT_EQ(convcoreGetConvolutionFilterProtocol(conv, nullptr), CONVCORE_STATUS_BAD_PARAM);
}

// A db of the previous format (one time per line) is ignored, as a foreign file: its shapes are
// timed again, and the file is rewritten in the current format with both times.
TEST_F(FindTest, OldFormatDbIsIgnoredAndRewritten) {
    find();
    std::istringstream in(read_text(db));
    std::string line, old_format = "convcore-find-db 2\n";
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
        if (line[0] == '#') continue;
        old_format += line.substr(0, line.rfind('\t')) + "\n";  // drop the prepared time
    }
    ASSERT_NE(old_format.find("\tDIRECT\tSUCCESS\t"), std::string::npos);
    write_text(db, old_format);
    convcoreClearFindCache();
    const int64_t runs = timed_runs();
    expect_sorted(find());
    EXPECT_GT(timed_runs(), runs);  // nothing was taken from the old file
    const std::string text = read_text(db);
    EXPECT_EQ(text.rfind("convcore-find-db 3\n", 0), 0u) << text;
    const size_t at = text.find("\tDIRECT\tSUCCESS\t");
    ASSERT_NE(at, std::string::npos);
    const std::string direct = text.substr(at, text.find('\n', at) - at);
    EXPECT_EQ(std::count(direct.begin(), direct.end(), '\t'), 4) << direct;  // name, status, two times
}

// Select's decisions live in one cache of at most CONVCORE_SELECT_CACHE_CAPACITY entries, least
// recently used out first. A dropped decision is made again from the find-db (a db hit, nothing timed).
TEST_F(FindTest, TheDecisionCacheIsBoundedLeastRecentlyUsedFirstOut) {
    size_t entries = 1;
    ASSERT_EQ(convcoreGetSelectCacheSize(&entries), CONVCORE_STATUS_SUCCESS);
    EXPECT_EQ(entries, 0u);
    EXPECT_EQ(convcoreGetSelectCacheSize(nullptr), CONVCORE_STATUS_BAD_PARAM);

    const auto chosen = select_fwd(*this, CONVCORE_SELECT_MEASURED);  // the problem this test watches
    const int64_t runs = timed_runs(), hits = db_hits();
    // Distinct 1x1 problems (heights 1, 2, ...), chosen by the heuristic: no timing, no db.
    int height = 0;
    convcore::FilterDesc w1{CONVCORE_DATA_FLOAT, 1, 1, 1, 1};
    convcore::ConvDesc conv1{0};
    const auto fill = [&](size_t count) {
        for (size_t i = 0; i < count; ++i) {
            ++height;
            convcore::TensorDesc xi{CONVCORE_DATA_FLOAT, 1, 1, height, 1}, yi{CONVCORE_DATA_FLOAT, 1, 1, height, 1};
            convcoreConvolutionFwdAlgo_t algo{};
            ASSERT_EQ(convcoreSelectConvolutionForwardAlgorithm(handle, xi, nullptr, w1, nullptr, conv1, yi, nullptr,
                                                                CONVCORE_SELECT_HEURISTIC, &algo),
                      CONVCORE_STATUS_SUCCESS)
                << convcoreGetLastErrorString();
        }
    };
    const auto size = [] {
        size_t n = 0;
        EXPECT_EQ(convcoreGetSelectCacheSize(&n), CONVCORE_STATUS_SUCCESS);
        return n;
    };
    fill(CONVCORE_SELECT_CACHE_CAPACITY - 1);
    EXPECT_EQ(size(), size_t(CONVCORE_SELECT_CACHE_CAPACITY));  // full; the watched one is the oldest
    EXPECT_EQ(select_fwd(*this, CONVCORE_SELECT_MEASURED), chosen);  // a hit: now the most recent
    EXPECT_EQ(db_hits(), hits);
    fill(1);  // drops the oldest filler, not the watched decision
    EXPECT_EQ(size(), size_t(CONVCORE_SELECT_CACHE_CAPACITY));
    EXPECT_EQ(select_fwd(*this, CONVCORE_SELECT_MEASURED), chosen);
    EXPECT_EQ(db_hits(), hits);  // still cached
    fill(CONVCORE_SELECT_CACHE_CAPACITY);  // pushes everything older out
    EXPECT_EQ(size(), size_t(CONVCORE_SELECT_CACHE_CAPACITY));
    EXPECT_EQ(select_fwd(*this, CONVCORE_SELECT_MEASURED), chosen);
    EXPECT_EQ(db_hits(), hits + 1);  // dropped: decided again from the db
    EXPECT_EQ(timed_runs(), runs);
    convcoreClearFindCache();
    EXPECT_EQ(size(), 0u);
}
