// The kernel: one thread per element.
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void add_one_kernel(const float* in, float* out, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) {
    out[i] = in[i] + 1.0f;
  }
}

torch::Tensor add_one_cuda(const torch::Tensor& input) {
  auto output = torch::empty_like(input);
  const int64_t n = input.numel();
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  if (n > 0) {
    add_one_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        input.data_ptr<float>(), output.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return output;
}
