// Compiled by g++ under the preloaded shim in preload.sh: enough templates
// and standard library to keep the compiler's heap busy, and a result to
// check when it runs.
#include <algorithm>
#include <iostream>
#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace
{
  template<typename Key>
  std::map<Key, int> histogram(const std::vector<Key>& keys)
  {
    std::map<Key, int> counts;
    for (const Key& key : keys)
      counts[key]++;
    return counts;
  }
}

int main()
{
  std::vector<std::string> words;
  for (int i = 0; i < 20000; i++)
    words.push_back(std::to_string(i % 97) + "-" + std::to_string(i % 13));
  auto counts = histogram(words);

  std::vector<long> values(100000);
  std::iota(values.begin(), values.end(), 1);
  std::reverse(values.begin(), values.end());
  std::sort(values.begin(), values.end());
  long sum = std::accumulate(values.begin(), values.end(), 0L);

  std::cout << counts.size() << " " << counts.begin()->second << " " << sum
            << "\n";
  return 0;
}
