#include "sdk/nn/errors.h"

#include <c10/util/Exception.h>

#include <exception>
#include <stdexcept>

#include "sdk/tensordict/tensordict.h"

namespace tdp::nn::detail {

void rethrow_with_context(const std::string& context) {
  try {
    throw;
  } catch (c10::Error& e) {
    e.add_context(context);
    throw;
  } catch (const KeyError& e) {
    throw KeyError(context + ": " + e.what());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(context + ": " + e.what());
  } catch (const std::out_of_range& e) {
    throw std::out_of_range(context + ": " + e.what());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(context + ": " + e.what());
  }
  // Other exception types travel unchanged.
}

}  // namespace tdp::nn::detail
