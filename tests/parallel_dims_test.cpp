// The named parallel dimensions: their table, sizes by name, the derived size, the row-major
// coordinates the device mesh lays ranks out by, and the errors that name keys and dimensions.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "meshflow/config/config.h"
#include "meshflow/core/error.h"
#include "meshflow/global/parallel_dims.h"
#include "meshflow/parallel/groups.h"

namespace {

using mf::global::ParallelDims;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const mf::Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(ParallelDims, NamedSizesInMeshOrder) {
  const ParallelDims d{{"tp", 2}, {"pp", 3}};
  ASSERT_EQ(d.count(), mf::global::dim_specs().size());
  EXPECT_STREQ(d.name(0), "pp");  // pipeline stages outermost, tensor parallelism innermost
  EXPECT_STREQ(d.name(d.count() - 1), "tp");
  EXPECT_EQ(d.size("pp"), 3);
  EXPECT_EQ(d.size("dp"), 1);
  EXPECT_EQ(d.size("tp"), 2);
  EXPECT_EQ(d.product(), 6);
  EXPECT_EQ(d.batch_ranks(), 1);
  EXPECT_EQ(d.size("cp"), 1);
  EXPECT_EQ(d.str(), "pp=3, dp=1, cp=1, tp=2");
  EXPECT_EQ(d.keys_str(),
            "pipeline_parallel_size=3, data_parallel_size=1, context_parallel_size=1, tensor_parallel_size=2");
  EXPECT_EQ(d.named(), (std::map<std::string, int64_t>{{"cp", 1}, {"dp", 1}, {"pp", 3}, {"tp", 2}}));
  EXPECT_EQ(d.overrides().front(), "train.dist.pipeline_parallel_size=3");
  const std::string e = error_of([&] { (void)d.size("ep"); });
  EXPECT_NE(e.find("no parallel dimension named 'ep' (the dimensions: pp, dp, cp, tp)"), std::string::npos) << e;
  // Context parallelism places the layers (its sequence slices) and takes no rows of the batch.
  EXPECT_EQ(mf::global::layer_dims(), (std::vector<std::string>{"cp", "tp"}));
  EXPECT_EQ(ParallelDims({{"dp", 2}, {"cp", 2}}).batch_ranks(), 2);
}

TEST(ParallelDims, CoordinatesAreRowMajor) {
  const ParallelDims d{{"pp", 2}, {"dp", 3}, {"tp", 2}};
  for (int64_t i = 0; i < d.product(); ++i) {
    const std::vector<int64_t> c = d.coordinate_of(i);
    EXPECT_EQ(c, (std::vector<int64_t>{i / 6, (i / 2) % 3, 0, i % 2})) << i;
    EXPECT_EQ(d.index_of(c), i);
  }
  EXPECT_THROW(d.coordinate_of(12), mf::Error);
}

TEST(ParallelDims, ResolvedFromTheWorldSize) {
  mf::Config c;
  c.set("train.dist.data_parallel_size", "0");
  c.set("train.dist.tensor_parallel_size", "2");
  const ParallelDims req = ParallelDims::from_config(c);
  EXPECT_EQ(req.size("dp"), 0);
  EXPECT_EQ(req.resolved(8), (ParallelDims{{"dp", 4}, {"tp", 2}}));
  EXPECT_EQ(req.resolved(8).batch_ranks(), 4);
  std::string e = error_of([&] { (void)req.resolved(7); });
  EXPECT_NE(e.find("world of 7 ranks"), std::string::npos) << e;
  EXPECT_NE(e.find("cannot be derived"), std::string::npos) << e;
  e = error_of([&] { (void)ParallelDims({{"tp", 3}}).resolved(4); });
  EXPECT_NE(e.find("pp x dp x cp x tp = 1 x 1 x 1 x 3 = 3 does not equal the world size 4"), std::string::npos) << e;
  e = error_of([&] { (void)ParallelDims({{"pp", 0}, {"dp", 0}}).resolved(4); });
  EXPECT_NE(e.find("at most one size may be 0"), std::string::npos) << e;
}

// One process: every group null, every size 1, every index 0; a group is asked for by name.
TEST(NamedGroups, OneProcessAndUnknownNames) {
  const mf::parallel::NamedGroups g;
  for (const char* name : {"pp", "dp", "cp", "tp", "stage", "dp_cp", "tied", "world"}) {
    EXPECT_EQ(g.get(name), nullptr) << name;
    EXPECT_EQ(g.size(name), 1) << name;
    EXPECT_EQ(g.rank(name), 0) << name;
  }
  EXPECT_EQ(g.dims(), ParallelDims());
  EXPECT_EQ(g.coordinate(), std::vector<int64_t>(ParallelDims().count(), 0));
  EXPECT_TRUE(g.main_rank());
  EXPECT_TRUE(g.last_stage());
  const std::string e = error_of([&] { (void)g.size("all"); });
  EXPECT_NE(e.find("no group named 'all' (the groups: pp, dp, cp, tp, stage, dp_cp, tied, world)"), std::string::npos) << e;
}

}  // namespace
