#include "sdk/nn/errors.h"

#include <c10/util/Exception.h>

#include <exception>
#include <new>
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

bool is_allocation_failure(const std::exception& error) {
  if (dynamic_cast<const std::bad_alloc*>(&error) != nullptr) return true;
  if (dynamic_cast<const c10::OutOfMemoryError*>(&error) != nullptr) return true;
  const auto* torch_error = dynamic_cast<const c10::Error*>(&error);
  if (torch_error == nullptr) return false;
  const std::string& message = torch_error->msg();
  return message.find("DefaultCPUAllocator: can't allocate memory") != std::string::npos ||
         message.find("DefaultCPUAllocator: not enough memory") != std::string::npos;
}

}  // namespace tdp::nn::detail
