// `make demo` for the foundation: a dry run, on the meta device, of the allocations one
// fp32 AdamW training step of GPT-2 (124M) makes in eager mode, with every tensor tagged
// by category and Hugging Face-style label. Nothing is computed and no memory is touched
// (meta has addresses but no bytes), so it runs anywhere in a second and shows what the
// ledger answers: at the peak, what held the memory, by category and by module, and how
// much was cached but free. A second run under a 6 GiB budget shows the OOM report.
// The real training demo replaces this with the data/apps issue.
//
// Usage: fitgrad_memory_demo [OUTPUT_DIR]   (writes memory.json and trace.json there)
#include <filesystem>
#include <iostream>
#include <vector>

#include "tensor/memory/bytes.h"
#include "tensor/memory/export.h"
#include "tensor/memory/scope.h"
#include "tensor/tensor.h"

namespace fg = fitgrad;

namespace {

constexpr int64_t kVocab = 50257, kCtx = 1024, kC = 768, kHeads = 12, kLayers = 12;

struct Param {
  std::string name;
  fg::Tensor value, grad, exp_avg, exp_avg_sq;
};

fg::Tensor meta(const fg::Shape& shape) {
  return fg::Tensor::empty(shape, fg::DType::f32, fg::Device::meta());
}

std::vector<Param> make_parameters() {
  std::vector<Param> params;
  auto add = [&](const std::string& name, const fg::Shape& shape) {
    fg::LabelScope label(name);
    params.push_back({name, meta(shape), {}, {}, {}});
  };
  fg::CategoryScope cat(fg::Category::parameter);
  add("transformer.wte.weight", {kVocab, kC});
  add("transformer.wpe.weight", {kCtx, kC});
  for (int l = 0; l < kLayers; ++l) {
    const std::string h = "transformer.h." + std::to_string(l) + ".";
    add(h + "ln_1.weight", {kC});
    add(h + "ln_1.bias", {kC});
    add(h + "attn.c_attn.weight", {kC, 3 * kC});  // GPT-2's own (in, out) layout
    add(h + "attn.c_attn.bias", {3 * kC});
    add(h + "attn.c_proj.weight", {kC, kC});
    add(h + "attn.c_proj.bias", {kC});
    add(h + "ln_2.weight", {kC});
    add(h + "ln_2.bias", {kC});
    add(h + "mlp.c_fc.weight", {kC, 4 * kC});
    add(h + "mlp.c_fc.bias", {4 * kC});
    add(h + "mlp.c_proj.weight", {4 * kC, kC});
    add(h + "mlp.c_proj.bias", {kC});
  }
  add("transformer.ln_f.weight", {kC});
  add("transformer.ln_f.bias", {kC});
  return params;
}

// One step: forward saves what eager backward needs, backward frees it in reverse while
// making gradients, AdamW creates its two states on the first step.
void train_step(std::vector<Param>& params, int64_t B, int64_t T, fg::CachingAllocator& a) {
  std::vector<fg::Tensor> saved;  // in forward order
  a.mark("step 1 / forward");
  {
    fg::CategoryScope cat(fg::Category::activation);
    auto save = [&](const char* op, const fg::Shape& shape) {
      fg::OpScope scope(op);
      saved.push_back(meta(shape));
    };
    {
      fg::LabelScope label("transformer");
      save("embed", {B, T, kC});
    }
    for (int l = 0; l < kLayers; ++l) {
      fg::LabelScope label("transformer.h." + std::to_string(l));
      save("ln_1", {B, T, kC});
      save("ln_1.rstd", {B, T});
      save("c_attn", {B, T, 3 * kC});
      save("attn.scores", {B, kHeads, T, T});
      save("attn.softmax", {B, kHeads, T, T});
      save("attn.out", {B, T, kC});
      save("residual_1", {B, T, kC});
      save("ln_2", {B, T, kC});
      save("ln_2.rstd", {B, T});
      save("c_fc", {B, T, 4 * kC});
      save("gelu", {B, T, 4 * kC});
      save("residual_2", {B, T, kC});
    }
    fg::LabelScope label("lm_head");
    save("ln_f", {B, T, kC});
    save("logits", {B, T, kVocab});
    save("log_softmax", {B, T, kVocab});
  }
  a.mark("step 1 / backward");
  {
    fg::CategoryScope cat(fg::Category::gradient);
    for (Param& p : params) {
      fg::LabelScope label(p.name + ".grad");
      p.grad = meta(p.value.shape());
    }
  }
  {
    fg::CategoryScope cat(fg::Category::temporary);
    fg::LabelScope label("backward");
    while (!saved.empty()) {
      fg::Tensor dx = meta(saved.back().shape());  // the gradient flowing into this op
      saved.pop_back();
    }
  }
  a.mark("step 1 / optimizer");
  fg::CategoryScope cat(fg::Category::optimizer_state);
  for (Param& p : params) {
    fg::LabelScope label(p.name);
    {
      fg::LabelScope state("exp_avg");
      p.exp_avg = meta(p.value.shape());
    }
    fg::LabelScope state("exp_avg_sq");
    p.exp_avg_sq = meta(p.value.shape());
  }
  for (Param& p : params) p.grad = fg::Tensor();  // zero_grad(set_to_none=True)
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path out = argc > 1 ? argv[1] : "demo-out";
  std::filesystem::create_directories(out);
  fg::CachingAllocator& a = fg::allocator_for(fg::Device::meta());

  std::vector<Param> params = make_parameters();
  int64_t n = 0;
  for (const Param& p : params) n += p.value.numel();
  std::cout << "GPT-2 (124M): " << n << " parameters (published: 124,439,808), "
            << fg::format_bytes(n * 4) << " in f32\n\n";

  const int64_t B = 4, T = 1024;
  train_step(params, B, T, a);
  std::cout << "One AdamW step at batch " << B << " x " << T
            << " tokens, eager attention, fp32:\n\n"
            << fg::peak_report(a) << "\n"
            << fg::memory_summary(a) << "\n";
  fg::write_memory_json(a, (out / "memory.json").string());
  fg::write_chrome_trace(a, (out / "trace.json").string());

  a.set_capacity(6ull << 30);
  std::cout << "The same step at batch 16 under a 6 GiB budget:\n\n";
  try {
    train_step(params, 16, T, a);
  } catch (const fg::OutOfMemory& e) {
    std::cout << e.what() << "\n";
  }
  std::cout << "Wrote " << (out / "memory.json").string() << " (schema: docs/memory.md) and "
            << (out / "trace.json").string() << " (open in https://ui.perfetto.dev).\n";
  return 0;
}
