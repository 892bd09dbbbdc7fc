#include "model/state.h"

namespace sluice {

ModelState& ModelState::operator=(const ModelState& o) {
  if (this == &o) return *this;
  if (!o.d_) d_.reset();
  else if (d_) d_->assign(*o.d_);
  else d_ = o.d_->clone();
  return *this;
}

}  // namespace sluice
