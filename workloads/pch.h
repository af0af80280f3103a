// Precompiled header for the LibTorch side: the heavy headers every workload TU uses.
#pragma once
#include <torch/types.h>
#include <fmt/format.h>
#include <mpi.h>
