// A non-owning reference to a callable (C++26's std::function_ref, which g++ 12 lacks): what a
// function that only calls its argument before returning should take. Unlike std::function it
// never copies the callable, so it never allocates: a lambda capturing more than two references
// does not fit std::function's 16-byte inline buffer and cost a heap allocation per parallel
// section, hundreds per decode step. The referenced callable must outlive the FunctionRef (a
// lambda passed straight to the call lives until the call returns).
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace infera {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
           std::is_invocable_r_v<R, F&, Args...>) FunctionRef(F&& f)
  noexcept  // NOLINT(google-explicit-constructor): binds like a reference
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace infera
