// Placement: printing, interning, rank <-> coordinate maps and validation.
#include <gtest/gtest.h>

#include "meshflow/core/error.h"
#include "meshflow/global/placement.h"

namespace {

using mf::DeviceType;
using mf::global::placement;

TEST(DistPlacement, PrintingAndInterning) {
  const auto* p = placement(DeviceType::kCPU, {2, 2}, {0, 1, 2, 3});
  EXPECT_EQ(p->str(), "cpu:[0,1,2,3] as (2, 2)");
  EXPECT_EQ(p, placement(DeviceType::kCPU, {2, 2}, {0, 1, 2, 3}));
  EXPECT_NE(p, placement(DeviceType::kCPU, {4}, {0, 1, 2, 3}));
  EXPECT_NE(p, placement(DeviceType::kCPU, {2, 2}, {0, 2, 1, 3}));
  EXPECT_NE(p, placement(DeviceType::kCUDA, {2, 2}, {0, 1, 2, 3}));
  EXPECT_EQ(placement(DeviceType::kCPU, {4}, {0, 1, 2, 3}), placement(DeviceType::kCPU, std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(placement(DeviceType::kCUDA, {3}, {4, 5, 6})->str(), "cuda:[4,5,6] as (3,)");
  EXPECT_EQ(p->size(), 4);
  EXPECT_EQ(p->ndim(), 2);
}

TEST(DistPlacement, CoordinatesAreRowMajor) {
  const auto* p = placement(DeviceType::kCPU, {2, 3}, {10, 11, 12, 13, 14, 15});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      const int r = 10 + i * 3 + j;
      EXPECT_EQ(p->rank_at({i, j}), r);
      auto c = p->coordinate_of(r);
      ASSERT_TRUE(c.has_value());
      EXPECT_EQ(*c, (std::vector<int64_t>{i, j}));
    }
  EXPECT_FALSE(p->coordinate_of(0).has_value());
  EXPECT_FALSE(p->contains(16));
  EXPECT_TRUE(p->contains(12));
  EXPECT_THROW(p->rank_at({2, 0}), mf::Error);
  EXPECT_THROW(p->rank_at({0}), mf::Error);
}

TEST(DistPlacement, Validation) {
  EXPECT_THROW(placement(DeviceType::kCPU, {2, 2}, {0, 1, 2}), mf::Error);
  EXPECT_THROW(placement(DeviceType::kCPU, {2, 2}, {0, 1, 2, 2}), mf::Error);
  EXPECT_THROW(placement(DeviceType::kCPU, {0}, {}), mf::Error);
  EXPECT_THROW(placement(DeviceType::kCPU, std::vector<int64_t>{}, std::vector<int>{}), mf::Error);
  EXPECT_THROW(placement(DeviceType::kCPU, {1}, {-1}), mf::Error);
  try {
    placement(DeviceType::kCPU, {2, 2}, {0, 1, 2});
  } catch (const mf::Error& e) {
    EXPECT_NE(std::string(e.what()).find("mesh (2, 2) holds 4 ranks but 3 were given"), std::string::npos) << e.what();
  }
}

}  // namespace
