# The trainer's K3 forward pass (train/k3model.py) against the k3-tiny golden fixture.
# Registered only where Debian's python3-torch and python3-numpy are installed for /usr/bin/python3;
# elsewhere models/nanok3/fixture_check.log holds the committed result.
execute_process(COMMAND /usr/bin/python3 -c "import torch, numpy"
                RESULT_VARIABLE SLUICE_TRAINER_TORCH_RC OUTPUT_QUIET ERROR_QUIET)
if(SLUICE_TRAINER_TORCH_RC EQUAL 0)
  add_test(NAME trainer_fixture
           COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/train/check_fixture.py
                   ${CMAKE_SOURCE_DIR}/tests/fixtures/k3-tiny)
  set_tests_properties(trainer_fixture PROPERTIES LABELS model TIMEOUT 300)
else()
  message(STATUS "trainer_fixture: /usr/bin/python3 cannot import torch and numpy; test not registered")
endif()
