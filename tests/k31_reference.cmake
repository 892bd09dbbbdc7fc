# Kimi K3.1's sparse attention against an independent PyTorch reference (train/k31model.py, written
# from docs/k31-spec.md without reading the C++; train/README.md says how independent it is).
#   k31_reference_self: the reference's own checks (hand-computed selection, top-k >= context ==
#                       dense MLA, prefill == token-by-token with the indexer key cache, config/loader)
#   k31_reference:      make-model --preset k31-tiny, `sluice logits` (prefill and step) on 64 and
#                       600 ids, each within 1e-3 of max|logit| of the reference, argmax identical
# Registered only where /usr/bin/python3 imports torch and numpy (Debian's python3-torch).
execute_process(COMMAND /usr/bin/python3 -c "import torch, numpy"
                RESULT_VARIABLE SLUICE_K31_TORCH_RC OUTPUT_QUIET ERROR_QUIET)
if(SLUICE_K31_TORCH_RC EQUAL 0)
  add_test(NAME k31_reference_self
           COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/train/check_k31_self.py
                   ${CMAKE_SOURCE_DIR}/tests/fixtures/k3-tiny/model)
  set_tests_properties(k31_reference_self PROPERTIES LABELS model TIMEOUT 120)
  add_test(NAME k31_reference
           COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/train/k31_e2e.py $<TARGET_FILE:sluice>
                   ${CMAKE_CURRENT_BINARY_DIR}/k31_reference)
  set_tests_properties(k31_reference PROPERTIES LABELS model TIMEOUT 300)
else()
  message(STATUS "k31_reference: /usr/bin/python3 cannot import torch and numpy; tests not registered")
endif()
