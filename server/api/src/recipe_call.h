// RecipeCall: one unary Lock or Campaign call that may wait for a long time. It finishes exactly
// once — with the result, or with "context canceled" as soon as the client cancels (or its
// deadline passes) — and hands the cleanup of the caller's key to whichever path loses:
//
//   - cancel while a write is in flight: the write's completion finds the call finished and
//     cleans up;
//   - cancel while waiting: the wait is cancelled and, if that won, the cleanup runs here;
//   - the wait ends at the same time as the cancel: its completion finds the call finished and
//     cleans up.
//
// Only the path that Claim()s the call may touch the response, the context and the reactor.
//
// Threading: every method is thread-safe. The reactor deletes itself after OnDone; RecipeCall is
// shared by the pending callbacks and outlives it.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "epoch/api/recipe_wait.h"
#include "epoch/rpc/async_rpc.h"

namespace epoch::server {

class RecipeCall : public std::enable_shared_from_this<RecipeCall> {
 public:
  // Creates the call and its reactor (return reactor() from the handler).
  static std::shared_ptr<RecipeCall> Create(rpc::CallContext* ctx) {
    std::shared_ptr<RecipeCall> call(new RecipeCall(ctx));
    call->reactor_ = new Reactor(call);
    return call;
  }

  [[nodiscard]] rpc::UnaryReactor* reactor() const { return reactor_; }
  // Only for the path that finishes the call (inside Finish's `fill`): gone after OnDone.
  [[nodiscard]] rpc::CallContext* context() const { return ctx_; }
  // The client's deadline (copied: safe after the call ended).
  [[nodiscard]] std::chrono::system_clock::time_point deadline() const { return deadline_; }

  // Finishes the call with `status`; `fill` runs first (only if this call wins) to fill the
  // response. Returns false if the call had already finished (then nothing was touched).
  bool Finish(const grpc::Status& status, const std::function<void()>& fill = {}) {
    if (!Claim()) return false;
    if (fill) fill();
    reactor_->Finish(status);
    return true;
  }

  [[nodiscard]] bool finished() {
    std::lock_guard lock(mu_);
    return finished_;
  }

  // What removes the caller's key if the call ends without handing it over (set before the key
  // can exist). Runs at most once.
  void SetCleanup(std::function<void()> cleanup) {
    std::lock_guard lock(mu_);
    cleanup_ = std::move(cleanup);
  }
  void RunCleanup() {
    std::function<void()> cleanup;
    {
      std::lock_guard lock(mu_);
      cleanup = std::move(cleanup_);
      cleanup_ = nullptr;
    }
    if (cleanup) cleanup();
  }

  // Attaches the wait in progress; false (and the wait is cancelled) if the call already ended.
  bool SetWait(const std::shared_ptr<PredecessorWait>& wait) {
    {
      std::lock_guard lock(mu_);
      if (!finished_) {
        wait_ = wait;
        return true;
      }
    }
    wait->Cancel();
    return false;
  }

 private:
  class Reactor final : public rpc::UnaryReactor {
   public:
    explicit Reactor(std::shared_ptr<RecipeCall> call) : call_(std::move(call)) {}
    void OnCancel() override { call_->OnCancel(); }
    void OnDone() override { delete this; }

   private:
    std::shared_ptr<RecipeCall> call_;
  };

  explicit RecipeCall(rpc::CallContext* ctx) : ctx_(ctx), deadline_(ctx->deadline()) {}

  bool Claim() {
    std::lock_guard lock(mu_);
    if (finished_) return false;
    finished_ = true;
    return true;
  }

  void OnCancel() {
    auto self = shared_from_this();  // Finish may run OnDone inline, which drops the reactor's ref
    if (!Finish(ContextCanceled())) return;  // already answered: the caller owns its key
    std::shared_ptr<PredecessorWait> wait;
    {
      std::lock_guard lock(mu_);
      wait = std::move(wait_);
    }
    // No wait yet: the write in flight cleans up when it completes and finds the call finished.
    if (wait && wait->Cancel()) RunCleanup();
  }

  rpc::CallContext* const ctx_;
  const std::chrono::system_clock::time_point deadline_;
  Reactor* reactor_ = nullptr;  // valid until Finish (the reactor deletes itself in OnDone)

  std::mutex mu_;
  bool finished_ = false;                  // guarded by mu_
  std::function<void()> cleanup_;          // guarded by mu_
  std::shared_ptr<PredecessorWait> wait_;  // guarded by mu_
};

}  // namespace epoch::server
