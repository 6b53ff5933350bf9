// A backend that forwards every op to another one, for tests that change or watch one thing at
// its interface (an op declined, the weights a loader prepares together) and otherwise run the
// inner backend. Ops without an override here run the op interface's compositions over these.
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "ops/backend.h"

namespace infera::test {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(Backend& inner) : b_(inner) {}
  std::string name() const override { return "forwarding"; }
  Device device() const override { return b_.device(); }
  bool supports(Op op, std::initializer_list<DType> dtypes) const override {
    return b_.supports(op, dtypes);
  }
  Tensor alloc(const std::string& n, DType d, Shape s) override { return b_.alloc(n, d, s); }
  Tensor prepare_weight(const Tensor& w) override { return b_.prepare_weight(w); }
  std::vector<Tensor> prepare_weights(std::span<const Tensor> ws) override {
    return b_.prepare_weights(ws);
  }
  void to_host(const Tensor& t, std::span<float> d) override { b_.to_host(t, d); }
  Batch upload_batch(const BatchDesc& d) override { return b_.upload_batch(d); }
  void embedding(const Tensor& t, const Tensor& i, Tensor& o) override { b_.embedding(t, i, o); }
  void rmsnorm(const Tensor& x, const Tensor& w, float e, Tensor& o) override {
    b_.rmsnorm(x, w, e, o);
  }
  void matmul(const Tensor& x, const Tensor& w, Tensor& o) override { b_.matmul(x, w, o); }
  void rope(Tensor& x, const Tensor& p, double t) override { b_.rope(x, p, t); }
  void kv_write(const Tensor& k, const Tensor& v, KvLayer& c, const Batch& b) override {
    b_.kv_write(k, v, c, b);
  }
  void attention(const Tensor& q, const KvLayer& c, const Batch& b, const AttentionParams& p,
                 Tensor& o) override {
    b_.attention(q, c, b, p, o);
  }
  void swiglu(const Tensor& g, const Tensor& u, Tensor& o) override { b_.swiglu(g, u, o); }
  void add(const Tensor& a, const Tensor& b, Tensor& o) override { b_.add(a, b, o); }
  void gather_rows(const Tensor& s, const Tensor& r, Tensor& d) override {
    b_.gather_rows(s, r, d);
  }

 protected:
  Backend& inner() const { return b_; }

 private:
  Backend& b_;
};

}  // namespace infera::test
