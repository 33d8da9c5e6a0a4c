// Python binding for add_one: a CUDA tensor in, the same tensor plus one out.
#include <torch/extension.h>

torch::Tensor add_one_cuda(const torch::Tensor& input);

torch::Tensor add_one(const torch::Tensor& input) {
  TORCH_CHECK(input.is_cuda(), "add_one: expected a CUDA tensor");
  TORCH_CHECK(input.scalar_type() == torch::kFloat, "add_one: expected float32");
  return add_one_cuda(input.contiguous());
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("add_one", &add_one, "x + 1, computed by a CUDA kernel");
}
