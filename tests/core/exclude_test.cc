// Exclusion rules (core/exclude.h) as .gitignore reads them.
#include "sigilfs/core/exclude.h"

#include <gtest/gtest.h>

namespace sigilfs::core {
namespace {

ExcludeRules Rules(std::vector<std::string> lines) {
  auto rules = ExcludeRules::Parse(lines);
  EXPECT_TRUE(rules.ok()) << rules.status().ToString();
  return std::move(rules).value();
}

TEST(ExcludeRulesTest, ANameWithoutSlashMatchesAtAnyDepth) {
  const ExcludeRules r = Rules({"*.o", "cache"});
  EXPECT_TRUE(r.Excluded("main.o", false));
  EXPECT_TRUE(r.Excluded("src/deep/main.o", false));
  EXPECT_FALSE(r.Excluded("main.c", false));
  EXPECT_FALSE(r.Excluded("main.o.d", false));
  EXPECT_FALSE(r.Excluded("home/.cache", false));
  EXPECT_TRUE(r.Excluded("home/cache", true));
  EXPECT_TRUE(r.Excluded("cache", false));
}

TEST(ExcludeRulesTest, ASlashAnchorsThePatternAtTheRoot) {
  const ExcludeRules r = Rules({"/build", "docs/*.tmp"});
  EXPECT_TRUE(r.Excluded("build", true));
  EXPECT_FALSE(r.Excluded("src/build", true));
  EXPECT_TRUE(r.Excluded("docs/a.tmp", false));
  EXPECT_FALSE(r.Excluded("docs/sub/a.tmp", false));  // '*' stops at '/'
  EXPECT_FALSE(r.Excluded("other/docs/a.tmp", false));
}

TEST(ExcludeRulesTest, DoubleStarsCrossDirectories) {
  const ExcludeRules r = Rules({"**/node_modules", "logs/**", "a/**/z"});
  EXPECT_TRUE(r.Excluded("node_modules", true));
  EXPECT_TRUE(r.Excluded("web/app/node_modules", true));
  EXPECT_TRUE(r.Excluded("logs/2026/x.log", false));
  EXPECT_FALSE(r.Excluded("logs", true));
  EXPECT_TRUE(r.Excluded("a/z", false));
  EXPECT_TRUE(r.Excluded("a/b/c/z", false));
  EXPECT_FALSE(r.Excluded("a/b/c/zz", false));
}

TEST(ExcludeRulesTest, DirectoryOnlyNegationClassesAndComments) {
  const ExcludeRules r = Rules(
      {"# a comment", "", "tmp/", "*.log", "!keep.log", "[ab]?.bin", "\\#literal", "trailing   "});
  EXPECT_TRUE(r.Excluded("tmp", true));
  EXPECT_FALSE(r.Excluded("tmp", false));  // a file called tmp stays
  EXPECT_TRUE(r.Excluded("x.log", false));
  EXPECT_FALSE(r.Excluded("keep.log", false));
  EXPECT_FALSE(r.Excluded("sub/keep.log", false));
  EXPECT_TRUE(r.Excluded("a1.bin", false));
  EXPECT_TRUE(r.Excluded("bz.bin", false));
  EXPECT_FALSE(r.Excluded("c1.bin", false));
  EXPECT_FALSE(r.Excluded("# a comment", false));
  EXPECT_TRUE(r.Excluded("#literal", false));
  EXPECT_TRUE(r.Excluded("trailing", false));
  // The last rule that matches decides.
  const ExcludeRules back = Rules({"!x", "x"});
  EXPECT_TRUE(back.Excluded("x", false));
  EXPECT_FALSE(Rules({"[!a]"}).Excluded("a", false));
  EXPECT_TRUE(Rules({"[!a]"}).Excluded("b", false));
  EXPECT_TRUE(Rules({"a[b"}).Excluded("a[b", false));  // no ']': a literal '['
}

TEST(ExcludeRulesTest, ADoubleStarInsideANameIsOneStar) {
  const ExcludeRules r = Rules({"a**b"});
  EXPECT_TRUE(r.Excluded("axyb", false));
  EXPECT_FALSE(r.Excluded("ax/yb", false));
  EXPECT_TRUE(Rules({"x/**"}).Excluded("x/y/z", false));
  EXPECT_FALSE(Rules({"x/a**"}).Excluded("x/ab/c", false));
}

// Many stars against a long name that almost matches: a backtracking matcher takes about
// C(125, 5) steps here; this one takes |pattern| x |name|.
TEST(ExcludeRulesTest, ManyStarsAgainstALongNameStayCheap) {
  std::string name;
  for (int i = 0; i < 125; ++i) name += "-a";
  const ExcludeRules r = Rules({"*-*-*-*-*-*-*-*.log", "*a*a*a*a*a*a*a*a*b"});
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(r.Excluded(name, false));
  EXPECT_TRUE(r.Excluded(name + ".log", false));
}

TEST(ExcludeRulesTest, PatternsThatCanMatchNothingAreRefused) {
  EXPECT_EQ(ExcludeRules::Parse({"/"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ExcludeRules::Parse({"!"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ExcludeRules::Parse({"dangling\\"}).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(Rules({"two\\\\"}).Excluded("two\\", false));
  EXPECT_TRUE(ExcludeRules::Parse({}).ok());
  EXPECT_TRUE(ExcludeRules::Parse({}).value().empty());
}

}  // namespace
}  // namespace sigilfs::core
