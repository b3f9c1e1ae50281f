// Loss scaling for fp16 training (Megatron-LM's DynamicGradScaler, with its config names).
//
// fp16 has 5 exponent bits: activation gradients of a GPT fall below its smallest subnormal
// (6e-8) and vanish. The trainer multiplies the loss (the backward seed) by scale(), so every
// gradient is computed scale() x too large, and divides the parameters' gradients by it in f32
// (the optimizer's grad scale) before they update the f32 master weights. A step whose gradients
// hold an inf or NaN anywhere (on any rank) is skipped, then:
//   - overflow: the growth count restarts and, once `hysteresis` overflows have been seen since
//     the last growth, the scale is halved (never below min_scale);
//   - `window` good steps in a row: the scale doubles and the hysteresis count is refilled.
// A fixed scale (fixed_scale > 0) never changes; overflowing steps are still skipped. Disabled
// (bf16, f32): scale 1, never changes.
#pragma once
#include <cstdint>

namespace mf::optim {

struct LossScalerOptions {
  bool enabled = false;        // dynamic or fixed scaling (fp16)
  double initial_scale = 65536.0;  // 2^16 (train.amp.initial_loss_scale)
  double min_scale = 1.0;          // train.amp.min_loss_scale
  int64_t window = 1000;           // good steps before the scale doubles (train.amp.loss_scale_window)
  int64_t hysteresis = 2;          // overflows tolerated before the scale halves (train.amp.hysteresis)
  double fixed_scale = 0.0;        // > 0: a constant scale (train.amp.loss_scale)
};

// The scaler's state, saved in checkpoints so that a resumed run scales exactly as the original.
struct LossScalerState {
  double scale = 1.0;
  int64_t growth_tracker = 0;      // good steps since the last overflow or growth
  int64_t hysteresis_tracker = 0;  // overflows left before the next backoff
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerOptions& o = {});  // validates (throws naming the key)
  double scale() const { return s_.scale; }
  bool enabled() const { return o_.enabled; }
  bool dynamic() const { return o_.enabled && o_.fixed_scale <= 0; }
  // After every step: `found_inf` says whether its gradients overflowed (and it was skipped).
  void update(bool found_inf);
  const LossScalerState& state() const { return s_; }
  void set_state(const LossScalerState& s) { s_ = s; }

 private:
  LossScalerOptions o_;
  LossScalerState s_;
};

}  // namespace mf::optim
