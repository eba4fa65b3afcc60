// The one Catch2 main shared by every test executable, with a listener that counts the test
// cases that skip themselves: Catch2 v2 has no skip, so such a case WARNs a message starting
// "skipped:" and returns. At the end of the run the listener prints "skipped test cases: N",
// which scripts/summarize_tests.py reads so that skips are not counted as passes.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <cstdio>

namespace {

class SkipCounter : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;

  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    skipping_ = false;
    TestEventListenerBase::testCaseStarting(info);
  }

  bool assertionEnded(const Catch::AssertionStats& stats) override {
    const Catch::AssertionResult& r = stats.assertionResult;
    if (r.getResultType() == Catch::ResultWas::Warning && r.getMessage().rfind("skipped:", 0) == 0) skipping_ = true;
    return true;
  }

  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    if (skipping_ && stats.totals.assertions.failed == 0) ++skipped_;
    TestEventListenerBase::testCaseEnded(stats);
  }

  void testRunEnded(const Catch::TestRunStats& stats) override {
    if (skipped_ > 0) std::printf("skipped test cases: %d\n", skipped_);
    TestEventListenerBase::testRunEnded(stats);
  }

 private:
  bool skipping_ = false;
  int skipped_ = 0;
};

}  // namespace

CATCH_REGISTER_LISTENER(SkipCounter)
