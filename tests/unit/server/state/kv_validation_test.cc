// Request validation returns etcd's exact messages (clients match on them) in etcd's order.
#include "epoch/state/kv_validation.h"

#include <catch2/catch.hpp>
#include <string>

#include "epoch/etcd_errors.h"

namespace epoch::server {
namespace {

namespace pb = etcdserverpb;

pb::RequestOp PutOp(const std::string& key) {
  pb::RequestOp op;
  op.mutable_request_put()->set_key(key);
  return op;
}

pb::RequestOp DelOp(const std::string& key, const std::string& end = "") {
  pb::RequestOp op;
  op.mutable_request_delete_range()->set_key(key);
  op.mutable_request_delete_range()->set_range_end(end);
  return op;
}

pb::RequestOp TxnOp(std::initializer_list<pb::RequestOp> then_ops,
                    std::initializer_list<pb::RequestOp> else_ops) {
  pb::RequestOp op;
  for (const auto& o : then_ops) *op.mutable_request_txn()->add_success() = o;
  for (const auto& o : else_ops) *op.mutable_request_txn()->add_failure() = o;
  return op;
}

std::string Message(const Status& s) { return s.ok() ? "OK" : s.message(); }

TEST_CASE("Range/Put/DeleteRange validation messages", "[server][validation]") {
  pb::RangeRequest r;
  CHECK(Message(ValidateRange(r)) == epoch::etcd_errors::kEmptyKey.message);
  r.set_key("a");
  CHECK(ValidateRange(r).ok());
  r.set_sort_target(static_cast<pb::RangeRequest::SortTarget>(9));
  CHECK(Message(ValidateRange(r)) == epoch::etcd_errors::kInvalidSortOption.message);
  r.set_sort_target(pb::RangeRequest::VALUE);
  r.set_sort_order(static_cast<pb::RangeRequest::SortOrder>(3));
  CHECK(Message(ValidateRange(r)) == epoch::etcd_errors::kInvalidSortOption.message);

  pb::PutRequest p;
  CHECK(Message(ValidatePut(p)) == epoch::etcd_errors::kEmptyKey.message);
  p.set_key("k");
  p.set_value("v");
  p.set_ignore_value(true);
  CHECK(Message(ValidatePut(p)) == epoch::etcd_errors::kValueProvided.message);
  p.clear_value();
  CHECK(ValidatePut(p).ok());
  p.set_ignore_lease(true);
  p.set_lease(5);
  CHECK(Message(ValidatePut(p)) == epoch::etcd_errors::kLeaseProvided.message);

  pb::DeleteRangeRequest d;
  CHECK(Message(ValidateDeleteRange(d)) == epoch::etcd_errors::kEmptyKey.message);
}

TEST_CASE("txn op count limit applies per level to compare/success/failure",
          "[server][validation]") {
  KvLimits limits;
  limits.max_txn_ops = 3;
  pb::TxnRequest t;
  for (int i = 0; i < 3; ++i) *t.add_success() = PutOp("k" + std::to_string(i));
  CHECK(ValidateTxn(t, limits).ok());
  *t.add_success() = PutOp("k9");
  CHECK(Message(ValidateTxn(t, limits)) == epoch::etcd_errors::kTooManyOps.message);

  pb::TxnRequest nested;
  *nested.add_success() = TxnOp({PutOp("a"), PutOp("b"), PutOp("c"), PutOp("d")}, {});
  CHECK(Message(ValidateTxn(nested, limits)) == epoch::etcd_errors::kTooManyOps.message);

  pb::TxnRequest compares;
  for (int i = 0; i < 4; ++i) compares.add_compare()->set_key("c");
  CHECK(Message(ValidateTxn(compares, limits)) == epoch::etcd_errors::kTooManyOps.message);
  CHECK(ValidateTxn(compares, KvLimits{}).ok());
}

TEST_CASE("txn compares and ops are checked like etcd's checkTxnRequest", "[server][validation]") {
  pb::TxnRequest t;
  t.add_compare();  // empty key
  CHECK(Message(ValidateTxn(t, {})) == epoch::etcd_errors::kEmptyKey.message);

  pb::TxnRequest empty_op;
  empty_op.add_success();
  CHECK(Message(ValidateTxn(empty_op, {})) == epoch::etcd_errors::kKeyNotFound.message);

  pb::TxnRequest bad_put;
  *bad_put.add_failure() = PutOp("");
  CHECK(Message(ValidateTxn(bad_put, {})) == epoch::etcd_errors::kEmptyKey.message);
}

TEST_CASE("duplicate keys in a txn", "[server][validation]") {
  const std::string dup = std::string(epoch::etcd_errors::kDuplicateKey.message);
  auto check = [](std::initializer_list<pb::RequestOp> ops) {
    pb::TxnRequest t;
    for (const auto& o : ops) *t.add_success() = o;
    return Message(ValidateTxn(t, {}));
  };
  CHECK(check({PutOp("a"), PutOp("a")}) == dup);
  CHECK(check({PutOp("a"), PutOp("b")}) == "OK");
  CHECK(check({PutOp("b"), DelOp("a", "c")}) == dup);
  CHECK(check({PutOp("c"), DelOp("a", "c")}) == "OK");
  CHECK(check({DelOp("a", "c"), DelOp("b", "d")}) == "OK");  // deletes may overlap
  CHECK(check({PutOp("a"), DelOp("a")}) == dup);
  // etcd builds a from-key delete as the empty interval [key, "\0"): it conflicts with nothing.
  CHECK(check({PutOp("b"), DelOp("a", std::string(1, '\0'))}) == "OK");

  // Nested txns: the then and else branches may write the same key (only one runs)...
  CHECK(check({TxnOp({PutOp("a")}, {PutOp("a")})}) == "OK");
  // ...but not a key the outer level writes, nor one an outer delete covers.
  CHECK(check({TxnOp({PutOp("a")}, {}), PutOp("a")}) == dup);
  CHECK(check({TxnOp({}, {PutOp("b")}), DelOp("a", "c")}) == dup);
  CHECK(check({TxnOp({PutOp("a")}, {}), TxnOp({PutOp("a")}, {})}) == dup);
  CHECK(check({TxnOp({DelOp("a", "z")}, {}), PutOp("m")}) == dup);
  // Inside one nested branch the usual rule holds.
  CHECK(check({TxnOp({PutOp("x"), PutOp("x")}, {})}) == dup);
}

TEST_CASE("request size limit", "[server][validation]") {
  KvLimits limits;
  CHECK(ValidateRequestSize(1536 * 1024, limits).ok());
  CHECK(Message(ValidateRequestSize(1536 * 1024 + 1, limits)) ==
        std::string(epoch::etcd_errors::kRequestTooLarge.message));
}

TEST_CASE("IsReadOnlyTxn looks into nested txns", "[server][validation]") {
  pb::TxnRequest t;
  t.add_success()->mutable_request_range()->set_key("a");
  CHECK(IsReadOnlyTxn(t));
  *t.add_failure() = TxnOp({}, {DelOp("a")});
  CHECK_FALSE(IsReadOnlyTxn(t));
}

}  // namespace
}  // namespace epoch::server
