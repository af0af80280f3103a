# Helpers to build and register tests with labels. Each test source is its own program so
# that an engineer working on one area only builds that area's tests.

# sb_gtest_program(PREFIX SRC LABELS...): the gtest program PREFIX_<name of SRC>, linked with
# every workload library, its tests discovered with the labels (a GTEST_SKIP counts as
# skipped).
function(sb_gtest_program prefix src)
  get_filename_component(n ${src} NAME_WE)
  add_executable(${prefix}_${n} ${src})
  target_link_libraries(${prefix}_${n} PRIVATE shardbench::workloads GTest::gtest_main)
  if(SHARDBENCH_USE_PCH)
    target_precompile_headers(${prefix}_${n} REUSE_FROM sb_pch)
  endif()
  gtest_discover_tests(${prefix}_${n} PROPERTIES LABELS "${ARGN}" ENVIRONMENT "OMP_NUM_THREADS=2"
                       DISCOVERY_TIMEOUT 120)
endfunction()

# sb_unit_test(SRC LABELS...): unit_<name>.
function(sb_unit_test src)
  sb_gtest_program(unit ${src} ${ARGN})
endfunction()

# sb_mpi_test(SRC RANKS...): one MPI gtest program, registered once per rank count.
# The program must call MPI_Init itself (tests/mpi/mpi_main.h provides a main).
function(sb_mpi_test src)
  get_filename_component(n ${src} NAME_WE)
  add_executable(mpi_${n} ${src})
  target_link_libraries(mpi_${n} PRIVATE shardbench::workloads GTest::gtest)
  if(SHARDBENCH_USE_PCH)
    target_precompile_headers(mpi_${n} REUSE_FROM sb_pch)
  endif()
  foreach(np ${ARGN})
    add_test(NAME mpi_${n}.np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe -np ${np}
                     --mca btl self,vader $<TARGET_FILE:mpi_${n}>)
    set_tests_properties(mpi_${n}.np${np} PROPERTIES LABELS mpi TIMEOUT 600 PROCESSORS 2
                         ENVIRONMENT "OMP_NUM_THREADS=1")
  endforeach()
endfunction()
