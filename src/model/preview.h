// model/preview.h — a model as `sluice plan` sees it before any weight is
// read (a checkpoint's files, or a preset known by its config alone): the
// memory plan open_model would make, what a decode step would push through
// each kernel, what it would ask of a GPU, the dense weights' size.
// arch/preview.h makes one for the architecture the checkpoint names.
#pragma once
#include <string>

#include "model/memory_plan.h"
#include "model/options.h"
#include "model/placement.h"
#include "model/step_mix.h"

namespace sluice {

class ModelPreview {
 public:
  virtual ~ModelPreview() = default;
  // Which copy of the dense weights it would read, in words ("bf16",
  // "lossless pack PATH", a modelled one's basis).
  virtual const std::string& dense_what() const = 0;
  // The dense weights' bytes in the copy it would read.
  virtual double dense_bytes() const = 0;
  // The plan open_model makes under `o`; throws naming the minimum, as it does.
  virtual MemoryPlan plan(const ModelOptions& o) const = 0;
  virtual StepMix step_mix(const MemoryPlan& p) const = 0;
  virtual StepMix token_boundary_mix(const MemoryPlan& p) const = 0;
  // The placement request (vram, overhead, rates and overrides left to the caller).
  virtual PlacementRequest placement_request(const MemoryPlan& p) const = 0;
};

}  // namespace sluice
