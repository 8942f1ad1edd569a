// consumer <endpoint>: puts a key through the installed epoch::client and reads it back.
// Exit 0 only when the value read equals the value written.
#include <chrono>
#include <iostream>
#include <string>

#include "epoch/client/client.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: consumer <endpoint>\n";
    return 2;
  }
  epoch::client::ClientOptions options;
  options.endpoints = {argv[1]};
  options.call_timeout = std::chrono::seconds(30);  // covers the first election
  options.retry.max_attempts = 0;                   // until the deadline
  auto client = epoch::client::Client::Create(options);
  if (!client.ok()) {
    std::cerr << "create: " << client.status().ToString() << "\n";
    return 1;
  }
  const std::string value = "written-by-an-installed-client";
  auto put = (*client)->Put("consumer/key", value);
  if (!put.ok()) {
    std::cerr << "put: " << put.status().ToString() << "\n";
    return 1;
  }
  auto got = (*client)->Get("consumer/key");
  if (!got.ok() || !got->has_value() || (*got)->value() != value) {
    std::cerr << "get: " << (got.ok() ? "wrong or missing value" : got.status().ToString()) << "\n";
    return 1;
  }
  std::cout << "consumer/key = " << (*got)->value() << " (revision " << put->header().revision()
            << ")\n";
  return 0;
}
