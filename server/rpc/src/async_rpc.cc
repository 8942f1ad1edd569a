#include "epoch/rpc/async_rpc.h"

#include <algorithm>

#include "epoch/thread_name.h"

namespace epoch::server::rpc {

void detail::OpGate::Drain() {
  for (;;) {
    std::vector<Tag*> refused;
    {
      std::lock_guard lock(refused_mu_);
      refused.swap(refused_);
    }
    if (refused.empty()) return;
    for (Tag* tag : refused) {
      tag->Delivered();
      tag->Done(false);
    }
  }
}

void UnaryReactor::Finish(grpc::Status status) {
  detail::UnaryOps* call = nullptr;
  {
    std::lock_guard lock(mu_);
    if (call_ == nullptr) {
      held_ = std::move(status);
      return;
    }
    call = call_;
  }
  call->SendFinish(std::move(status));
}

void UnaryReactor::Bind(detail::UnaryOps* call) {
  std::optional<grpc::Status> held;
  {
    std::lock_guard lock(mu_);
    call_ = call;
    held = std::move(held_);
    held_.reset();
  }
  if (held) call->SendFinish(std::move(*held));
}

bool ClientQueue::Run(const std::function<void(grpc::CompletionQueue*)>& start) {
  std::lock_guard lock(mu_);
  if (cq_ == nullptr) return false;
  start(cq_);
  return true;
}

void ClientQueue::Open(grpc::CompletionQueue* cq) {
  std::lock_guard lock(mu_);
  cq_ = cq;
}

bool ClientQueue::Post(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  if (cq_ == nullptr) return false;
  PostLocked(std::move(fn));
  return true;
}

void ClientQueue::PostLocked(std::function<void()> fn) {
  posted_.push_back(std::move(fn));
  if (!alarm_set_) {
    alarm_set_ = true;
    alarm_.Set(cq_, gpr_inf_past(GPR_CLOCK_MONOTONIC), drain_.Started());
  }
}

void ClientQueue::Dispatch(std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    if (cq_ != nullptr) return PostLocked(std::move(fn));
  }
  fn();
}

void ClientQueue::RunPosted() {
  std::vector<std::function<void()>> posted;
  {
    std::lock_guard lock(mu_);
    posted.swap(posted_);
    alarm_set_ = false;
  }
  for (auto& fn : posted) fn();
}

std::vector<std::function<void()>> ClientQueue::Close() {
  std::lock_guard lock(mu_);
  cq_ = nullptr;
  return std::move(posted_);
}

void Server::AddService(grpc::Service* service) {
  if (std::find(services_.begin(), services_.end(), service) == services_.end()) {
    services_.push_back(service);
  }
}

void Server::AddTo(grpc::ServerBuilder& builder) {
  for (grpc::Service* service : services_) builder.RegisterService(service);
  for (int i = 0; i < threads_; ++i) queues_.push_back(builder.AddCompletionQueue());
}

void Server::Start(ClientQueue* client) {
  for (auto& queue : queues_) {
    for (auto& method : methods_) {
      for (int i = 0; i < method->pending; ++i) method->RequestCall(queue.get());
    }
  }
  for (auto& queue : queues_) {
    workers_.emplace_back([cq = queue.get()] {
      SetThreadName("epoch-grpc");
      void* tag = nullptr;
      bool ok = false;
      while (cq->Next(&tag, &ok)) {
        auto* t = static_cast<detail::Tag*>(tag);
        t->Delivered();
        t->Done(ok);
      }
    });
  }
  client_ = client;
  if (client_ != nullptr && !queues_.empty()) client_->Open(queues_.front().get());
}

void Server::Stop() {
  if (stopped_) return;
  stopped_ = true;
  gate_.Close();
  if (client_ != nullptr) {
    // No call starts on a queue that shuts down: what was posted runs here, before.
    for (auto& fn : client_->Close()) fn();
  }
  for (auto& queue : queues_) queue->Shutdown();
  for (std::thread& worker : workers_) worker.join();
  if (workers_.empty()) {  // never started: drain here
    for (auto& queue : queues_) {
      void* tag = nullptr;
      bool ok = false;
      while (queue->Next(&tag, &ok)) {
        auto* t = static_cast<detail::Tag*>(tag);
        t->Delivered();
        t->Done(ok);
      }
    }
  }
  workers_.clear();
  gate_.Drain();
}

}  // namespace epoch::server::rpc
