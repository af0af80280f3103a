// The message of the sb::Error a call throws, for tests that assert refusals word for word.
#pragma once
#include <string>

#include "harness/core/check.h"

namespace sb::test {

// The what() of the sb::Error `f` throws; `none` when it throws nothing.
template <class F>
std::string error_of(F f, const std::string& none = "") {
  try {
    f();
  } catch (const sb::Error& e) {
    return e.what();
  }
  return none;
}

}  // namespace sb::test
