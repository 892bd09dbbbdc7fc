// model/step_mix.h — what one decode step pushes through each kernel and
// reads from disk, by class (k3/step_mix.h computes K3's): the bytes both
// `sluice plan` projects from and `sluice bench` records beside its measured
// compute (so a measured step on one model scales to another's mix).
#pragma once

namespace sluice {

struct StepMix {
  // Weight bytes each kernel reads per decode step.
  double bf16 = 0;     // bf16 matrices (spine, head, routers)
  double int8 = 0;     // int8 pack rows
  double mxfp4 = 0;    // the routed experts a token touches (top-k per MoE layer)
  double decoded = 0;  // lossless blocks decoded (the streamed lossless pieces), as bf16 bytes
  // Disk bytes of the spine per step.
  double layers_read = 0;      // streamed layer pieces
  double head_read = 0;        // the head, when streamed
  double spine_full_read = 0;  // the whole spine, resident or not
  // Experts: MoE layers and the spans a token touches.
  int moe_layers = 0;
  double touched = 0;  // expert spans per token (moe_layers x top-k)
};

}  // namespace sluice
