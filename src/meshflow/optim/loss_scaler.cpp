#include "meshflow/optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "meshflow/core/error.h"

namespace mf::optim {

LossScaler::LossScaler(const LossScalerOptions& o) : o_(o) {
  if (!o_.enabled) return;
  MF_CHECK(o_.fixed_scale >= 0 && std::isfinite(o_.fixed_scale), "train.amp.loss_scale must be >= 0 (0: dynamic), got ",
           o_.fixed_scale);
  MF_CHECK(o_.initial_scale > 0 && std::isfinite(o_.initial_scale), "train.amp.initial_loss_scale must be positive, got ",
           o_.initial_scale);
  MF_CHECK(o_.min_scale > 0 && o_.min_scale <= o_.initial_scale, "train.amp.min_loss_scale must be in (0, ",
           o_.initial_scale, "], got ", o_.min_scale);
  MF_CHECK(o_.window >= 1, "train.amp.loss_scale_window must be >= 1, got ", o_.window);
  MF_CHECK(o_.hysteresis >= 1, "train.amp.hysteresis must be >= 1, got ", o_.hysteresis);
  s_.scale = o_.fixed_scale > 0 ? o_.fixed_scale : o_.initial_scale;
  s_.hysteresis_tracker = o_.hysteresis;
}

void LossScaler::update(bool found_inf) {
  if (!dynamic()) return;
  if (found_inf) {
    s_.growth_tracker = 0;
    if (--s_.hysteresis_tracker <= 0) s_.scale = std::max(s_.scale * 0.5, o_.min_scale);
    return;
  }
  if (++s_.growth_tracker == o_.window) {
    s_.growth_tracker = 0;
    s_.hysteresis_tracker = o_.hysteresis;
    s_.scale *= 2.0;
  }
}

}  // namespace mf::optim
