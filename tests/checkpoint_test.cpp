// Recomputation gives bit-identical gradients (dropout included) and holds fewer activations.
#include "meshflow/autograd/checkpoint.h"
#include "meshflow/tensor/allocator.h"
#include "testing.h"

namespace {
using namespace mft;

struct Block {
  Tensor w1, w2, ln_w;
  std::vector<Tensor> operator()(const std::vector<Tensor>& in) const {
    Tensor h = mf::layer_norm(in[0], ln_w, Tensor());
    h = mf::dropout(mf::gelu(mf::linear(h, w1)), 0.2);
    return {mf::add(in[0], mf::linear(h, w2))};
  }
};

std::vector<std::vector<float>> run(bool use_checkpoint, int64_t* peak_bytes) {
  mf::manual_seed(17);
  Block blk{randn({64, 16}, 1, DType::kF32), randn({16, 64}, 2, DType::kF32), mf::ones({16}, DType::kF32)};
  for (Tensor* p : {&blk.w1, &blk.w2, &blk.ln_w}) p->set_requires_grad(true);
  Tensor x = randn({8, 32, 16}, 3, DType::kF32);
  x.set_requires_grad(true);
  mf::Allocator& a = mf::allocator_for(mf::cpu_device());
  a.reset_peak();
  int64_t base = a.stats().current_bytes;
  Tensor h = x;
  for (int layer = 0; layer < 4; ++layer)
    h = use_checkpoint ? mf::checkpoint(blk, {h})[0] : blk({h})[0];
  int64_t after_forward = a.stats().current_bytes - base;
  mf::sum(mf::mul(h, h)).backward();
  *peak_bytes = after_forward;
  return {h.to_vector<float>(), x.grad().to_vector<float>(), blk.w1.grad().to_vector<float>(),
          blk.w2.grad().to_vector<float>(), blk.ln_w.grad().to_vector<float>()};
}

TEST(Checkpoint, BitIdenticalGradientsAndLessMemory) {
  int64_t held_plain = 0, held_ckpt = 0;
  auto plain = run(false, &held_plain);
  auto ckpt = run(true, &held_ckpt);
  ASSERT_EQ(plain.size(), ckpt.size());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(plain[i], ckpt[i]) << "tensor " << i;
  EXPECT_LT(held_ckpt * 3, held_plain) << "activations held after forward: " << held_ckpt << " vs " << held_plain;
}

TEST(Checkpoint, NeedsAnInputThatRequiresGrad) {
  Tensor w = randn({4, 4}, 1);
  w.set_requires_grad(true);
  MFT_EXPECT_ERROR(mf::checkpoint([w](const std::vector<Tensor>& in) { return std::vector<Tensor>{mf::matmul(in[0], w)}; },
                                  {randn({2, 4}, 2)}),
                   "checkpoint", "no input requires grad");
}

}  // namespace
