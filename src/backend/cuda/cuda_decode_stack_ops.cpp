// Backend::decoder_stack on the CUDA backend: one decode row of one sequence through every layer
// as one kernel (decode_stack.cu; CudaOptions::decode_stack). Anything the kernel does not hold
// (more rows, other dtypes, shapes past its register budget, a grid that cannot be co-resident)
// runs the GEMM path (cuda_gemm_stack_ops.cpp) or the composition, so the op is always correct.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/decode_stack.h"
#include "backend/cuda/op_checks.h"
#include "infera/error.h"

namespace infera::cuda {
namespace {

bool bf16_on_device(const Tensor* t, std::initializer_list<int64_t> shape) {
  if (!t || t->empty() || t->device() != Device::CUDA || t->dtype() != DType::BF16 ||
      reinterpret_cast<uintptr_t>(t->data()) % 16 != 0)
    return false;
  // Norm weights may be [d] or [1, d]: compare element counts for rank-1 shapes.
  if (shape.size() == 1) return t->numel() == *shape.begin();
  return t->shape() == Shape(shape);
}

}  // namespace

void CudaBackend::decoder_stack(Tensor& x, std::span<const DecoderLayerRefs> layers,
                                const Batch& batch, const DecoderStackParams& p,
                                const DecoderStackScratch& s) {
  const char* op = "decoder_stack";
  // Past one row: the GEMM path where it applies (cuda_gemm_stack_ops.cpp), else the fused ops.
  auto composed = [&] {
    if (!record_gemm_stack(x, layers, batch, p, s)) Backend::decoder_stack(x, layers, batch, p, s);
  };
  if (!options_.decode_stack || !options_.fused || options_.exact_f32 || layers.empty() ||
      x.empty() || x.device() != Device::CUDA || x.dtype() != DType::F32 || x.rank() != 2 ||
      x.dim(0) != 1 || batch.desc == nullptr || batch.num_tokens() != 1 || batch.num_seqs() != 1)
    return composed();
  const DecodeStackLimits lim = decode_stack_limits();
  const int64_t d = x.dim(1), hd = p.head_dim, hq = p.q_heads, hkv = p.kv_heads;
  const DecoderLayerRefs& first = layers[0];
  const int64_t f = first.gate_proj && first.gate_proj->rank() == 2 ? first.gate_proj->dim(0) : 0;
  const bool head_ok = hd == 16 || hd == 32 || hd == 64 || hd == 128;
  if (!head_ok || hkv <= 0 || hq % hkv != 0 || hq / hkv > lim.max_group || d % 8 != 0 ||
      d > lim.max_hidden || (hq * hd) % 8 != 0 || hq * hd > lim.max_q_width || f <= 0 ||
      f % 8 != 0 || f > lim.max_f || reinterpret_cast<uintptr_t>(x.data()) % 16 != 0)
    return composed();
  // The grid: one block per SM, co-resident (asked once per shape); each warp at most two q/k/v
  // rows, two gate/up pairs, one o and one down row.
  const int64_t blocks = ctx_->properties().multiProcessorCount;
  const int64_t warps = blocks * (lim.threads / 32);
  if ((hq + 2 * hkv) * hd > 2 * warps || f > 2 * warps || d > warps || hkv > blocks)
    return composed();
  // Every layer: bf16 weights of the model's shapes, bf16 pools of one shape.
  const KvLayer* cache0 = first.cache;
  if (!cache0 || cache0->keys.empty() || cache0->keys.rank() != 4) return composed();
  const int64_t num_blocks = cache0->keys.dim(1), block_size = cache0->keys.dim(2);
  std::vector<const void*> table;
  table.reserve(layers.size() * 13);
  for (const DecoderLayerRefs& w : layers) {
    const KvLayer* c = w.cache;
    if (!bf16_on_device(w.attn_norm, {d}) || !bf16_on_device(w.q_proj, {hq * hd, d}) ||
        !bf16_on_device(w.k_proj, {hkv * hd, d}) || !bf16_on_device(w.v_proj, {hkv * hd, d}) ||
        !bf16_on_device(w.q_norm, {hd}) || !bf16_on_device(w.k_norm, {hd}) ||
        !bf16_on_device(w.o_proj, {d, hq * hd}) || !bf16_on_device(w.mlp_norm, {d}) ||
        !bf16_on_device(w.gate_proj, {f, d}) || !bf16_on_device(w.up_proj, {f, d}) ||
        !bf16_on_device(w.down_proj, {d, f}) || !c ||
        !bf16_on_device(&c->keys, {hkv, num_blocks, block_size, hd}) ||
        !bf16_on_device(&c->values, {hkv, num_blocks, block_size, hd}))
      return composed();
    for (const Tensor* t : {w.attn_norm, w.q_proj, w.k_proj, w.v_proj, w.q_norm, w.k_norm,
                            w.o_proj, w.mlp_norm, w.gate_proj, w.up_proj, w.down_proj})
      table.push_back(t->data());
    table.push_back(c->keys.data());
    table.push_back(c->values.data());
  }
  // The batch: checked as qk_norm_rope_kv_write and attention check theirs.
  const BatchDesc& desc = *batch.desc;
  INFERA_CUDA_EXPECT(!batch.positions.empty() && !batch.slots.empty() &&
                         !batch.seq_lens.empty() && !batch.block_table.empty() &&
                         !desc.block_table.empty(),
                     op, "the batch needs positions, slots, seq_lens and a block table");
  const UploadedBatch& u = find_batch(batch.positions, kPositions, op);
  const UploadedBatch& ub = find_batch(batch.block_table, kBlockTable, op);
  INFERA_CUDA_EXPECT(u.desc == &desc && ub.desc == &desc, op, "the batch's tensors are not one upload");
  INFERA_CUDA_EXPECT(u.min[kPositions] >= 0, op,
                     "negative position " + std::to_string(u.min[kPositions]));
  const int64_t capacity = num_blocks * block_size;
  INFERA_CUDA_EXPECT(u.min[kSlots] >= 0 && u.max[kSlots] < capacity, op,
                     "slot " + std::to_string(u.min[kSlots] < 0 ? u.min[kSlots] : u.max[kSlots]) +
                         " outside the cache's " + std::to_string(capacity));
  INFERA_CUDA_EXPECT(desc.seq_lens[0] >= 1 && desc.seq_lens[0] <= capacity, op,
                     "sequence length " + std::to_string(desc.seq_lens[0]) + " for a cache of " +
                         std::to_string(capacity) + " slots");
  expect_tables_fit(ub, *cache0, op);
  const RopeTable& rope = rope_table(p.rope_theta, hd, u.max[kPositions]);

  DecodeStackArgs a{};
  a.num_layers = static_cast<int64_t>(layers.size());
  a.d = d;
  a.f = f;
  a.hq = hq;
  a.hkv = hkv;
  a.head_dim = hd;
  a.block_size = block_size;
  a.num_blocks = num_blocks;
  a.max_blocks = desc.max_blocks;
  a.splits = options_.decode_stack_splits > 0 ? std::min(options_.decode_stack_splits, blocks / hkv)
                                               : blocks / hkv;
  a.blocks = blocks;
  a.eps = p.eps;
  a.scale = p.scale;
  // The weights through the shared-memory ring, as large as a block may have (less 1 KiB for the
  // static shared memory) or CudaOptions::decode_stack_ring_kib, where it holds the largest
  // stage and the grid stays co-resident; else through registers.
  auto fits = [&] {
    const int64_t smem = decode_stack_smem_bytes(a);
    const int64_t variant = hd + 1024 * (hq / hkv) + (int64_t{a.ring_bytes > 0} << 20);
    const std::pair<int64_t, int64_t> key{variant, smem};
    auto fit = decode_stack_fit_.find(key);
    if (fit == decode_stack_fit_.end())
      fit = decode_stack_fit_.emplace(key, decode_stack_max_blocks(a, smem)).first;
    return blocks <= fit->second;
  };
  a.ring_bytes = 0;
  if (options_.decode_stack_smem) {
    const int64_t optin = ctx_->properties().sharedMemPerBlockOptin;
    int64_t ring = (optin - 1024 - decode_stack_smem_bytes(a)) / 128 * 128;
    if (options_.decode_stack_ring_kib > 0)
      ring = std::min(ring, options_.decode_stack_ring_kib * 1024 / 128 * 128);
    if (ring >= decode_stack_ring_min_bytes(a)) {
      a.ring_bytes = ring;
      if (!fits()) a.ring_bytes = 0;
    }
  }
  if (!a.ring_bytes && !fits()) return composed();
  a.l2_prefetch = options_.decode_stack_l2 && !a.ring_bytes ? 1 : 0;

  // The layer table on the device, uploaded once per model and cache.
  const void* device_table = nullptr;
  for (const auto& [host, dev] : decode_stack_tables_)
    if (host == table) device_table = dev.data();
  if (!device_table) {
    if (decode_stack_tables_.size() >= 8) decode_stack_tables_.erase(decode_stack_tables_.begin());
    static_assert(sizeof(DecodeStackLayer) == 13 * sizeof(void*));
    Tensor dev = device_tensor("decode_stack.layers", DType::I32,
                               {static_cast<int64_t>(table.size() * sizeof(void*) / 4)});
    ctx_->upload(dev.data(), table.data(), table.size() * sizeof(void*));
    device_table = dev.data();
    decode_stack_tables_.emplace_back(table, std::move(dev));
  }
  a.layers = static_cast<const DecodeStackLayer*>(device_table);

  // Scratch: q/k/v, attention output, h, then the split partials; the counters zeroed.
  const int64_t rows_qkv = (hq + 2 * hkv) * hd, qw = hq * hd;
  const int64_t floats = rows_qkv + qw + f + a.splits * hq * (2 + hd) + 64;
  auto* scratch = static_cast<float*>(
      ctx_->scratch(DeviceContext::kDecodeStackScratch, static_cast<size_t>(floats) * 4));
  auto round4 = [](int64_t n) { return (n + 3) / 4 * 4; };  // float4 alignment of each part
  a.qkv = scratch;
  a.attn = a.qkv + round4(rows_qkv);
  a.h = a.attn + round4(qw);
  a.partial_ml = a.h + round4(f);
  a.partial_out = a.partial_ml + round4(a.splits * hq * 2);
  a.sync = static_cast<unsigned*>(ctx_->zeroed_scratch(
      DeviceContext::kDecodeStackSync, static_cast<size_t>(2 + hkv) * sizeof(unsigned)));
  a.x = x.data_as<float>();
  a.positions = batch.positions.data_as<const int32_t>();
  a.slots = batch.slots.data_as<const int32_t>();
  a.seq_lens = batch.seq_lens.data_as<const int32_t>();
  a.block_table = batch.block_table.data_as<const int32_t>();
  a.cos = rope.cos.data_as<const float>();
  a.sin = rope.sin.data_as<const float>();
  if (!options_.decode_stack_trace.empty()) {
    const int64_t words = (5 * a.num_layers) * blocks * 2;
    if (decode_stack_trace_.empty() || decode_stack_trace_.numel() < words * 2)
      decode_stack_trace_ = device_tensor("decode_stack.trace", DType::I32, {words * 2});
    a.trace = static_cast<uint64_t*>(decode_stack_trace_.data());
  }
  ctx_->record(launch_decode_stack, a, note(op, "decode_stack", {&x, first.q_proj, &cache0->keys}));
  ++decode_stack_kernels_;
  if (a.ring_bytes) ++decode_stack_ring_;
  shadow_ = {};  // x changed; no shadow of it is fresh
}

void CudaBackend::write_decode_stack_trace() {
  if (decode_stack_trace_.empty()) return;
  std::vector<float> host(static_cast<size_t>(decode_stack_trace_.numel()));
  // to_host copies F32 tensors; the trace's bytes go through it unchanged as 32-bit words.
  Tensor as_f32(decode_stack_trace_.name(), DType::F32, decode_stack_trace_.shape(), Device::CUDA,
                decode_stack_trace_.data(), nullptr);
  to_host(as_f32, host);
  if (FILE* f = std::fopen(options_.decode_stack_trace.c_str(), "wb")) {
    std::fwrite(host.data(), 4, host.size(), f);
    std::fclose(f);
  }
}

}  // namespace infera::cuda
