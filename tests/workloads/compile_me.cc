// Compiled by tests/gcc_integration_test.sh under poolscope: the compiler (cc1plus) is the real
// process under test. Templates, strings, threads and maps keep it allocating and reallocating.
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

int main() {
  std::map<std::string, int> m;
  for (int i = 0; i < 10000; ++i) m[std::to_string(i)] = i;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      std::vector<std::string> v;
      for (int i = 0; i < 50000; ++i) v.push_back(std::to_string(i * t));
    });
  }
  for (auto& t : threads) t.join();
  std::printf("%zu\n", m.size());
}
