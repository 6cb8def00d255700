// Optimizer offload (ZeRO-Offload's optimizer half, issue 15): the optimizer's state and a
// copy of every trained parameter live in host memory, and the update runs on the CPU.
//
// Note [Optimizer offload]
// The device keeps the parameters and, during backward, their gradients; the host keeps
// a master copy of each trained parameter, which the optimizer owns and updates, and the
// optimizer's state (AdamW's two moments: 8 of the 12 bytes per parameter that full
// fine-tuning spends beside the weights and gradients). Each step, after clipping and the
// loss scaler's check on the device: every gradient is copied to the host and dropped on
// the device (pull_grads), the optimizer steps on the host, and every master is copied
// back into its device parameter (push_params). Host memory is the CPU's allocator (or,
// in a dry run on meta, meta:1: the planned host memory, a ledger of its own, so a plan
// shows what the device saves and what the host takes). The copies are synchronous for
// now: the update does not yet overlap the backward.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace fitgrad::optim {

// The host that offloads from `device`: cpu for cuda:N, meta:1 for meta (a plan); throws
// naming the device for cpu, whose parameters are host memory already.
Device offload_host(Device device);

class OptimizerOffload {
 public:
  using Named = std::vector<std::pair<std::string, Tensor>>;
  // Host masters of the (device) trained parameters on `host` (offload_host of their
  // device), allocated as optimizer state and labelled "<name>.offload_master".
  OptimizerOffload(const Named& device_params, Device host);
  // The masters, named as the parameters, for the optimizer.
  const Named& host_params() const { return host_; }
  // masters = the device parameters (after a checkpoint was loaded into the model).
  void sync_from_device();
  // Each defined device gradient, copied to its master's gradient and dropped on the device.
  void pull_grads();
  // Each device parameter = its master; the masters' gradients are dropped.
  void push_params();

 private:
  Named device_, host_;
};

}  // namespace fitgrad::optim
