// `run --graph`: one pipeline captured from `main` (and the streams it forks to) into an instantiated CUDA graph.
#pragma once
#include <cstddef>
#include <functional>

#include <cuda_runtime_api.h>

#include "kernels/common/check.hpp"

namespace dropbench {

class PipelineGraph {
 public:
  PipelineGraph(cudaStream_t main, const std::function<void()>& enqueue) {
    DB_CUDA(cudaStreamBeginCapture(main, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue();
    } catch (...) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(main, &g);  // leave the stream usable; the capture is invalid anyway
      if (g) cudaGraphDestroy(g);
      throw;
    }
    DB_CUDA(cudaStreamEndCapture(main, &graph_));
    DB_CUDA(cudaGraphGetNodes(graph_, nullptr, &nodes_));
    DB_CUDA(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  ~PipelineGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  PipelineGraph(const PipelineGraph&) = delete;
  PipelineGraph& operator=(const PipelineGraph&) = delete;
  void launch(cudaStream_t s) const { DB_CUDA(cudaGraphLaunch(exec_, s)); }
  size_t nodes() const { return nodes_; }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  size_t nodes_ = 0;
};

}  // namespace dropbench
